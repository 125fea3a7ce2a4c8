#!/usr/bin/env python3
"""Plots a train_gpt2 / train_vit JSON-lines log: training loss (and its moving average), validation loss and,
for train_vit, validation top-1 accuracy (right axis) by step.

    python3 scripts/plot_log.py run.jsonl out.png [--title TEXT]

Needs matplotlib. Lines with "loss" are training steps, lines with "val_loss" validation points.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_log.py: matplotlib is needed (pip install matplotlib).")
    steps, loss, vsteps, vloss, top1 = [], [], [], [], []
    with open(a.log) as f:
        for line in f:
            r = json.loads(line)
            if "val_loss" in r:
                vsteps.append(r["step"])
                vloss.append(r["val_loss"])
                if "val_top1" in r:
                    top1.append(100 * r["val_top1"])
            elif "loss" in r:
                steps.append(r["step"])
                loss.append(r["loss"])
    if not steps:
        sys.exit(f"plot_log.py: no training steps in {a.log}.")
    k, avg, run = 50, [], 0.0
    for i, v in enumerate(loss):
        run += v - (loss[i - k] if i >= k else 0.0)
        avg.append(run / min(i + 1, k))
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.plot(steps, loss, color="#9ecae1", lw=0.6, label="train loss")
    ax.plot(steps, avg, color="#3182bd", lw=1.5, label=f"train loss ({k}-step mean)")
    if vsteps:
        ax.plot(vsteps, vloss, "o-", color="#e6550d", ms=3, lw=1.5, label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per token)" if not top1 else "cross-entropy (nats per image)")
    ax.set_ylim(min(loss + vloss) - 0.2, min(max(loss[:5] + vloss[:1]) + 0.2, 12))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center" if top1 else "best")
    if top1 and len(top1) == len(vsteps):
        acc = ax.twinx()
        acc.plot(vsteps, top1, "s-", color="#31a354", ms=3, lw=1.5)
        acc.set_ylabel("validation top-1 (%)", color="#31a354")
        for x, y in zip(vsteps[-1:], top1[-1:]):
            acc.annotate(f"{y:.2f}%", (x, y), textcoords="offset points", xytext=(-30, -14), color="#31a354")
    if a.title:
        ax.set_title(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.png)
    print(f"wrote {a.png}: {len(steps)} steps, {len(vsteps)} validation points")


if __name__ == "__main__":
    main()
