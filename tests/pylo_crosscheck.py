#!/usr/bin/env python3
"""Parity of our learned optimizers with PyLO's own code (run on the GPU machine, or with --cpu anywhere).

    python3 tests/pylo_crosscheck.py --pylo PATH/TO/pylo [--json results.jsonl] [--cpu] [--quick] [--only ...]

PATH/TO/pylo is a checkout of PyLO's source (its naive optimizers are plain Python + torch; nothing of it
is in this repository). The check writes random meta-weights with PyLO's own classes (save_pretrained),
then replays the same parameters, gradients and losses through PyLO's naive optimizers (on the GPU, and
on the CPU as the noise floor) and through ours (tests/tools/optim_replay: the GPU optimizer, and for the
first case of each optimizer and every VeLO case its CPU reference, through build/ref_replay), fp32, TF32 off. Like is compared with like:
our GPU runs with PyLO's GPU run, our CPU reference with PyLO's CPU run; PyLO's own CPU-vs-GPU spread is
reported as the noise floor, and in VeLO's sharp case (below) our GPU run may differ by up to twice it.

Error of a run against PyLO's GPU run, per tensor, worst step: the largest elementwise difference beyond
the rounding of p, max(0, |p_ours - p_pylo| - s r ulp(p)) after s steps (r = 1 rounding of p per step, 2
with weight decay; each rounding differs by at most one ulp between two implementations), divided by the
largest distance travelled, max |p_pylo - p_0|. The raw ratio (no allowance) is reported beside it, and
disp_ulps, how many ulps of p the tensor travelled. VeLO's step is ~1e-3 rms(p): at lr 1, p travels only
a few thousand ulps in 12 steps, so the raw ratio is dominated by rounding there and the allowance could
hide an error up to s r / disp_ulps; hence a "sharp" case (VeLO at lr 100: p travels > 3e5 ulps) whose
raw ratio must meet the bound too, and the comparison of one step's intermediate values below.

PyLO decides tied axes with numpy's argsort, which numpy >= 2 on AVX-512 CPUs computes with an unstable
sorting network: PyLO's small_fc_lopt then treats an equal-channel conv (8, 8, 3, 3) differently on
different machines. Tensors where PyLO's dims on this machine differ from our (stable) rule are reported
with a note ("pass": null) and not judged.

Controls (the measure must be able to fail): ours with the other tie rule must differ on the tied shapes.
VeLO also compares intermediate values of PyLO with our CPU reference's: at every step the loss features
(beyond what a different rounding of the loss EMAs explains: loss_feature_rounding), the fraction
features, the other LSTM inputs and lr_mult of each tensor; at the first step also the per-element MLP
outputs (direction, magnitude) and the step. Exit status 1 if a bound is exceeded, a control
passes, or anything is missing or not finite.

CELO2 runs with the real weights that ship in optim/lopt/weights/celo2; ELO and ELO_CELO2 with random
weights written by PyLO's classes (their published files are not reachable here). CELO2 and ELO_CELO2
(NS_FLOOR) run their GPU Newton-Schulz in exact fp32 (celo2.ns=fp32), and their CPU references are also
checked on the GPU machine; Newton-Schulz amplifies float32 rounding, so for them PyLO in float64 gives
each tensor's noise floor (see check_case).
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

from replay_files import hetero_grad, read_steps, write_replay

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 12
EXACT_BOUND = 1e-5
FAST_BOUND = 2e-2   # small_fc_lopt.fast: bf16/fp16 tensor-core MLP (tests/gpu: stated 2e-2)
CONTROL_MIN = 1e-2  # the other tie rule must differ by at least this on tied shapes

# name, shape, role, weight decay (decayed tensors first: PyLO's group order = our table order)
TENSORS = [
    ("square", (32, 32), "hidden", 1),
    ("tall", (96, 48), "hidden", 1),
    ("wide", (48, 96), "hidden", 1),
    ("row", (1, 40), "hidden", 1),
    ("conv", (8, 4, 3, 3), "hidden", 1),
    ("conv_eq", (8, 8, 3, 3), "hidden", 1),
    ("cube", (4, 6, 6), "hidden", 1),
    ("big", (1024, 1100), "hidden", 1),
    ("bias", (64,), "bias", 0),
]
TIED = {"square", "cube"}  # shapes whose two largest axes are equal (conv_eq: both rules agree, rank-4)
NS_FLOOR = {"celo2", "elo_celo2"}  # Newton-Schulz: bounds follow PyLO's own float32 noise (check_case)
GLOBAL_CLIP = {"celo2", "elo", "elo_celo2"}  # optimizers with PyLO's clip_grad argument
CELO2_WEIGHTS = os.path.join(ROOT, "optim", "lopt", "weights", "celo2")  # the real weights, in PyLO's layout


# ---------------------------------------------------------------------------------------------------
# PyLO import: its naive optimizers, with `mup` stubbed (MuLO_naive only needs process_param_groups and
# each parameter's infshape: ninf() == 2 for hidden matrices, width_mult() = fan_in = shape[1]).

class InfShape:
    def __init__(self, ninf, width):
        self._ninf, self._width = ninf, width

    def ninf(self):
        return self._ninf

    def width_mult(self):
        return self._width


def install_mup_stub():
    def process_param_groups(params, **kwargs):
        groups = list(params)
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            g.setdefault("lr", kwargs["lr"])
            g.setdefault("weight_decay", kwargs.get("weight_decay", 0.0))
        return groups
    mup, optim = types.ModuleType("mup"), types.ModuleType("mup.optim")
    optim.process_param_groups = process_param_groups
    mup.optim = optim
    sys.modules.setdefault("mup", mup)
    sys.modules.setdefault("mup.optim", optim)


def import_pylo(path):
    install_mup_stub()
    sys.path.insert(0, os.path.abspath(path))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Custom CUDA optimizers could not be imported": we use the naive ones
        import pylo.optim as po
        import pylo.models as pm
    # The modules (pylo.optim re-exports classes under the same names), for their factored_dims.
    mods = {m: importlib.import_module("pylo.optim." + m) for m in ("AdafacLO_naive", "Velo_naive", "CELO2_naive")}
    return po, pm, mods


# ---------------------------------------------------------------------------------------------------
# Meta-weights written by PyLO's classes.

def randomize(module, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            fan_in = p.shape[-1] if p.dim() >= 2 else 16
            p.copy_(torch.randn(p.shape, generator=g) * (scale / fan_in ** 0.5))


def write_weights(pm, d):
    mlp = pm.MetaMLP(input_size=39, hidden_size=32, hidden_layers=1)
    randomize(mlp, 1, 2.0)
    mlp.save_pretrained(os.path.join(d, "mulo"))
    rnn, vmlp = pm.VeLORNN(), pm.VeLOMLP()
    randomize(rnn, 2)
    randomize(vmlp, 3, 1.0)
    rnn.save_pretrained(os.path.join(d, "VeLO_RNN"))
    vmlp.save_pretrained(os.path.join(d, "VeLO_MLP"))
    elo = pm.MetaMLP(input_size=39, hidden_size=32, hidden_layers=1)
    randomize(elo, 4, 2.0)
    elo.save_pretrained(os.path.join(d, "elo"))
    elo_celo2 = pm.CELO2MLP()
    randomize(elo_celo2, 5, 1.0)
    elo_celo2.save_pretrained(os.path.join(d, "elo-celo2"))


# ---------------------------------------------------------------------------------------------------
# Cases: one PyLO construction and one of ours with the same meaning.

def small_fc_pylo(po, mods, params, c, w):
    return po.AdafacLO_naive(params, lr=c["lr"], hf_key=os.path.join(w, "mulo"))


def mulo_pylo(po, mods, params, c, w):
    for group in params:
        for p in group["params"]:
            hidden = p.dim() >= 2
            p.infshape = InfShape(2 if hidden else 1, p.shape[1] if hidden else 1)
    return po.MuLO_naive(params, lr=c["lr"], hf_key=os.path.join(w, "mulo"))


def velo_pylo(po, mods, params, c, w):
    return po.VeLO_naive(params, lr=c["lr"], num_steps=c["num_steps"],
                                   hf_key_rnn=os.path.join(w, "VeLO_RNN"), hf_key_mlp=os.path.join(w, "VeLO_MLP"))


def adam_groups(params, c):
    """CELO2's AdamW side path decays each group by its own adam_weight_decay (else the constructor's)."""
    for group in params:
        group["adam_weight_decay"] = group["weight_decay"]
    return params


def celo2_pylo(po, mods, params, c, w):
    return po.CELO2_naive(adam_groups(params, c), lr=c["lr"], weight_decay=c["wd"], clip_grad=c.get("clip", False),
                          adam_lr_mult=c.get("adam_lr_mult", 1.0), hf_key=CELO2_WEIGHTS)


def elo_celo2_pylo(po, mods, params, c, w):
    return po.ELO_CELO2_naive(adam_groups(params, c), lr=c["lr"], weight_decay=c["wd"],
                              clip_grad=c.get("clip", False), adam_lr_mult=c.get("adam_lr_mult", 1.0),
                              hf_key=os.path.join(w, "elo-celo2"))


def elo_pylo(po, mods, params, c, w):
    return po.ELO_naive(params, lr=c["lr"], weight_decay=c["wd"], clip_grad=c.get("clip", False),
                        hf_key=os.path.join(w, "elo"))


OPTIMIZERS = {
    # name: (PyLO constructor, our optimizer, our fixed options, other tie rule, cases)
    "small_fc_lopt": (small_fc_pylo, "small_fc_lopt", ["small_fc_lopt.mup=false"], "small_fc_lopt.tie=swapped", [
        {"lr": 1.0, "wd": 0.0, "fast": True},
        {"lr": 0.5, "wd": 0.1},
    ]),
    "mulo": (mulo_pylo, "small_fc_lopt", ["small_fc_lopt.mup=true"], "small_fc_lopt.tie=swapped", [
        {"lr": 1.0, "wd": 0.0},
        {"lr": 3.0, "wd": 0.05},
    ]),
    "velo": (velo_pylo, "velo", [], "velo.tie=argsort", [
        {"lr": 1.0, "wd": 0.0, "num_steps": 10000, "trace": True},
        {"lr": 1.0, "wd": 1e-3, "num_steps": 8},
        {"lr": 100.0, "wd": 0.0, "num_steps": 100, "sharp": True},
    ]),
    "celo2": (celo2_pylo, "celo2", [], "celo2.tie=swapped", [
        {"lr": 1e-2, "wd": 0.1},
        {"lr": 1e-3, "wd": 0.0, "clip": True, "adam_lr_mult": 20.0},
    ]),
    "elo_celo2": (elo_celo2_pylo, "elo_celo2", [], "elo_celo2.tie=swapped", [
        {"lr": 1e-2, "wd": 0.1, "clip": True},
        {"lr": 3e-3, "wd": 0.0, "clip": False, "adam_lr_mult": 20.0},
    ]),
    "elo": (elo_pylo, "elo", [], "elo.tie=swapped", [
        {"lr": 1e-2, "wd": 0.0},
        {"lr": 3e-3, "wd": 0.1, "clip": True},
    ]),
}


def our_sets(opt, fixed, c, weights):
    sets = list(fixed) + [f"{opt}.lr={c['lr']!r}", f"{opt}.wd={c['wd']!r}"]
    folder = {"velo": weights, "small_fc_lopt": os.path.join(weights, "mulo"), "celo2": CELO2_WEIGHTS,
              "elo": os.path.join(weights, "elo"), "elo_celo2": os.path.join(weights, "elo-celo2")}[opt]
    sets.append(f"{opt}.weights={folder}")
    if opt == "velo":
        sets.append(f"velo.num_steps={c['num_steps']}")
    if opt in GLOBAL_CLIP:  # every setting PyLO's constructor gets, whatever our defaults
        sets.append(f"{opt}.clip_grad={'true' if c.get('clip') else 'false'}")
    if opt in NS_FLOOR:  # exact mode: PyLO's float32 Newton-Schulz
        sets += [f"{opt}.adam_lr_mult={c.get('adam_lr_mult', 1.0)!r}", f"{opt}.ns=fp32"]
    return sets


# ---------------------------------------------------------------------------------------------------
# Data, runs and the measure.

def make_data(d):
    rng = np.random.default_rng(2024)
    init = [(0.05 * rng.standard_normal(s)).astype(np.float32) for _, s, _, _ in TENSORS]
    # A persistent gradient plus fresh noise, both with heterogeneous row and column scales: p travels
    # steadily, so the distance it travels measures the step rather than its cancellations.
    base = [hetero_grad(rng, s, 0.01, 1.2) for _, s, _, _ in TENSORS]
    grads = [[(b + hetero_grad(rng, s, 0.005, 1.2)) * (3.0 if t == 4 else 1.0) for b, (_, s, _, _) in zip(base, TENSORS)]
             for t in range(STEPS)]
    losses = np.array([4.0 - 0.1 * t + 0.05 * rng.standard_normal() for t in range(STEPS)], np.float32)
    losses[6] *= 8.0  # a spike
    write_replay(d, TENSORS, STEPS, init, grads, losses)
    return init, grads, losses


def run_ours(d, opt, sets, out, ref=False, trace=False):
    """ref: the CPU reference, through build/ref_replay (no CUDA needed); else the GPU optimizer."""
    cmd = [os.path.join(ROOT, "build", "ref_replay" if ref else "optim_replay"), "--dir", d, "--optimizer", opt,
           "--out", out]
    for s in sets:
        cmd += ["--set", s]
    if trace:
        cmd += ["--trace", "1"]
    subprocess.run(cmd, check=True)
    return read_steps(os.path.join(d, out), TENSORS, STEPS)


def run_pylo(ctor, po, mods, c, init, grads, losses, weights, device, capture=None, decays=None):
    """decays: VeLO's 10 loss-EMA decays to use instead of PyLO's own (see velo_decays)."""
    ps = [torch.tensor(x, device=device, requires_grad=True) for x in init]  # VeLO skips tensors without
    decay = [p for p, t in zip(ps, TENSORS) if t[3]]
    nodecay = [p for p, t in zip(ps, TENSORS) if not t[3]]
    groups = [{"params": decay, "weight_decay": c["wd"]}, {"params": nodecay, "weight_decay": 0.0}]
    opt = ctor(po, mods, groups, c, weights)
    if decays is not None:
        opt.loss_buffer["decays"] = torch.tensor(decays, dtype=torch.float32, device=device)
    if capture is not None:
        hook_velo(opt, capture)
    traj = []
    for s, step in enumerate(grads):
        for p, g in zip(ps, step):
            p.grad = torch.tensor(g, device=device)
        if capture is not None:
            capture["on"] = s == 0
        if "num_steps" in c:
            opt.step(torch.tensor(float(losses[s]), device=device))
        else:
            opt.step()
        traj.append([p.detach().cpu().numpy().copy() for p in ps])
    return traj


def run_pylo_f64(ctor, po, mods, c, init, grads, losses, weights):
    """PyLO's own code in float64 on the CPU (parameters, gradients, state and network; its decays stay the
    float32 values it builds them as): the exact answer of the same algorithm, against which PyLO's float32
    run shows how far rounding alone goes on each tensor (the noise floor of --cpu)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return run_pylo(ctor, po, mods, c, [x.astype(np.float64) for x in init],
                        [[g.astype(np.float64) for g in step] for step in grads], losses, weights, "cpu")
    finally:
        torch.set_default_dtype(old)


