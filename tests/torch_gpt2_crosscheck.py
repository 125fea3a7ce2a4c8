#!/usr/bin/env python3
"""Cross-check of our GPT-2 (fp32 and bf16 models) against a plain PyTorch GPT-2 (GPU machine).

For each configuration, build/gpt2_dump (tests/tools/gpt2_dump.cu) initialises our model with gpt2_init,
writes its parameter table and initial arena, token batches, the logits, loss and gradients of batch 0,
and the losses of 10 AdamW steps. This script loads the same parameters by name and offset into a
PyTorch GPT-2 written here (pre-LN blocks, learned positions, tied head, GELU tanh, causal attention as
an explicit fp32 softmax, mean cross-entropy; fp32, TF32 off) and compares:

  logits   ||ours - torch|| / ||torch|| over all B*T*V logits of batch 0
  loss     |ours - torch| / |torch| on batch 0
  grads    per tensor ||g_ours - g_torch|| / ||g_torch||, worst tensor reported. The key bias (attn.k.bias,
           or the k third of a fused attn.qkv.bias) is left out: its true gradient is exactly 0 (softmax
           is invariant to the constant q.b_k added to a row of scores), so both sides hold rounding noise;
           its largest |g| on each side is reported instead.
  losses   torch.optim.AdamW (foreach=False, betas (0.9, 0.95), eps 1e-8, weight decay only on tensors with
           decay=true) over the same batches: max over steps of |loss_ours - loss_torch| / |loss_torch|;
           steps + 1 losses: each step's loss before its update, then the loss on one more batch after the
           last update. Gradient clipping is off on both sides.
  params   after the last step, per tensor ||p_ours - p_torch|| / ||p_torch - p_0|| (error relative to the
           distance travelled), key bias left out as above; bound 1e-3 for fp32, information only for bf16
           (AdamW's normalised step turns small gradient differences into O(lr) parameter differences).

The bf16 model is measured against the same fp32 torch model, with looser bounds; for scale, each bf16
line also reports the same error of torch itself under bf16 autocast (bf16 matmuls, fp32 LayerNorm,
softmax and loss) against its fp32 self ("torch_bf16"): an error of that size is bf16 rounding, not a bug.

Bounds: fp32 logits and loss 1e-5, grads and losses 1e-4, params 1e-3; bf16 logits and grads 2e-2, loss and
losses 1e-2. One JSON line per check; exit status 1 if any check fails.
Usage: python3 tests/torch_gpt2_crosscheck.py [--dump build/gpt2_dump] [--keep DIR]
(the dump binary can also be given as $GPT2_DUMP).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from crosscheck_common import by_name, grad_errors, param_errors, rel, sig, slice_of, worst

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 10
LR, WD, BETAS, EPS = 1e-3, 0.1, (0.9, 0.95), 1e-8  # AdamW as train_gpt2 sets it (beta2 0.95), constant LR
MODEL = dict(layers=2, channels=128, heads=2, max_seq=64, B=4, T=64)

# name, precision, qkv layout, vocabulary (509: not a multiple of 64, exercises the bf16 model's padded rows)
CONFIGS = [
    ("fp32_separate", "fp32", "separate", 512),
    ("fp32_fused", "fp32", "fused", 509),
    ("bf16_separate", "bf16", "separate", 509),
]
BOUNDS = {
    "fp32": {"logits": 1e-5, "loss": 1e-5, "grads": 1e-4, "losses": 1e-4, "params": 1e-3},
    "bf16": {"logits": 2e-2, "loss": 1e-2, "grads": 2e-2, "losses": 1e-2, "params": None},  # params: information only
}


def run_dump(binary, d, precision, qkv, vocab):
    cmd = [binary, "--precision", precision, "--qkv", qkv, "--vocab", str(vocab), "--layers", str(MODEL["layers"]),
           "--channels", str(MODEL["channels"]), "--heads", str(MODEL["heads"]), "--max-seq", str(MODEL["max_seq"]),
           "-b", str(MODEL["B"]), "-t", str(MODEL["T"]), "--steps", str(STEPS), "--lr", str(LR), "--wd", str(WD),
           "--out", d]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}: {(r.stderr or r.stdout).strip()}")
    with open(os.path.join(d, "table.json")) as f:
        table = json.load(f)
    cfg, total = table["config"], table["total"]
    B, T, V = cfg["B"], cfg["T"], cfg["vocab"]
    f32 = lambda n: np.fromfile(os.path.join(d, n), dtype=np.float32)
    dump = {
        "table": table,
        "params0": f32("params0.bin"),
        "batches": np.fromfile(os.path.join(d, "batches.bin"), dtype=np.int32).reshape(cfg["steps"] + 1, 2, B, T),
        "logits0": f32("logits0.bin").reshape(B, T, V),
        "loss0": float(f32("loss0.bin")[0]),
        "grads0": f32("grads0.bin"),
        "losses": f32("losses.bin").astype(np.float64),
        "params_final": f32("params_final.bin"),
    }
    assert dump["params0"].size == total and dump["grads0"].size == total and dump["params_final"].size == total
    assert dump["losses"].size == cfg["steps"] + 1
    return dump


def leaves(table, flat, dev):
    return {t["name"]: torch.tensor(slice_of(flat, t), device=dev, requires_grad=True) for t in table["tensors"]}


def forward(P, cfg, tokens):
    """Logits (B, T, V) of a plain pre-LN GPT-2 whose parameters are the dict P (our table's names)."""
    B, T = tokens.shape
    C, NH, L = cfg["channels"], cfg["heads"], cfg["layers"]
    hs = C // NH
    eps = cfg["layernorm_eps"]
    x = P["wte"][tokens] + P["wpe"][:T]
    causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
    heads = lambda z: z.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
    for l in range(L):
        p = f"h.{l}."
        h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], eps)
        if cfg["qkv"] == "fused":
            q, k, v = F.linear(h, P[p + "attn.qkv.weight"], P[p + "attn.qkv.bias"]).split(C, dim=-1)
        else:
            q, k, v = (F.linear(h, P[p + f"attn.{n}.weight"], P[p + f"attn.{n}.bias"]) for n in "qkv")
        q, k, v = heads(q), heads(k), heads(v)
        scores = (q @ k.transpose(-2, -1)).float() * (1.0 / math.sqrt(hs))
        att = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1).to(v.dtype)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, P[p + "attn.proj.weight"], P[p + "attn.proj.bias"])
        h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], eps)
        h = F.gelu(F.linear(h, P[p + "mlp.fc.weight"], P[p + "mlp.fc.bias"]), approximate="tanh")
        x = x + F.linear(h, P[p + "mlp.proj.weight"], P[p + "mlp.proj.bias"])
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], eps)
    return F.linear(x, P["wte"])  # tied head


