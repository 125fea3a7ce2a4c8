#!/usr/bin/env python3
"""Cross-check of our ViT (CPU double reference and bf16 GPU model) against timm's VisionTransformer (GPU machine).

For each configuration, build/vit_dump (tests/tools/vit_dump.cu) initialises our ViT with vit_init and writes
its parameter table and initial arena, uint8 image batches (B, H, W, C) with class labels, the logits, loss and
gradients of batch 0 from our CPU double reference (ref_*) and from our bf16 GPU model, and the bf16 model's
losses over 10 AdamW steps. This script builds timm's VisionTransformer (class token, global_pool='token',
mlp_ratio 4, qkv_bias; fp32, TF32 off, timm's fused attention off), loads the same parameters by name (separate
q, k, v are concatenated into timm's attn.qkv), feeds the same images normalised NCHW exactly as our patch
kernel does (float32 (u * (1/255) - mean) * (1/std); ImageNet's statistics for 3 channels, 0.5/0.5 for 1) and
compares:

  exact (our CPU double reference against timm fp32):
    logits  ||ours - timm|| / ||timm|| over the B x classes logits of batch 0       bound 1e-5
    loss    |ours - timm| / |timm|                                                  bound 1e-5
    grads   per tensor ||g_ours - g_timm|| / ||g_timm||, worst tensor reported       bound 1e-4
            The key bias (attn.k.bias, or the k third of attn.qkv.bias) is left out: its true gradient is
            exactly 0 (softmax ignores the constant q.b_k added to a row of scores), so both sides hold
            rounding noise; its largest |g| on each side is reported instead.
  bf16 (our GPU model against the same timm fp32):
    logits 2e-2, loss 1e-2, grads 2e-2 per tensor, as above; for scale, each line also reports the same error
    of timm itself under bf16 autocast against its fp32 self ("torch_bf16"): an error of that size is bf16
    rounding, not a bug.
    losses  torch.optim.AdamW (foreach=False, betas (0.9, 0.999), eps 1e-8, weight decay only on tensors with
            decay=true) on timm over the same batches: max over the steps + 1 losses of |ours - timm| / |timm|
            (each step's loss before its update, then the loss on one more batch after the last update), bound
            1e-2. No clipping, constant LR.
    params_final  per tensor ||p_ours - p_timm|| / ||p_timm - p_0|| after the last step: information only
            (AdamW's normalised step turns small gradient differences into O(lr) parameter differences).

One JSON line per check; exit status 1 if any check fails.

  GPU machine:  make -j build/vit_dump && python3 tests/timm_vit_crosscheck.py      (needs CUDA, torch, timm)
  self-test:    python3 tests/timm_vit_crosscheck.py --self-test                     (CPU; no GPU, no timm)

The self-test runs vit_dump --ref-only 1 (CPU reference files only) and compares them, with tighter bounds
(1e-6), against a plain PyTorch ViT written here (float64 on the CPU; timm's parameter names and semantics),
checking the name mapping, normalisation, patch order and gradient comparison without a GPU or timm. With
--model timm it compares timm itself, in float32 on the CPU with the exact bounds (where timm is installed).
--keep DIR keeps the dumps; --reuse DIR (with --device cpu) checks dumps written earlier, e.g. on another machine.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from crosscheck_common import by_name, grad_errors, param_errors, rel, sig, slice_of, worst

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 10
LR, WD, BETAS, EPS = 1e-3, 0.1, (0.9, 0.999), 1e-8  # AdamW as vit_dump runs it: constant LR, no clipping
MODEL = dict(layers=2, heads=2, classes=10, B=4)  # width 64 * heads = 128

# name, image side, patch side, input channels, qkv layout
CONFIGS = [
    ("rgb32_p8_fused", 32, 8, 3, "fused"),  # 16 patches + cls = 17 tokens
    ("grey28_p4_separate", 28, 4, 1, "separate"),  # 49 patches + cls = 50 tokens (Fashion-MNIST's shape)
]
BOUNDS = {
    "exact": {"logits": 1e-5, "loss": 1e-5, "grads": 1e-4},
    "self_test": {"logits": 1e-6, "loss": 1e-6, "grads": 1e-6},  # float64 against double stored as float32
    "bf16": {"logits": 2e-2, "loss": 1e-2, "grads": 2e-2, "losses": 1e-2, "params_final": None},  # None: info only
}
QKV_PART = re.compile(r"blocks\.(\d+)\.attn\.([qkv])\.(weight|bias)")


# ----------------------------------------------------------------------------------------------------------------
# The dump


def run_dump(binary, d, image, patch, channels, qkv, ref_only):
    cmd = [binary, "--image", str(image), "--patch", str(patch), "--channels", str(channels), "--qkv", qkv,
           "--classes", str(MODEL["classes"]), "--layers", str(MODEL["layers"]), "--heads", str(MODEL["heads"]),
           "-b", str(MODEL["B"]), "--steps", str(STEPS), "--lr", str(LR), "--wd", str(WD),
           "--ref-only", "1" if ref_only else "0", "--out", d]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}: {(r.stderr or r.stdout).strip()}")


def load_dump(d, ref_only):
    with open(os.path.join(d, "table.json")) as f:
        table = json.load(f)
    cfg, total = table["config"], table["total"]
    n, B, S, C, K = cfg["steps"] + 1, cfg["B"], cfg["image"], cfg["channels"], cfg["classes"]
    f32 = lambda name: np.fromfile(os.path.join(d, name), dtype=np.float32)
    dump = {
        "table": table,
        "params0": f32("params0.bin"),
        "pixels": np.fromfile(os.path.join(d, "pixels.bin"), dtype=np.uint8).reshape(n, B, S, S, C),
        "labels": np.fromfile(os.path.join(d, "labels.bin"), dtype=np.int32).reshape(n, B),
        "ref_logits0": f32("ref_logits0.bin").reshape(B, K),
        "ref_loss0": float(f32("ref_loss0.bin")[0]),
        "ref_grads0": f32("ref_grads0.bin"),
    }
    assert dump["params0"].size == total and dump["ref_grads0"].size == total, "dump sizes disagree with table.json"
    assert dump["labels"].min() >= 0 and dump["labels"].max() < K, "labels outside the classes"
    if not ref_only:
        assert not cfg["ref_only"], f"{d} holds a --ref-only dump: it has no bf16 files"
        dump.update(logits0=f32("logits0.bin").reshape(B, K), loss0=float(f32("loss0.bin")[0]),
                    grads0=f32("grads0.bin"), losses=f32("losses.bin").astype(np.float64),
                    params_final=f32("params_final.bin"))
        assert dump["grads0"].size == total and dump["params_final"].size == total
        assert dump["losses"].size == n
    return dump


def images(dump, i):
    """Batch i normalised NCHW float32, with the patch kernel's float32 operations in its order."""
    cfg = dump["table"]["config"]
    mean = np.array(cfg["mean"], dtype=np.float32)
    inv_std = np.float32(1.0) / np.array(cfg["std"], dtype=np.float32)
    u = dump["pixels"][i].astype(np.float32)  # (B, H, W, C)
    x = (u * (np.float32(1.0) / np.float32(255.0)) - mean) * inv_std
    assert x.dtype == np.float32
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