def errors(ours, theirs, init, wd):
    """Per tensor: (beyond-rounding error, raw error, distance travelled in ulps), worst over steps; None if
    either trajectory is not finite or a tensor did not move. The allowance uses the ulp of the largest
    |p| an element has had so far: a difference made by rounding p near 0.1 stays when p later nears 0."""
    rows = []
    for i in range(len(TENSORS)):
        worst, raw, ulps = 0.0, 0.0, np.inf
        pmax = np.abs(init[i].astype(np.float64))
        for s in range(STEPS):
            a, b = ours[s][i].astype(np.float64), theirs[s][i].astype(np.float64)
            if not (np.isfinite(a).all() and np.isfinite(b).all()):
                return None
            disp = np.abs(b - init[i]).max()
            if disp <= 0:
                return None
            pmax = np.maximum(pmax, np.maximum(np.abs(a), np.abs(b)))
            ulp = np.spacing(pmax.astype(np.float32)).astype(np.float64)
            diff = np.abs(a - b)
            worst = max(worst, float(np.maximum(diff - (s + 1) * (2 if wd else 1) * ulp, 0).max() / disp))
            raw = max(raw, float(diff.max() / disp))
            ulps = min(ulps, float(disp / ulp.max()))
        rows.append((worst, raw, ulps))
    return rows


