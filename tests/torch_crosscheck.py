#!/usr/bin/env python3
"""Cross-check of our GPU AdamW, Adafactor and Muon against PyTorch's own optimizers (GPU machine).

Same initial tensors and the same 20 gradients (heterogeneous row/column scales) go through
torch.optim.AdamW (fused), torch.optim.Adafactor and torch.optim.Muon (+ fused AdamW for the tensors
Muon must not take), and through ours via build/optim_replay. Reported per optimizer: the largest
||p_ours - p_torch|| / ||p_torch - p_0|| over tensors and steps (error relative to the distance
travelled), and the largest elementwise |p_ours - p_torch|. fp32 everywhere, TF32 off.
Exit status 1 if a bound is exceeded (AdamW, Adafactor: 1e-5; Muon: 1e-2).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from replay_files import hetero_grad, read_steps, write_replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 20
BOUNDS = {"adamw": 1e-5, "adafactor": 1e-5, "muon": 1e-2}

# name, shape, role, weight decay
TENSORS = [
    ("w_sq", (64, 64), "hidden", 1),
    ("w_tall", (192, 64), "hidden", 1),
    ("w_wide", (64, 192), "hidden", 1),
    ("w_wide2", (64, 192), "hidden", 1),
    ("w_odd", (33, 65), "hidden", 1),
    ("w_3d", (4, 6, 10), "hidden", 1),
    ("w_4d", (8, 3, 5, 5), "hidden", 1),
    ("w_long", (3, 2500), "hidden", 1),
    ("wte", (1000, 96), "embedding", 1),
    ("bias", (37,), "bias", 0),
    ("gain", (64,), "norm_gain", 0),
]


def make_data(d):
    rng = np.random.default_rng(1234)
    init = [(0.05 * rng.standard_normal(s)).astype(np.float32) for _, s, _, _ in TENSORS]
    grads = [[hetero_grad(rng, s, 0.01) for _, s, _, _ in TENSORS] for _ in range(STEPS)]
    write_replay(d, TENSORS, STEPS, init, grads)
    return init, grads


def run_ours(d, opt, sets):
    cmd = [os.path.join(ROOT, "build", "optim_replay"), "--dir", d, "--optimizer", opt]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True)
    return read_steps(os.path.join(d, f"out_{opt}.bin"), TENSORS, STEPS)


def run_torch(opt, init, grads):
    dev = "cuda"
    ps = [torch.tensor(x, device=dev, requires_grad=True) for x in init]
    decay = [p for p, t in zip(ps, TENSORS) if t[3]]
    nodecay = [p for p, t in zip(ps, TENSORS) if not t[3]]
    views = None
    if opt == "adamw":
        o = [torch.optim.AdamW([{"params": decay}, {"params": nodecay, "weight_decay": 0.0}], fused=True)]
    elif opt == "adafactor":
        o = [torch.optim.Adafactor([{"params": decay, "weight_decay": 0.01}, {"params": nodecay, "weight_decay": 0.0}],
                                   foreach=False)]
    else:
        # torch's Muon takes 2-D parameters only; ours views an N-D hidden tensor as (shape[0], rest), so give
        # torch that 2-D view as its own leaf and copy it back after each step.
        views = {}
        muon_params, aux = [], []
        for i, (p, (_, shape, role, _)) in enumerate(zip(ps, TENSORS)):
            if role == "hidden" and len(shape) >= 2:
                v = torch.tensor(init[i].reshape(shape[0], -1), device=dev, requires_grad=True)
                views[i] = v
                muon_params.append(v)
            else:
                aux.append(p)
        o = [torch.optim.Muon(muon_params, lr=0.02),
             torch.optim.AdamW(aux, lr=3e-4, betas=(0.9, 0.95), eps=1e-10, weight_decay=0.0, fused=True)]
    traj = []
    for step in grads:
        for i, (p, g) in enumerate(zip(ps, step)):
            if views is not None and i in views:
                views[i].grad = torch.tensor(g.reshape(views[i].shape), device=dev)
            else:
                p.grad = torch.tensor(g, device=dev)
        for x in o:
            x.step()
        out = []
        for i, p in enumerate(ps):
            src = views[i] if views is not None and i in views else p
            out.append(src.detach().cpu().numpy().reshape(TENSORS[i][1]).copy())
        traj.append(out)
    return traj


def compare(ours, theirs, init):
    rel, absmax = 0.0, 0.0
    for s in range(STEPS):
        for i in range(len(TENSORS)):
            a, b = ours[s][i].astype(np.float64), theirs[s][i].astype(np.float64)
            disp = np.linalg.norm(b - init[i])
            rel = max(rel, np.linalg.norm(a - b) / max(disp, 1e-30))
            absmax = max(absmax, float(np.abs(a - b).max()))
    return rel, absmax


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ok = True
    with tempfile.TemporaryDirectory() as d:
        init, grads = make_data(d)
        for opt, sets in [("adamw", []), ("adafactor", ["adafactor.wd=0.01"]), ("muon", ["muon.lr=0.02"])]:
            ours = run_ours(d, opt, sets)
            theirs = run_torch(opt, init, grads)
            rel, absmax = compare(ours, theirs, init)
            passed = rel <= BOUNDS[opt]
            ok &= passed
            print(json.dumps({"check": "torch_crosscheck", "optimizer": opt, "steps": STEPS, "torch": torch.__version__,
                              "max_rel_err": float(f"{rel:.3g}"), "max_abs_err": float(f"{absmax:.3g}"),
                              "bound": BOUNDS[opt], "pass": bool(passed)}), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
