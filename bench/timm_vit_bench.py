#!/usr/bin/env python3
"""The peer for train_vit's throughput (GPU machine): timm's VisionTransformer trained on random batches held
on the GPU, bf16 autocast, AdamW (fused), eager and torch.compile, the same step train_vit --synthetic times.

    python3 bench/timm_vit_bench.py [--model vit_base_patch16_224] [--batch 256,32] [--steps 20] [--compile 0,1]

Prints one JSON line per configuration: {"peer": "timm", "model", "B", "compile", "img_per_s", "step_ms"}
(median step time over the steps after 5 warm-up steps, each step synchronised).
"""
import argparse
import json
import statistics
import time

import torch


def bench(model_name, B, steps, compiled):
    import timm
    model = timm.create_model(model_name, num_classes=1000).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
    step_model = torch.compile(model) if compiled else model
    x = torch.randn(B, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (B,), device="cuda")
    times = []
    for i in range(steps + 5):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(step_model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= 5:
            times.append(time.perf_counter() - t)
    ms = statistics.median(times) * 1e3
    return {"peer": "timm " + timm.__version__, "torch": torch.__version__, "model": model_name, "B": B,
            "compile": compiled, "img_per_s": round(B / ms * 1e3, 1), "step_ms": round(ms, 3),
            "gpu": torch.cuda.get_device_name()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="vit_base_patch16_224")
    ap.add_argument("--batch", default="256,32")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--compile", default="0,1")
    a = ap.parse_args()
    for c in a.compile.split(","):
        for b in a.batch.split(","):
            print(json.dumps(bench(a.model, int(b), a.steps, c == "1")), flush=True)


if __name__ == "__main__":
    main()
