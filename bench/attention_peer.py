#!/usr/bin/env python3
"""The peer for bench_gpt2_ops --attention-only (GPU machine): torch's scaled_dot_product_attention with its cuDNN
backend and its flash backend, forward and backward, bf16, at GPT-2 124M's attention (64 x 12 heads x T 1024,
causal) and ViT-B/16's (256 x 12 heads x T 197, not causal).

    python3 bench/attention_peer.py [--reps 20]

q, k and v are strided views of one (B, T, 3, H, 64) tensor, as our kernels read them from qkv (a backend that
refuses that layout is timed on contiguous (B, H, T, 64) copies, and the line says so). The forward runs with
autograd on, so that it keeps what the backward needs (the logsumexp), as ours does; the backward is
torch.autograd.grad of the output for dq, dk, dv. Times: medians of --reps calls after 3 warm-ups, CUDA events.
FLOPs as bench_gpt2_ops counts them: 4 B H T^2 64 forward, halved when causal; backward 2.5x the forward.

Prints one JSON line per (shape, backend, op): {"peer", "backend", "model", "B", "H", "T", "causal", "layout",
"op", "ms", "tflops", "torch", "cudnn", "gpu"}; a backend that runs neither layout prints "error" instead.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [("gpt2-124m", 64, 12, 1024, True), ("vit-b16", 256, 12, 197, False)]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def median_ms(fn, reps):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def inputs(B, H, T, layout):
    """q, k, v (B, H, T, 64) that want gradients, and dout: views into one qkv as ours read it, or contiguous."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    qkv = torch.randn(B, T, 3, H, 64, device="cuda", dtype=torch.bfloat16, generator=gen)
    if layout == "strided":
        qkv.requires_grad_()
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    else:
        q, k, v = (qkv[:, :, i].transpose(1, 2).contiguous().requires_grad_() for i in range(3))
    dout = torch.randn(B, H, T, 64, device="cuda", dtype=torch.bfloat16, generator=gen)
    return q, k, v, dout


def time_backend(backend, B, H, T, causal, layout, reps):
    q, k, v, dout = inputs(B, H, T, layout)
    with sdpa_kernel([BACKENDS[backend]]):
        fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
        out = fwd()
        bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
        return median_ms(fwd, reps), median_ms(bwd, reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    common = {"peer": "torch sdpa", "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
              "gpu": torch.cuda.get_device_name()}
    for model, B, H, T, causal in SHAPES:
        flop = 4.0 * B * H * T * T * 64 / (2 if causal else 1)
        for backend in BACKENDS:
            line = dict(common, backend=backend, model=model, B=B, H=H, T=T, causal=causal)
            errors = []
            for layout in ("strided", "contiguous"):
                try:
                    fwd_ms, bwd_ms = time_backend(backend, B, H, T, causal, layout, a.reps)
                except RuntimeError as e:  # this backend refuses the shape or the layout
                    errors.append(f"{layout}: {str(e).splitlines()[0][:200]}")
                    torch.cuda.synchronize()
                    continue
                for op, ms, f in (("fwd", fwd_ms, flop), ("bwd", bwd_ms, 2.5 * flop)):
                    print(json.dumps(dict(line, layout=layout, op=op, ms=round(ms, 4), tflops=round(f / ms * 1e-9, 1))),
                          flush=True)
                break
            else:
                print(json.dumps(dict(line, error="; ".join(errors))), flush=True)


if __name__ == "__main__":
    main()
