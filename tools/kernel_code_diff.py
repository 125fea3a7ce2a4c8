#!/usr/bin/env python3
"""Compares the machine code (SASS) of every kernel in two sets of nvcc-built objects, without cuobjdump.

    tools/kernel_code_diff.py OLD_DIR NEW_DIR [name=old_obj:new_obj ...]

Each directory holds a build tree (build/ of two commits). For every object with device code, the cubins
embedded in its .nv_fatbin section are read, and each kernel's .text section (its SASS, byte for byte) is
compared with the same kernel's in the other tree, together with the sections that go with it (resource
use, parameter bank, static shared memory size, relocations). Objects are matched by path, or as named
in the pairs (for a renamed file). Kernel names drop the hash nvcc gives an anonymous namespace (it
depends on the file). Prints one line per object with kernels; exits 1 if any kernel differs or is
missing on one side. Fails on a compressed fatbin (this Makefile's builds are not compressed).
"""
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50


def fatbin_section(obj):
    with tempfile.NamedTemporaryFile(dir=os.path.dirname(obj) or ".", suffix=".fatbin") as tmp:
        r = subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, tmp.name],
                           capture_output=True)
        if r.returncode != 0:
            return b""
        with open(tmp.name, "rb") as f:
            return f.read()


def cubins(blob):
    """The ELF payloads of a fatbin section (several containers may follow one another)."""
    out, pos = [], 0
    while pos + 16 <= len(blob):
        magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned
            continue
        entry, end = pos + hsize, pos + hsize + fsize
        while entry + 16 <= end:
            kind, _v, ehsize, esize = struct.unpack_from("<HHIQ", blob, entry)
            payload = blob[entry + ehsize:entry + ehsize + esize]
            if kind == 2:
                if payload[:4] != b"\x7fELF":
                    sys.exit("a compressed cubin: build with -Xfatbin -compress-all=false or use cuobjdump")
                out.append(payload)
            entry += ehsize + esize
        pos = end
    return out


def kernel_sections(elf):
    """{kernel: {section kind: bytes}} of an ELF64 cubin: each kernel's .text (its SASS) and the sections
    that go with it (.nv.info: registers, parameters, barriers; .nv.constant0: the parameter bank's size;
    .nv.shared: static shared memory; .rel(a).text: its relocations)."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    stroff = heads[shstrndx][4]

    def name(off):
        return elf[stroff + off:elf.index(b"\0", stroff + off)].decode()

    names = [name(h[0]) for h in heads]
    kernels = {n[len(".text."):] for n in names if n.startswith(".text.")}
    out = {k: {} for k in kernels}
    for n, h in zip(names, heads):
        for prefix in (".text.", ".nv.info.", ".nv.constant0.", ".nv.shared.", ".rel.text.", ".rela.text."):
            if n.startswith(prefix) and n[len(prefix):] in kernels:
                type_nobits = h[1] == 8  # SHT_NOBITS (.nv.shared): only the size counts
                data = struct.pack("<Q", h[5]) if type_nobits else elf[h[4]:h[4] + h[5]]
                out[n[len(prefix):]][prefix] = data
    return out


def kernels(obj):
    """{kernel name (anonymous namespace's hash dropped): sha256 of its sections} of an object."""
    code = {}
    for elf in cubins(fatbin_section(obj)):
        for kernel, sections in kernel_sections(elf).items():
            key = re.sub(r"\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_[0-9a-f]{8}", "_GLOBAL__N_", kernel)
            h = hashlib.sha256()
            for kind in sorted(sections):
                h.update(kind.encode() + struct.pack("<Q", len(sections[kind])) + sections[kind])
            code[key] = h.hexdigest()
    return code


def objects(root):
    found = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".o"):
                path = os.path.join(d, f)
                found[os.path.relpath(path, root)] = path
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old_root, new_root = sys.argv[1], sys.argv[2]
    old, new = objects(old_root), objects(new_root)
    pairs = {k: (old[k], new[k]) for k in old if k in new}
    for arg in sys.argv[3:]:
        label, spec = arg.split("=", 1)
        a, b = spec.split(":", 1)
        pairs[label] = (os.path.join(old_root, a), os.path.join(new_root, b))
    bad = 0
    for label in sorted(pairs):
        ka, kb = kernels(pairs[label][0]), kernels(pairs[label][1])
        if not ka and not kb:
            continue
        same = [k for k in ka if kb.get(k) == ka[k]]
        differ = [k for k in ka if k in kb and kb[k] != ka[k]]
        only = sorted(set(ka) ^ set(kb))
        status = "identical" if not differ and not only else "DIFFERENT"
        print(f"{label}: {len(same)} of {len(ka)} kernels identical ({status})")
        for k in differ:
            print(f"  differs: {k}")
        for k in only:
            print(f"  only in {'old' if k in ka else 'new'}: {k}")
        bad |= status != "identical"
    return bad


if __name__ == "__main__":
    sys.exit(main())