def our_dims(shape, swapped):
    """Our rules (optim/lopt/lopt_common.h): numpy's stable argsort order, or PyLO VeLO's swapped ties."""
    if len(shape) < 2:
        return None
    order = sorted(range(len(shape)), key=lambda i: (shape[i], i))
    d1, d0 = order[-2], order[-1]
    if swapped and shape[d1] == shape[d0] and not (len(shape) == 4 and (d1, d0) == (0, 1)):
        d1, d0 = d0, d1
    return d1, d0


def tie_mismatches(name, mods):
    """Tensors whose factored dims in PyLO, as its numpy computes them here, differ from our `pylo` rule."""
    velo = name == "velo"
    module = "Velo_naive" if velo else ("CELO2_naive" if name in ("celo2", "elo_celo2") else "AdafacLO_naive")
    fd = mods[module].factored_dims
    out = {}
    for tname, shape, _, _ in TENSORS:
        theirs = fd(torch.Size(shape))
        theirs = tuple(theirs) if theirs is not None else None
        if theirs != our_dims(shape, velo):
            out[tname] = theirs
    return out


# ---------------------------------------------------------------------------------------------------
# VeLO's intermediate values of one step.

def hook_velo(opt, cap):
    cap.update({"on": False, "mlp": [], "lstm_in": [], "lr_mult": []})
    rnn_fwd, mlp_fwd, feat = opt.rnn.forward, opt.network_stack.forward, opt.buffer_loss_fns.features

    def rnn(x, state):
        controls, lr_mult, st = rnn_fwd(x, state)  # every step; PyLO feeds the tensors in reverse
        cap["lstm_in"].append(torch.flip(x, [0]).double().cpu().numpy())
        cap["lr_mult"].append(torch.flip(lr_mult, [0]).double().cpu().numpy())
        return controls, lr_mult, st

    def mlp(x):
        y = mlp_fwd(x)
        if cap["on"]:
            cap["mlp"].append(y.double().cpu().numpy())
        return y

    def features(state):  # every step: the features and the loss buffer they come from
        f = feat(state)
        cap.setdefault("loss_state", []).append({k: state[k].double().cpu().numpy() for k in
                                                 ("means", "running_min", "decays", "iteration")})
        return f

    opt.rnn.forward, opt.network_stack.forward, opt.buffer_loss_fns.features = rnn, mlp, features


