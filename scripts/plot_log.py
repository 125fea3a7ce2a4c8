#!/usr/bin/env python3
"""Plots a train_gpt2 JSON-lines log: training loss (and its moving average) and validation loss by step.

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
    steps, loss, vsteps, vloss = [], [], [], []
    with open(a.log) as f:
        for line in f:
            r = json.loads(line)
            if "val_loss" in r:
                vsteps.append(r["step"]), vloss.append(r["val_loss"])
            elif "loss" in r:
                steps.append(r["step"]), loss.append(r["loss"])
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
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(min(loss + vloss) - 0.2, min(max(loss[:5] + vloss[:1]) + 0.2, 12))
    ax.grid(alpha=0.3)
    ax.legend()
    if a.title:
        ax.set_title(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.png)
    print(f"wrote {a.png}: {len(steps)} steps, {len(vsteps)} validation points")


if __name__ == "__main__":
    main()