def loss_of(logits, targets):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def batch0_torch(dump, dev, autocast):
    table, cfg = dump["table"], dump["table"]["config"]
    P = leaves(table, dump["params0"], dev)
    x = torch.tensor(dump["batches"][0, 0], device=dev, dtype=torch.long)
    y = torch.tensor(dump["batches"][0, 1], device=dev, dtype=torch.long)
    with torch.autocast(torch.device(dev).type, dtype=torch.bfloat16, enabled=autocast):
        logits = forward(P, cfg, x)
        loss = loss_of(logits, y)
    loss.backward()
    grads = {n: p.grad.detach().cpu().numpy() for n, p in P.items()}
    return logits.detach().float().cpu().numpy(), float(loss.item()), grads


def train_torch(dump, dev, autocast=False):
    table, cfg = dump["table"], dump["table"]["config"]
    P = leaves(table, dump["params0"], dev)
    decay = [P[t["name"]] for t in table["tensors"] if t["decay"]]
    nodecay = [P[t["name"]] for t in table["tensors"] if not t["decay"]]
    # The hyperparameters the dump was asked for (not the ones it reports), so a dump that ignores them fails.
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS, foreach=False)
    batch = lambda i: [torch.tensor(dump["batches"][i, j], device=dev, dtype=torch.long) for j in (0, 1)]
    losses = []
    for s in range(cfg["steps"]):
        x, y = batch(s)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(torch.device(dev).type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_of(forward(P, cfg, x), y)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    with torch.no_grad(), torch.autocast(torch.device(dev).type, dtype=torch.bfloat16, enabled=autocast):
        x, y = batch(cfg["steps"])
        losses.append(loss_of(forward(P, cfg, x), y).item())
    return np.array(losses), {n: p.detach().cpu().numpy() for n, p in P.items()}


def check_config(name, precision, qkv, vocab, binary, folder):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    d = os.path.join(folder, name)
    os.makedirs(d, exist_ok=True)
    dump = run_dump(binary, d, precision, qkv, vocab)
    table, cfg = dump["table"], dump["table"]["config"]
    bound = BOUNDS[precision]
    base = {"check": "torch_gpt2_crosscheck", "config": name, "precision": precision, "qkv": qkv,
            "model": f"L{cfg['layers']} C{cfg['channels']} NH{cfg['heads']} V{cfg['vocab']} maxT{cfg['max_seq']}",
            "B": cfg["B"], "T": cfg["T"], "torch": torch.__version__}
    lines = []

    def emit(what, err, b, **extra):
        passed = None if b is None else bool(err <= b)
        line = dict(base, what=what, err=sig(err), bound=b, **extra, **({"pass": passed} if passed is not None else {"info_only": True}))
        print(json.dumps(line), flush=True)
        lines.append(passed is not False)

    bf16 = precision == "bf16"
    scale = lambda v: {"torch_bf16": sig(v)} if bf16 else {}  # torch under bf16 autocast vs torch fp32, for scale

    logits, loss, grads = batch0_torch(dump, dev, autocast=False)
    logits_b, loss_b, grads_b = batch0_torch(dump, dev, autocast=True) if bf16 else (None, None, None)
    emit("logits", rel(dump["logits0"], logits), bound["logits"],
         max_abs=sig(float(np.abs(dump["logits0"].astype(np.float64) - logits).max())), **scale(bf16 and rel(logits_b, logits)))
    emit("loss", abs(dump["loss0"] - loss) / abs(loss), bound["loss"], ours=dump["loss0"], torch_value=loss,
         **scale(bf16 and abs(loss_b - loss) / abs(loss)))

    errs, noise = grad_errors(table, table["config"]["channels"], by_name(table, dump["grads0"]), grads)
    wname, werr = worst(errs)
    more = {}
    if bf16:
        tb, _ = grad_errors(table, table["config"]["channels"], grads_b, grads)
        more = dict(scale(worst(tb)[1]), torch_bf16_worst_tensor=worst(tb)[0], torch_bf16_on_our_worst=sig(tb[wname]))
    emit("grads", werr, bound["grads"], worst_tensor=wname, tensors_compared=len(errs),
         key_bias_skipped={"max_abs_ours": sig(noise["ours"]), "max_abs_torch": sig(noise["theirs"]),
                           "largest_other_grad": sig(noise["largest_other"])},
         per_tensor={k: sig(v, 2) for k, v in errs.items()}, **more)

    t_losses, t_final = train_torch(dump, dev)
    b_losses, b_final = train_torch(dump, dev, autocast=True) if bf16 else (None, None)
    loss_err = lambda ls: np.abs(ls - t_losses) / np.abs(t_losses)
    lerr = loss_err(dump["losses"])
    emit("losses", float(lerr.max()), bound["losses"], steps=cfg["steps"], worst_step=int(lerr.argmax()),
         ours=[round(float(v), 6) for v in dump["losses"]], torch_values=[round(float(v), 6) for v in t_losses],
         loss_drop_torch=sig(float(t_losses[0] - t_losses[-1])), **scale(bf16 and float(loss_err(b_losses).max())))

    final = by_name(table, dump["params_final"])
    perr = param_errors(table, table["config"]["channels"], dump["params0"], final, t_final)
    pname, pval = worst(perr)
    more = {}
    if bf16:
        berr = param_errors(table, table["config"]["channels"], dump["params0"], b_final, t_final)
        more = dict(scale(worst(berr)[1]), torch_bf16_median=sig(float(np.median(list(berr.values())))),
                    torch_bf16_on_our_worst=sig(berr[pname]))
    emit("params_final", pval, bound["params"], worst_tensor=pname, relative_to="distance travelled",
         median=sig(float(np.median(list(perr.values())))), **more)
    return all(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", default=os.environ.get("GPT2_DUMP", os.path.join(ROOT, "build", "gpt2_dump")),
                    help="path of the gpt2_dump binary (default $GPT2_DUMP or build/gpt2_dump)")
    ap.add_argument("--keep", default="", help="write the dumps under this folder instead of temporary ones")
    ap.add_argument("--only", default="", help="comma-separated configuration names (default: all)")
    a = ap.parse_args()
    if not os.access(a.dump, os.X_OK):
        print(json.dumps({"check": "torch_gpt2_crosscheck", "what": "run", "pass": False,
                          "error": f"no gpt2_dump at '{a.dump}': build it with `make build/gpt2_dump` or pass --dump"}), flush=True)
        sys.exit(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    ok = True
    tmp = tempfile.TemporaryDirectory(prefix="gpt2_crosscheck_")
    for name, precision, qkv, vocab in CONFIGS:
        if a.only and name not in a.only.split(","):
            continue
        try:
            ok &= check_config(name, precision, qkv, vocab, a.dump, a.keep or tmp.name)
        except (RuntimeError, OSError, AssertionError) as e:
            print(json.dumps({"check": "torch_gpt2_crosscheck", "config": name, "what": "run", "error": str(e), "pass": False}),
                  flush=True)
            ok = False
    tmp.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