def loss_feature_rounding(st, steps):
    """How far VeLO's loss features can move when the loss EMAs are rounded differently. Feature j is
    (a - r) / (b - r) - 1 with a, b the bias-corrected EMAs j and j+1 and r the running minimum of EMA j,
    all near the loss: a ratio of near-equal differences. Each of a, b, r carries up to 2 ulps of rounding
    per step in each implementation (the EMA update, the bias correction), and the ratio turns an error e
    of them into e (1 / |b - r| + |a - r| / (b - r)^2)."""
    it = st["iteration"]
    cm = st["means"] / (1 - st["decays"] ** it)
    a, b, r = cm[:-1], cm[1:], st["running_min"][:-1]
    den = np.maximum(1e-8, b - r)
    ulp = np.spacing(np.maximum(np.maximum(np.abs(a), np.abs(b)), np.abs(r)).astype(np.float32)).astype(np.float64)
    slack = 4 * steps * ulp * (1 / den + np.abs(a - r) / den ** 2)
    return np.where(it <= 2, 0.0, slack) + 1e-7


def compare_velo_trace(path, cap, init):
    """Step 1: everything; every step: the LSTM inputs and lr_mult of each tensor."""
    n = len(TENSORS)
    sizes = [int(np.prod(s)) for _, s, _, _ in TENSORS]
    t = np.fromfile(path, dtype=np.float32).astype(np.float64)
    at = 0

    def take(k):
        nonlocal at
        at += k
        return t[at - k:at]

    def rel(a, b):
        return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
    out = {"loss_features_abs": 0.0, "loss_features_beyond_rounding": 0.0, "loss_features_slack": 0.0, "fraction_abs": 0.0,
           "other_lstm_inputs_abs": 0.0, "lr_mult_rel": 0.0}
    for s in range(STEPS):
        _, frac, lossf, lstm_in, lr_mult = take(10), take(9), take(9), take(30 * n).reshape(n, 30), take(n)
        theirs = cap["lstm_in"][s]
        out["fraction_abs"] = max(out["fraction_abs"], float(np.abs(frac - theirs[0, :9]).max()))
        d = np.abs(lossf - theirs[0, 9:18])
        out["loss_features_abs"] = max(out["loss_features_abs"], float(d.max()))
        slack = loss_feature_rounding(cap["loss_state"][s], s + 1)
        out["loss_features_beyond_rounding"] = max(out["loss_features_beyond_rounding"], float(np.maximum(d - slack, 0).max()))
        if d.max() >= out["loss_features_abs"]:  # the allowance where the largest difference is
            out["loss_features_slack"] = float(slack[int(np.argmax(d))])
        other = np.abs(lstm_in - theirs)
        other[:, 9:18] = 0
        out["other_lstm_inputs_abs"] = max(out["other_lstm_inputs_abs"], float(other.max()))
        out["lr_mult_rel"] = max(out["lr_mult_rel"], rel(lr_mult, cap["lr_mult"][s]))
        worst = int(np.argmax(np.abs(lr_mult - cap["lr_mult"][s]) / np.maximum(np.abs(cap["lr_mult"][s]), 1e-30)))
        out.setdefault("lr_mult_rel_by_step", []).append(
            [TENSORS[worst][0], float(f"{abs(lr_mult[worst] / cap['lr_mult'][s][worst] - 1):.3g}")])
        if s == 0:
            direction, magnitude, step = ([take(sz) for sz in sizes] for _ in range(3))
            out.update({"direction_rel": 0.0, "magnitude_rel": 0.0, "step_rel": 0.0})
            for i in range(n):
                y = cap["mlp"][i].reshape(-1, 3)
                scale = np.sqrt(np.mean(init[i].astype(np.float32) ** 2, dtype=np.float32) + np.float32(1e-9))
                pylo_step = cap["lr_mult"][0][i] * scale * y[:, 0] * np.exp(y[:, 1] * 0.001) * 0.001
                out["direction_rel"] = max(out["direction_rel"], rel(direction[i], y[:, 0]))
                out["magnitude_rel"] = max(out["magnitude_rel"], rel(magnitude[i], y[:, 1]))
                out["step_rel"] = max(out["step_rel"], rel(step[i], pylo_step))
    return out


