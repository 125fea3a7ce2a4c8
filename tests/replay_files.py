"""The files that build/optim_replay (tests/tools/optim_replay.cu) reads and writes, shared by the
PyTorch and PyLO optimizer cross-checks: a manifest of the tensors, the initial parameters and every
step's gradients (and losses) as raw float32, and its output, the parameters after every step."""
import os

import numpy as np


def hetero_grad(rng, shape, scale, spread=1.0):
    """A gradient with heterogeneous scales: N(0, 1) times exp(spread * N(0, 1)) per row and per column."""
    cols = shape[-1] if len(shape) else 1
    rows = int(np.prod(shape)) // cols
    g = rng.standard_normal((rows, cols)) * np.exp(spread * rng.standard_normal((rows, 1))) \
        * np.exp(spread * rng.standard_normal((1, cols)))
    return (scale * g).astype(np.float32).reshape(shape)


def write_replay(d, tensors, steps, init, grads, losses=None):
    """tensors: (name, shape, role, weight decay); init: one array per tensor; grads: steps lists of those."""
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write(f"steps {steps}\n")
        for name, shape, role, decay in tensors:
            f.write(f"tensor {name} {role} {decay} {len(shape)} {' '.join(map(str, shape))}\n")
    np.concatenate([x.ravel() for x in init]).tofile(os.path.join(d, "init.bin"))
    np.concatenate([x.ravel() for step in grads for x in step]).tofile(os.path.join(d, "grads.bin"))
    if losses is not None:
        losses.tofile(os.path.join(d, "losses.bin"))


def read_steps(path, tensors, steps):
    """optim_replay's output: for each step, one array per tensor."""
    sizes = [int(np.prod(s)) for _, s, _, _ in tensors]
    per_step = np.fromfile(path, dtype=np.float32).reshape(steps, sum(sizes))
    out = []
    for s in range(steps):
        parts, at = [], 0
        for (_, shape, _, _), n in zip(tensors, sizes):
            parts.append(per_step[s, at:at + n].reshape(shape))
            at += n
        out.append(parts)
    return out
