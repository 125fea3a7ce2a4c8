"""What the model cross-checks (torch_gpt2_crosscheck.py, timm_vit_crosscheck.py) share: our dump's tensors by
name, relative errors, and the per-tensor gradient and parameter comparisons that leave out the key bias
(softmax is invariant to the constant q.b_k added to a row of scores, so its true gradient is exactly 0 and
both sides hold rounding noise)."""
import numpy as np


def sig(x, n=3):
    return None if x is None else float(f"{x:.{n}g}")


def slice_of(flat, t):
    return flat[t["offset"]:t["offset"] + t["numel"]].reshape(t["shape"])


def by_name(table, flat):
    return {t["name"]: slice_of(flat, t) for t in table["tensors"]}


def key_bias_mask(t, C):
    """Boolean mask of the elements of tensor t whose true gradient is exactly 0 (the key bias), or None."""
    if t["name"].endswith("attn.k.bias"):
        return np.ones(t["shape"], dtype=bool)
    if t["name"].endswith("attn.qkv.bias"):
        m = np.zeros(t["shape"], dtype=bool)
        m[C:2 * C] = True
        return m
    return None


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def grad_errors(table, C, ours, theirs):
    """Per-tensor relative errors of the gradients `ours` against `theirs` (dicts by our names), key bias left
    out; and the key bias's largest |g| on each side next to the largest other gradient."""
    errs, noise = {}, {"ours": 0.0, "theirs": 0.0, "largest_other": 0.0}
    for t in table["tensors"]:
        g_ours, g_theirs = ours[t["name"]].astype(np.float64), theirs[t["name"]].astype(np.float64)
        m = key_bias_mask(t, C)
        if m is not None:
            noise["ours"] = max(noise["ours"], float(np.abs(g_ours[m]).max()))
            noise["theirs"] = max(noise["theirs"], float(np.abs(g_theirs[m]).max()))
            if m.all():
                continue
            g_ours, g_theirs = g_ours[~m], g_theirs[~m]
        noise["largest_other"] = max(noise["largest_other"], float(np.abs(g_theirs).max()))
        errs[t["name"]] = rel(g_ours, g_theirs)
    return errs, noise


def param_errors(table, C, p0, ours, theirs):
    """Per-tensor ||ours - theirs|| / ||theirs - p0|| (dicts by name; p0 flat), key bias left out."""
    errs = {}
    for t in table["tensors"]:
        a, b, z = (x.astype(np.float64) for x in (ours[t["name"]], theirs[t["name"]], slice_of(p0, t)))
        m = key_bias_mask(t, C)
        if m is not None:
            if m.all():
                continue
            a, b, z = a[~m], b[~m], z[~m]
        errs[t["name"]] = float(np.linalg.norm(a - b) / max(np.linalg.norm(b - z), 1e-30))
    return errs


def worst(errs):
    name = max(errs, key=errs.get)
    return name, errs[name]