# ---------------------------------------------------------------------------------------------------

def emit(rec, sink):
    line = json.dumps(rec)
    print(line, flush=True)
    if sink:
        sink.write(line + "\n")


def velo_decays(trace_path):
    """The loss-EMA decays of our VeLO (the first 10 values of the trace). PyLO gets its decays from
    torch.logspace, whose float32 values differ by a few ulps between torch versions and between its CPU
    and CUDA kernels (torch 1.13 on the CPU gives ours bit for bit); VeLO's loss features are ratios of
    near-equal differences of loss EMAs and turn those ulps into ~1e-5 changes of the LSTM inputs. So PyLO
    is run with our decays, and once with its own to show that effect ("pylo_own_decays")."""
    return np.fromfile(trace_path, dtype=np.float32, count=10)


def check_case(name, ci, c, spec, po, mods, data, d, w, sink, cpu):
    """cpu: no GPU here; PyLO runs on the CPU and ours are the CPU references (controls included)."""
    ctor, ours_opt, fixed, other_tie, _ = spec
    init, grads, losses = data
    ok = True
    velo = name == "velo"
    cap = {} if c.get("trace") else None
    sets = our_sets(ours_opt, fixed, c, w)
    dev = "cpu" if cpu else "cuda"
    runs, decays = {}, None
    ns = name in NS_FLOOR
    if ci == 0 or cpu or velo or ns:  # VeLO: the reference first, for its decays
        runs["ref"] = run_ours(d, ours_opt, sets, f"{name}{ci}_ref.bin", ref=True, trace=velo)
        decays = velo_decays(os.path.join(d, f"{name}{ci}_ref.bin.trace")) if velo else None
    theirs = run_pylo(ctor, po, mods, c, init, grads, losses, w, dev, cap, decays)
    if velo:
        runs["pylo_own_decays"] = run_pylo(ctor, po, mods, c, init, grads, losses, w, dev)
    if not cpu:
        runs["gpu"] = run_ours(d, ours_opt, sets, f"{name}{ci}_gpu.bin")
    if not cpu:
        runs["pylo_cpu"] = run_pylo(ctor, po, mods, c, init, grads, losses, w, "cpu", None, decays)
        if c.get("fast"):
            runs["gpu_fast"] = run_ours(d, ours_opt, sets + ["small_fc_lopt.fast=true"], f"{name}{ci}_fast.bin")
    if ci == 0:
        runs["control"] = run_ours(d, ours_opt, sets + [other_tie], f"{name}{ci}_ctl.bin", ref=cpu)
    floor = None
    if ns:
        # CELO2's Newton-Schulz amplifies float32 rounding in PyLO itself to ~1e-5 of the distance travelled, on
        # the 3x3 slices of a conv and on large matrices (1024 x 1100: 1.09e-5 on the GPU machine): PyLO in
        # float64 gives each tensor's noise floor (PyLO fp32 on the CPU against it). Two float32 runs are each
        # about that far from the exact answer, so ours must be within twice the floor of it (ref_vs_f64;
        # once would fail by chance about half the time), and within that plus the floor of PyLO fp32 (the
        # triangle inequality: ref, gpu); never looser than EXACT_BOUND where the floor is lower.
        runs["pylo_f64"] = run_pylo_f64(ctor, po, mods, c, init, grads, losses, w)
        runs["ref_vs_f64"] = runs["ref"]
        floor = errors(theirs if cpu else runs["pylo_cpu"], runs["pylo_f64"], init, c["wd"])
    # The sharp case amplifies float32 rounding: PyLO's own CPU and GPU runs differ by up to ~1e-5 of the
    # distance travelled there (9.2e-6 on the bias on an H100). Our GPU run is one more float32 order, so it
    # is held within twice PyLO's own spread on each tensor where that is looser than EXACT_BOUND; our CPU
    # reference keeps EXACT_BOUND against PyLO on the CPU.
    spread = errors(runs["pylo_cpu"], theirs, init, c["wd"]) if c.get("sharp") and not cpu else None
    differ = tie_mismatches(name, mods)
    for kind, traj in runs.items():
        # Like against like: our CPU reference against PyLO on the CPU (on the GPU machine PyLO's own CPU and
        # GPU runs differ by up to ~1e-5 in the sharp case), everything else against PyLO on the GPU.
        against = "pylo_cpu" if kind == "ref" and not cpu else ("pylo_cpu" if cpu else "pylo_gpu")
        target = runs["pylo_cpu"] if kind == "ref" and not cpu else theirs
        if kind == "ref_vs_f64":
            against, target = "pylo_f64", runs["pylo_f64"]
        errs = errors(traj, target, init, c["wd"])
        if errs is None:
            emit({"check": "pylo_crosscheck", "optimizer": name, "case": c, "run": kind, "pass": False,
                  "why": "a trajectory is not finite or does not move"}, sink)
            ok = False
            continue
        for i, ((tname, shape, _, _), (e, raw, ulps)) in enumerate(zip(TENSORS, errs)):
            rec = {"check": "pylo_crosscheck", "optimizer": name,
                   "case": {k: c[k] for k in ("lr", "wd", "num_steps", "clip", "adam_lr_mult") if k in c}, "run": kind,
                   "against": against,
                   "tensor": tname,
                   "shape": list(shape), "err": float(f"{e:.3g}"), "raw": float(f"{raw:.3g}"),
                   "disp_ulps": float(f"{ulps:.3g}")}
            if kind == "control":
                if tname not in TIED:
                    continue
                passed = raw >= CONTROL_MIN  # the wrong tie rule must show
            elif kind in ("pylo_cpu", "pylo_own_decays", "pylo_f64"):
                passed = True  # the noise floors and the effect of torch's logspace: reported, not judged
            elif tname in differ:
                rec["note"] = ("PyLO's factored dims here are " + str(differ[tname]) + ": numpy's argsort did not "
                               "keep the tied axes in order on this machine; we follow the stable order")
                passed = None
            else:
                bound = FAST_BOUND if kind == "gpu_fast" else EXACT_BOUND
                if floor is not None and kind in ("ref", "gpu", "ref_vs_f64"):
                    bound = max(bound, 2 * floor[i][0]) + (floor[i][0] if kind != "ref_vs_f64" else 0.0)
                    rec["bound"] = float(f"{bound:.3g}")
                if spread is not None and kind == "gpu":
                    bound = max(bound, 2 * spread[i][1])
                    rec["bound"] = float(f"{bound:.3g}")
                passed = e <= bound and (raw <= bound or not c.get("sharp"))
            ok &= passed is not False
            emit({**rec, "pass": passed}, sink)
    if cap is not None:
        tr = compare_velo_trace(os.path.join(d, f"{name}{ci}_ref.bin.trace"), cap, init)
        passed = all(v <= EXACT_BOUND for k, v in tr.items() if k.endswith("_rel")) and \
            tr["loss_features_beyond_rounding"] <= 1e-6 and tr["fraction_abs"] <= 1e-6 and \
            tr["other_lstm_inputs_abs"] <= 1e-5
        ok &= passed
        emit({"check": "pylo_crosscheck_velo_intermediates",
              **{k: v if isinstance(v, list) else float(f"{v:.3g}") for k, v in tr.items()}, "pass": bool(passed)}, sink)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pylo", required=True, help="path of a PyLO source checkout (the folder holding pylo/)")
    ap.add_argument("--json", help="also write the JSON lines to this file")
    ap.add_argument("--only", help="comma-separated subset of " + ",".join(OPTIMIZERS))
    ap.add_argument("--cpu", action="store_true", help="no GPU: PyLO on the CPU against our CPU references")
    ap.add_argument("--quick", action="store_true", help="leave out the > 1M-element tensor")
    args = ap.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("pylo_crosscheck: no GPU visible; run it on the GPU machine, or with --cpu against the CPU references.")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if args.quick:
        TENSORS[:] = [t for t in TENSORS if t[0] != "big"]
    po, pm, mods = import_pylo(args.pylo)
    names = args.only.split(",") if args.only else list(OPTIMIZERS)
    ok, checked = True, 0
    sink = open(args.json, "w") if args.json else None
    with tempfile.TemporaryDirectory() as d:
        w = os.path.join(d, "weights")
        write_weights(pm, w)
        data = make_data(d)
        emit({"check": "pylo_crosscheck_setup", "torch": torch.__version__, "numpy": np.__version__,
              "pylo_factored_dims": {m: {str(s): mods[m].factored_dims(torch.Size(s)) for _, s, _, _ in TENSORS}
                                     for m in mods},
              "steps": STEPS, "tensors": len(TENSORS)}, sink)
        for name in names:
            for ci, c in enumerate(OPTIMIZERS[name][4]):
                ok &= check_case(name, ci, c, OPTIMIZERS[name], po, mods, data, d, w, sink, args.cpu)
                checked += 1
    if sink:
        sink.close()
    ok &= checked > 0
    print(f"pylo_crosscheck: {'PASS' if ok else 'FAIL'} ({checked} cases)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
