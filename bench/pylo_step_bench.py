#!/usr/bin/env python3
"""The peers of bench_optim (GPU machine): the optimizer step of PyLO (its naive PyTorch code and its CUDA
extensions) and of torch (AdamW, Adafactor, Muon) on the same tensor shapes, one JSON line per measurement.

    ./bench_optim -e gpt2-124m,mat-8192x8192 --shapes 1 > shapes.jsonl
    python3 bench/pylo_step_bench.py --shapes shapes.jsonl --pylo .deps/pylo \\
        --run pylo_naive:small_fc_lopt,pylo_cuda:velo,torch:adamw [--steps 10] [--budget 60]

The shapes are bench_optim's (--shapes 1: each model's tensors, their role, and whether Muon owns them), so the
peers step exactly our tensors. Parameters N(0, 0.02), gradients N(0, 1e-3), fixed; each step is timed with
CUDA events (median of --steps after 2 untimed ones; fewer when one step takes longer than --budget / steps).
Learned optimizers run on random meta-weights of the published shapes, written with PyLO's own classes (as
tests/pylo_crosscheck.py does; the step time does not depend on their values); CELO2 on its real weights
(optim/lopt/weights/celo2). PyLO's CUDA optimizers need its extensions built in the source folder
(`PYLO_CUDA=1 python3 setup.py build_ext --inplace` there: cuda_lo, velo_cuda_kernel, celo2_cuda_kernel); VeLO's CUDA version
compiles its feature function with torch.compile on the first steps (untimed).

Each line: {"bench":"peer_optim_step","impl","optimizer","model","params","median_ms","min_ms","steps","gpu",
"torch"}, or the same keys up to "model" with "error" (an import or a step that failed, out of memory, a
budget exceeded); the script goes on with the next measurement and exits 0.
"""
import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
import types

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = {
    "pylo_naive": ["small_fc_lopt", "velo", "celo2", "elo", "elo_celo2"],
    "pylo_cuda": ["small_fc_lopt", "velo", "celo2", "elo", "elo_celo2"],
    "torch": ["adamw", "adamw_foreach", "adafactor", "muon"],
}


def emit(rec):
    print(json.dumps(rec, separators=(",", ":")), flush=True)


def read_shapes(path):
    models = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                models.setdefault(r["model"], []).append(r)
    return models


def stub_missing(name, **attrs):
    """PyLO's CUDA modules import packages they do not use (sympy in AdafacLO_cuda): a stand-in where missing."""
    try:
        importlib.import_module(name)
    except ImportError:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m


class Pylo:
    """PyLO imported from its source folder, with random meta-weights written by its classes."""

    def __init__(self, path):
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        import pylo_crosscheck as pc  # its PyLO import (mup stub) and weight writer
        self.pc = pc
        self.po, self.pm, self.mods = pc.import_pylo(path)
        self.tmp = tempfile.TemporaryDirectory(prefix="pylo_step_bench_")
        pc.write_weights(self.pm, self.tmp.name)
        self.w = self.tmp.name

    def naive(self, name, groups):
        pc, c = self.pc, {"lr": 1e-3, "wd": 0.0, "num_steps": 10000}
        ctor = {"small_fc_lopt": pc.small_fc_pylo, "velo": pc.velo_pylo, "celo2": pc.celo2_pylo,
                "elo": pc.elo_pylo, "elo_celo2": pc.elo_celo2_pylo}[name]
        return ctor(self.po, self.mods, groups, dict(c, lr=1.0) if name == "small_fc_lopt" else c, self.w)

    def cuda(self, name, groups):
        stub_missing("sympy", beta=None)
        w = self.w
        if name == "small_fc_lopt":
            return importlib.import_module("pylo.optim.AdafacLO_cuda").AdafacLO_CUDA(
                groups, lr=1.0, hf_key=os.path.join(w, "mulo"))
        if name == "velo":
            return importlib.import_module("pylo.optim.velo_cuda").VeLO_CUDA(
                groups, lr=1e-3, num_steps=10000, hf_key_rnn=os.path.join(w, "VeLO_RNN"),
                hf_key_mlp=os.path.join(w, "VeLO_MLP"))
        # CELO2, ELO, ELO_CELO2 (PyLO d05c6c1: celo2_cuda_kernel, cuda_lo), with the naive constructor's arguments.
        module, cls_name = {"celo2": ("CELO2_cuda", "CELO2_CUDA"), "elo": ("ELO_cuda", "ELO_CUDA"),
                            "elo_celo2": ("ELO_CELO2_cuda", "ELO_CELO2_CUDA")}[name]
        cls = getattr(importlib.import_module("pylo.optim." + module), cls_name)
        hf = {"celo2": self.pc.CELO2_WEIGHTS, "elo": os.path.join(w, "elo"), "elo_celo2": os.path.join(w, "elo-celo2")}[name]
        if name == "elo":
            return cls(groups, lr=1e-3, weight_decay=0.0, hf_key=hf)
        return cls(self.pc.adam_groups(groups, {}), lr=1e-3, weight_decay=0.0, hf_key=hf)