# ----------------------------------------------------------------------------------------------------------------
# Our names <-> timm's: identical except that separate q, k, v (C, C) / (C) are rows [0, C), [C, 2C), [2C, 3C)
# of timm's attn.qkv.


def timm_name(name):
    m = QKV_PART.fullmatch(name)
    return f"blocks.{m.group(1)}.attn.qkv.{m.group(3)}" if m else name


def to_timm(table, flat):
    """Our flat arena as timm's state dict (numpy arrays by timm's names)."""
    out, parts = {}, {}
    for t in table["tensors"]:
        m = QKV_PART.fullmatch(t["name"])
        if m:
            parts.setdefault(timm_name(t["name"]), {})[m.group(2)] = slice_of(flat, t)
        else:
            out[t["name"]] = slice_of(flat, t)
    for name, p in parts.items():
        assert sorted(p) == ["k", "q", "v"], f"{name}: q, k and v must all be present"
        out[name] = np.concatenate([p["q"], p["k"], p["v"]], axis=0)
    return out


def from_timm(table, named):
    """timm's tensors (numpy by timm's names) by our names and shapes."""
    C = table["config"]["embed_dim"]
    out = {}
    for t in table["tensors"]:
        a = named[timm_name(t["name"])]
        m = QKV_PART.fullmatch(t["name"])
        if m:
            i = "qkv".index(m.group(2))
            a = a[i * C:(i + 1) * C]
        assert list(a.shape) == t["shape"], f"{t['name']}: timm's shape {list(a.shape)} is not ours {t['shape']}"
        out[t["name"]] = a
    return out


