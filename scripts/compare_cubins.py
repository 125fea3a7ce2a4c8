#!/usr/bin/env python3
"""Do two builds compile each GPU function to the same machine code? For refactors that must not change
what runs: build the objects before and after with `nvcc -keep` (scripts/compare_kernels.sh does), then

    python3 scripts/compare_cubins.py BEFORE_DIR AFTER_DIR

reads every *.cubin under each folder (ELF files: one .text.<function> section a function), and compares
each function's instruction bytes, its register count and the relocations in it (offset, type, addend),
as well as the size of its parameter block and of its static shared memory. Equal bytes mean equal SASS;
it needs no cuobjdump or nvdisasm. A function is matched first by its code: a renamed function whose
code is the same counts as identical (its new name is shown). Prints one line a function and a summary;
exits 1 if any function of BEFORE has no identical function in AFTER.
"""
import hashlib
import os
import struct
import subprocess
import sys


def sections(path):
    """{name: (sh_type, sh_info, data)} of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:4] != b"\x7fELF" or b[4] != 2:
        raise SystemExit(f"{path}: not an ELF64 file")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    heads = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, _link, info, _align, _ent = struct.unpack_from(
            "<IIQQQQIIQQ", b, shoff + i * shentsize)
        heads.append((name, typ, off, size, info))
    stroff, strsize = heads[shstrndx][2], heads[shstrndx][3]
    strtab = b[stroff:stroff + strsize]
    out = {}
    for name, typ, off, size, info in heads:
        end = strtab.index(b"\0", name)
        data = b[off:off + size] if typ != 8 else b""  # SHT_NOBITS: no bytes, just a size
        out[strtab[name:end].decode()] = (typ, info, data, size)
    return out


def nv_info(secs):
    """{symbol name: {attribute: value}} from .nv.info: per function its register count (0x2f) and frame
    size (0x11), from attributes {format 4, attribute, size, (symbol index, value)}."""
    syms = []
    symtab, strtab = secs[".symtab"][2], secs[".strtab"][2]
    for k in range(0, len(symtab), 24):
        name = struct.unpack_from("<I", symtab, k)[0]
        syms.append(strtab[name:strtab.index(b"\0", name)].decode())
    out, info, k = {}, secs.get(".nv.info", (0, 0, b"", 0))[2], 0
    while k + 4 <= len(info):
        fmt, attr, size = struct.unpack_from("<BBH", info, k)
        if fmt != 4:  # only the sized attributes carry values; the others are 2 bytes of value in `size`
            k += 4
            continue
        if attr in (0x2F, 0x11) and size == 8:
            sym, val = struct.unpack_from("<II", info, k + 4)
            out.setdefault(syms[sym], {})[attr] = val
        k += 4 + size
    return out


def functions(path):
    """{mangled name: (fingerprint, instructions, registers, frame bytes, parameter bytes, shared bytes)}
    for each function of one cubin."""
    secs = sections(path)
    attrs = nv_info(secs)
    out = {}
    for name, (_typ, _info, data, _size) in secs.items():
        if not name.startswith(".text."):
            continue
        fn = name[len(".text."):]
        relocs = b""
        for kind, step in ((".rela.text.", 24), (".rel.text.", 16)):  # Elf64_Rela / Elf64_Rel
            data_r = secs.get(kind + fn, (0, 0, b"", 0))[2]
            for k in range(0, len(data_r), step):  # offset, type, addend; the symbol's index is left out
                off, inf = struct.unpack_from("<QQ", data_r, k)
                add = struct.unpack_from("<q", data_r, k + 16)[0] if step == 24 else 0
                relocs += struct.pack("<QIq", off, inf & 0xFFFFFFFF, add)
        regs = attrs.get(fn, {}).get(0x2F, -1)
        frame = attrs.get(fn, {}).get(0x11, 0)
        params = secs.get(".nv.constant0." + fn, (0, 0, b"", 0))[3]
        shared = secs.get(".nv.shared." + fn, (0, 0, b"", 0))[3]
        h = hashlib.sha256(data + relocs + struct.pack("<iIII", regs, frame, params, shared)).hexdigest()[:16]
        out[fn] = (h, len(data) // 16, regs, frame, params, shared)
    return out


def demangle(names):
    if not names:
        return {}
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return dict(zip(names, r.stdout.splitlines()))


def cubins(root):
    found = []
    for d, _, files in os.walk(root):
        found += [os.path.join(d, f) for f in files if f.endswith(".cubin")]
    return sorted(found)


def collect(root):
    fns = {}
    for c in cubins(root):
        for fn, fp in functions(c).items():
            fns[(os.path.relpath(c, root), fn)] = fp
    return fns


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    before, after = collect(sys.argv[1]), collect(sys.argv[2])
    names = demangle(sorted({fn for _, fn in before} | {fn for _, fn in after}))
    by_hash = {}
    for (cub, fn), fp in after.items():
        by_hash.setdefault(fp[0], []).append((cub, fn))
    used = set()
    same = differ = 0
    for (cub, fn), (h, n, regs, frame, params, shared) in sorted(before.items()):
        hits = by_hash.get(h, [])
        pick = next((x for x in hits if x[1] == fn), hits[0] if hits else None)
        what = f"{n} instr, {regs} regs, {frame} B frame, {params} B params, {shared} B shared"
        if pick:
            used.add(pick)
            same += 1
            same_place = pick[0] == cub and names[pick[1]] == names[fn]
            moved = "" if same_place else f"  ->  {pick[0]}: {names[pick[1]]}"
            print(f"identical  {cub}: {names[fn]} ({what}){moved}")
        else:
            differ += 1
            now = [fp for (_, f2), fp in after.items() if names[f2] == names[fn]]
            now_s = f"now {now[0][1]} instr, {now[0][2]} regs" if now else "no function of that name now"
            print(f"DIFFERENT  {cub}: {names[fn]} ({what}; {now_s})")
    for (cub, fn), fp in sorted(after.items()):
        if (cub, fn) not in used and fp[0] not in {before_fp[0] for before_fp in before.values()}:
            print(f"new        {cub}: {names[fn]} ({fp[1]} instr, {fp[2]} regs)")
    print(f"{same} identical, {differ} different, of {len(before)} functions before ({len(after)} after)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