def torch_optimizer(name, tensors, params):
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, fused=True)
    if name == "adamw_foreach":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, foreach=True)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-2, foreach=True)
    if name == "muon":
        # torch's Muon on the hidden matrices (bench_optim's "muon" flag), AdamW on the rest, as ours.
        hidden = [p for t, p in zip(tensors, params) if t["muon"]]
        rest = [p for t, p in zip(tensors, params) if not t["muon"]]
        opts = [torch.optim.Muon(hidden, lr=0.02)] if hidden else []
        if rest:
            opts.append(torch.optim.AdamW(rest, lr=1e-3, fused=True))

        class Both:
            def step(self):
                for o in opts:
                    o.step()
        return Both()
    raise ValueError(name)


def measure(impl, name, model, tensors, args, pylo):
    head = {"bench": "peer_optim_step", "impl": impl, "optimizer": name, "model": model}
    params = []
    try:
        g = torch.Generator(device="cuda").manual_seed(1)
        for t in tensors:
            p = torch.randn(t["shape"], device="cuda", generator=g) * 0.02
            p.requires_grad_(True)
            p.grad = torch.randn(t["shape"], device="cuda", generator=g) * 1e-3
            params.append(p)
        groups = [{"params": params, "weight_decay": 0.0}]
        if impl == "torch":
            opt = torch_optimizer(name, tensors, params)
        elif impl == "pylo_naive":
            opt = pylo.naive(name, groups)
        else:
            opt = pylo.cuda(name, groups)
        loss = torch.tensor(3.0, device="cuda")
        velo = name == "velo"

        def step():
            opt.step(loss) if velo else opt.step()

        t0 = time.perf_counter()
        for _ in range(2):  # untimed: state allocation, torch.compile, kernel loading
            step()
        torch.cuda.synchronize()
        per = (time.perf_counter() - t0) / 2
        steps = max(1, min(args.steps, int(args.budget / max(per, 1e-6))))
        times = []
        for _ in range(steps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        emit(dict(head, params=sum(p.numel() for p in params), median_ms=round(statistics.median(times), 4),
                  min_ms=round(min(times), 4), steps=steps, gpu=torch.cuda.get_device_name(), torch=torch.__version__))
    except Exception as e:  # noqa: BLE001 - one line per failed measurement, then the next one
        msg = str(e).strip().splitlines()
        emit(dict(head, error=f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]))
    finally:
        del params
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True, help="bench_optim --shapes 1 output (JSON lines)")
    ap.add_argument("--pylo", default=os.environ.get("PYLO_SRC", os.path.join(ROOT, ".deps", "pylo")),
                    help="PyLO's source folder (default $PYLO_SRC or .deps/pylo)")
    ap.add_argument("--run", required=True,
                    help="comma-separated IMPL:OPTIMIZER (impls: " + ", ".join(f"{k} ({'/'.join(v)})" for k, v in IMPLS.items()) + ")")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--budget", type=float, default=60, help="seconds of timed steps per measurement at most")
    a = ap.parse_args()
    runs = []
    for item in a.run.split(","):
        impl, _, name = item.partition(":")
        if impl not in IMPLS or name not in IMPLS[impl]:
            sys.exit(f"pylo_step_bench.py: unknown run '{item}'; impls and optimizers: {IMPLS}.")
        runs.append((impl, name))
    models = read_shapes(a.shapes)
    if not models:
        sys.exit(f"pylo_step_bench.py: no shapes in {a.shapes} (make it with ./bench_optim -e MODELS --shapes 1).")
    if not torch.cuda.is_available():
        sys.exit("pylo_step_bench.py: needs a CUDA GPU and torch sees none.")
    torch.backends.cuda.matmul.allow_tf32 = False
    pylo = None
    if any(impl != "torch" for impl, _ in runs):
        try:
            pylo = Pylo(a.pylo)
        except Exception as e:  # noqa: BLE001 - without PyLO the torch peers still run
            for impl, name in runs:
                if impl != "torch":
                    for model in models:
                        emit({"bench": "peer_optim_step", "impl": impl, "optimizer": name, "model": model,
                              "error": f"PyLO not importable from {a.pylo}: {type(e).__name__}: {e}"[:300]})
            runs = [r for r in runs if r[0] == "torch"]
    for model, tensors in models.items():
        for impl, name in runs:
            measure(impl, name, model, tensors, a, pylo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