def timm_decay(table):
    """Weight decay by timm name; the q, k, v parts of one qkv tensor must agree."""
    decay = {}
    for t in table["tensors"]:
        n = timm_name(t["name"])
        assert decay.setdefault(n, t["decay"]) == t["decay"], f"{n}: its q, k, v parts disagree on weight decay"
    return decay


# ----------------------------------------------------------------------------------------------------------------
# The models: timm's, or a plain one written here with timm's parameter names and semantics (for --self-test).


class PlainAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, hs).permute(2, 0, 3, 1, 4)  # each (B, heads, T, hs)
        att = torch.softmax((q @ k.transpose(-2, -1)) / hs**0.5, dim=-1)  # no mask: every token sees every token
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class PlainMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))  # exact erf GELU


class PlainBlock(nn.Module):
    def __init__(self, dim, heads, eps):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = PlainAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = PlainMlp(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PlainPatchEmbed(nn.Module):
    def __init__(self, in_chans, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, grid * grid, C), patches in row-major grid order


class PlainViT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, eps = cfg["embed_dim"], cfg["ln_eps"]
        self.patch_embed = PlainPatchEmbed(cfg["channels"], C, cfg["patch"])
        self.cls_token = nn.Parameter(torch.zeros(1, 1, C))
        self.pos_embed = nn.Parameter(torch.zeros(1, cfg["tokens"], C))
        self.blocks = nn.ModuleList(PlainBlock(C, cfg["heads"], eps) for _ in range(cfg["layers"]))
        self.norm = nn.LayerNorm(C, eps=eps)
        self.head = nn.Linear(C, cfg["classes"])

    def forward(self, images):
        x = self.patch_embed(images)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


def timm_setup():
    """Imports timm and turns its fused attention off; returns (timm module, how it was turned off)."""
    import timm
    try:
        from timm.layers import set_fused_attn
    except ImportError:
        set_fused_attn = None
    if set_fused_attn is not None:
        set_fused_attn(False)  # read when an Attention is built, so before any model exists
        return timm, "timm.layers.set_fused_attn(False)"
    return timm, "no set_fused_attn in this timm: fused_attn = False on each module that has it"


def build_model(kind, cfg):
    if kind == "plain":
        return PlainViT(cfg)
    from timm.models.vision_transformer import VisionTransformer
    model = VisionTransformer(img_size=cfg["image"], patch_size=cfg["patch"], in_chans=cfg["channels"],
                              num_classes=cfg["classes"], embed_dim=cfg["embed_dim"], depth=cfg["layers"],
                              num_heads=cfg["heads"], mlp_ratio=4.0, qkv_bias=True, class_token=True,
                              global_pool="token")
    # The explicit softmax path on every version: older timm has no set_fused_attn (and before 0.9 no fused path);
    # newer timm reads the flag per module.
    for m in model.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = False
    # Guard the semantics the comparison assumes, so that a timm whose defaults changed fails with a reason.
    for name, m in model.named_modules():
        if isinstance(m, nn.LayerNorm) and abs(m.eps - cfg["ln_eps"]) > 1e-6 * cfg["ln_eps"]:
            raise RuntimeError(f"timm's {name} has LayerNorm eps {m.eps}, ours {cfg['ln_eps']}")
        if isinstance(m, nn.GELU) and getattr(m, "approximate", "none") != "none":
            raise RuntimeError(f"timm's {name} is GELU approximate='{m.approximate}', ours is exact (erf)")
        if isinstance(m, nn.Dropout) and m.p != 0:
            raise RuntimeError(f"timm's {name} has dropout {m.p}")
    return model


def loaded_model(kind, dump, dev, dtype):
    table, cfg = dump["table"], dump["table"]["config"]
    model = build_model(kind, cfg).to(dev, dtype)
    state = {n: torch.tensor(a, dtype=dtype, device=dev) for n, a in to_timm(table, dump["params0"]).items()}
    theirs = dict(model.named_parameters())
    if set(theirs) != set(state):
        raise RuntimeError(f"parameter names differ: only timm's {sorted(set(theirs) - set(state))}, "
                           f"only ours {sorted(set(state) - set(theirs))}")
    model.load_state_dict(state, strict=True)
    model.train()  # no dropout anywhere (build_model checks): train and eval compute the same
    return model


# ----------------------------------------------------------------------------------------------------------------
# Runs and errors


def loss_of(logits, labels):
    return F.cross_entropy(logits.float() if logits.dtype != torch.float64 else logits, labels)


def batch_tensors(dump, i, dev, dtype):
    return (torch.tensor(images(dump, i), device=dev).to(dtype),
            torch.tensor(dump["labels"][i], device=dev, dtype=torch.long))


def batch0(kind, dump, dev, dtype, autocast):
    model = loaded_model(kind, dump, dev, dtype)
    x, y = batch_tensors(dump, 0, dev, dtype)
    with torch.autocast(torch.device(dev).type, dtype=torch.bfloat16, enabled=autocast):
        logits = model(x)
        loss = loss_of(logits, y)
    loss.backward()
    grads = {n: p.grad.detach().double().cpu().numpy() for n, p in model.named_parameters()}
    return logits.detach().double().cpu().numpy(), float(loss.item()), from_timm(dump["table"], grads)


def train(kind, dump, dev, dtype, autocast=False):
    table, cfg = dump["table"], dump["table"]["config"]
    model = loaded_model(kind, dump, dev, dtype)
    decay = timm_decay(table)
    params = dict(model.named_parameters())
    # The hyperparameters the dump was asked for (not the ones it reports), so a dump that ignores them fails.
    groups = [{"params": [p for n, p in params.items() if decay[n]], "weight_decay": WD},
              {"params": [p for n, p in params.items() if not decay[n]], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, foreach=False)
    losses = []
    for s in range(cfg["steps"]):
        x, y = batch_tensors(dump, s, dev, dtype)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(torch.device(dev).type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_of(model(x), y)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    with torch.no_grad(), torch.autocast(torch.device(dev).type, dtype=torch.bfloat16, enabled=autocast):
        x, y = batch_tensors(dump, cfg["steps"], dev, dtype)
        losses.append(loss_of(model(x), y).item())
    final = {n: p.detach().double().cpu().numpy() for n, p in params.items()}
    return np.array(losses), from_timm(table, final)


# ----------------------------------------------------------------------------------------------------------------
# One configuration


def check_config(name, image, patch, channels, qkv, a, setup):
    self_test = a.self_test
    d = os.path.join(a.folder, name)
    if not a.reuse:
        os.makedirs(d, exist_ok=True)
        run_dump(a.dump, d, image, patch, channels, qkv, ref_only=self_test)
    dump = load_dump(d, ref_only=self_test)
    table, cfg = dump["table"], dump["table"]["config"]
    dev = "cpu" if self_test else a.device
    dtype = torch.float64 if self_test and a.model == "plain" else torch.float32
    base = {"check": "timm_vit_crosscheck", "config": name, "qkv": cfg["qkv"],
            "model": f"{cfg['image']}x{cfg['image']}x{cfg['channels']} p{cfg['patch']} T{cfg['tokens']} "
                     f"L{cfg['layers']} C{cfg['embed_dim']} NH{cfg['heads']} K{cfg['classes']}",
            "B": cfg["B"], "against": f"{a.model} {str(dtype).replace('torch.', '')} on {dev}", **setup}
    results = []

    def emit(side, what, err, bound, **extra):
        passed = None if bound is None else bool(err <= bound)
        line = dict(base, side=side, what=what, err=sig(err), bound=bound, **extra,
                    **({"pass": passed} if passed is not None else {"info_only": True}))
        print(json.dumps(line), flush=True)
        results.append(passed is not False)

    # Exact side: our double reference against the fp32 (self-test: float64) model.
    side = "self_test" if dtype == torch.float64 else "exact"  # timm in --self-test runs in float32
    bound = BOUNDS[side]
    logits, loss, grads = batch0(a.model, dump, dev, dtype, autocast=False)
    emit(side, "logits", rel(dump["ref_logits0"], logits), bound["logits"],
         max_abs=sig(float(np.abs(dump["ref_logits0"] - logits).max())))
    emit(side, "loss", abs(dump["ref_loss0"] - loss) / abs(loss), bound["loss"], ours=dump["ref_loss0"],
         theirs=loss)
    errs, noise = grad_errors(table, table["config"]["embed_dim"], by_name(table, dump["ref_grads0"]), grads)
    wname, werr = worst(errs)
    emit(side, "grads", werr, bound["grads"], worst_tensor=wname, tensors_compared=len(errs),
         key_bias_skipped={k: sig(v) for k, v in noise.items()}, per_tensor={k: sig(v, 2) for k, v in errs.items()})

    if self_test:
        # No bf16 files without a GPU: train the model here alone, to show the data are learnable and to run the
        # training path once (information only).
        t_losses, _ = train(a.model, dump, dev, dtype)
        emit(side, "losses", None, None, steps=cfg["steps"], theirs=[round(float(v), 6) for v in t_losses],
             loss_drop=sig(float(t_losses[0] - t_losses[-1])))
        return all(results)

    # bf16 side: our GPU model against the same fp32 model; timm under bf16 autocast against fp32 for scale.
    bound = BOUNDS["bf16"]
    logits_b, loss_b, grads_b = batch0(a.model, dump, dev, dtype, autocast=True)
    emit("bf16", "logits", rel(dump["logits0"], logits), bound["logits"],
         max_abs=sig(float(np.abs(dump["logits0"] - logits).max())), torch_bf16=sig(rel(logits_b, logits)))
    emit("bf16", "loss", abs(dump["loss0"] - loss) / abs(loss), bound["loss"], ours=dump["loss0"], theirs=loss,
         torch_bf16=sig(abs(loss_b - loss) / abs(loss)))
    errs, noise = grad_errors(table, table["config"]["embed_dim"], by_name(table, dump["grads0"]), grads)
    wname, werr = worst(errs)
    tb, _ = grad_errors(table, table["config"]["embed_dim"], grads_b, grads)
    emit("bf16", "grads", werr, bound["grads"], worst_tensor=wname, tensors_compared=len(errs),
         key_bias_skipped={k: sig(v) for k, v in noise.items()}, per_tensor={k: sig(v, 2) for k, v in errs.items()},
         torch_bf16=sig(worst(tb)[1]), torch_bf16_worst_tensor=worst(tb)[0], torch_bf16_on_our_worst=sig(tb[wname]))

    t_losses, t_final = train(a.model, dump, dev, dtype)
    b_losses, b_final = train(a.model, dump, dev, dtype, autocast=True)
    loss_err = lambda ls: np.abs(ls - t_losses) / np.abs(t_losses)
    lerr = loss_err(dump["losses"])
    emit("bf16", "losses", float(lerr.max()), bound["losses"], steps=cfg["steps"], worst_step=int(lerr.argmax()),
         ours=[round(float(v), 6) for v in dump["losses"]], theirs=[round(float(v), 6) for v in t_losses],
         loss_drop_theirs=sig(float(t_losses[0] - t_losses[-1])), torch_bf16=sig(float(loss_err(b_losses).max())))

    final = by_name(table, dump["params_final"])
    perr = param_errors(table, table["config"]["embed_dim"], dump["params0"], final, t_final)
    berr = param_errors(table, table["config"]["embed_dim"], dump["params0"], b_final, t_final)
    pname, pval = worst(perr)
    emit("bf16", "params_final", pval, bound["params_final"], worst_tensor=pname, relative_to="distance travelled",
         median=sig(float(np.median(list(perr.values())))), torch_bf16=sig(worst(berr)[1]),
         torch_bf16_median=sig(float(np.median(list(berr.values())))), torch_bf16_on_our_worst=sig(berr[pname]))
    return all(results)


def fail(error, **extra):
    print(json.dumps({"check": "timm_vit_crosscheck", "what": "run", "pass": False, "error": error, **extra}),
          flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", default=os.environ.get("VIT_DUMP", os.path.join(ROOT, "build", "vit_dump")),
                    help="path of the vit_dump binary (default $VIT_DUMP or build/vit_dump)")
    ap.add_argument("--self-test", action="store_true",
                    help="CPU only: vit_dump --ref-only 1 against the plain ViT written here (float64); "
                    "needs no GPU and no timm")
    ap.add_argument("--model", choices=["timm", "plain"], default=None,
                    help="what to compare against (default: timm; plain with --self-test)")
    ap.add_argument("--keep", default="", help="write the dumps under this folder (DIR/<config>), not a temporary one")
    ap.add_argument("--reuse", default="", help="read the dumps a --keep run wrote there instead of running vit_dump")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="where the model we compare against runs (--self-test: always the CPU); cpu with --reuse "
                    "checks GPU dumps written elsewhere")
    ap.add_argument("--only", default="", help="comma-separated configuration names (default: all: "
                    + ", ".join(c[0] for c in CONFIGS) + ")")
    a = ap.parse_args()
    names = [c[0] for c in CONFIGS]
    only = [n for n in a.only.split(",") if n] or names
    if set(only) - set(names):
        fail(f"unknown configuration(s) {sorted(set(only) - set(names))}; choose from {names}")
    a.model = a.model or ("plain" if a.self_test else "timm")
    setup = {"torch": torch.__version__}
    if a.model == "timm":
        try:
            timm, how = timm_setup()
        except ImportError as e:
            fail(f"timm is not importable ({e}): install it (pip install timm) on the GPU machine, or run --self-test "
                 "(the plain ViT written here, CPU only)")
        setup.update(timm=timm.__version__, fused_attn_off=how)
    if not a.self_test and a.device == "cuda" and not torch.cuda.is_available():
        fail("no CUDA device visible to torch: run this on the GPU machine (--self-test runs on the CPU)")
    if not a.reuse and not os.access(a.dump, os.X_OK):
        fail(f"no vit_dump at '{a.dump}': build it with `make -j build/vit_dump` or pass --dump")
    # fp32 means fp32: TF32 would round matmul and convolution inputs to 10 mantissa bits.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    tmp = tempfile.TemporaryDirectory(prefix="vit_crosscheck_")
    a.folder = a.reuse or a.keep or tmp.name
    ok = True
    for name, image, patch, channels, qkv in CONFIGS:
        if name not in only:
            continue
        try:
            ok &= check_config(name, image, patch, channels, qkv, a, setup)
        except Exception as e:  # one JSON line per configuration, whatever went wrong (an old timm, a bad dump)
            print(json.dumps({"check": "timm_vit_crosscheck", "config": name, "what": "run", "pass": False,
                              "error": f"{type(e).__name__}: {e}"}), flush=True)
            ok = False
    tmp.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
