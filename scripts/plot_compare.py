#!/usr/bin/env python3
"""Summarises an optimizer comparison (scripts/compare_optimizers.sh): a markdown table and a plot of
validation loss (train_vit: and top-1) by step, one line per configuration, averaged over seeds.

    python3 scripts/plot_compare.py .out/compare/gpt2 results/compare_gpt2 [--title T] [--task gpt2|vit] [--no-plot]

Reads every LABEL_sSEED.jsonl in LOGDIR and writes OUTPREFIX.md (also printed) and OUTPREFIX.png (needs
matplotlib; the table does not). A run's lines: the programs' steps ("loss") and validations ("val_loss",
train_vit's "val_top1"; null where a value was not finite), between the script's "compare_run" and
"compare_end" lines (optimizer, seed, flags; status and wall seconds). A run whose loss went null, or whose
status is "diverged", counts as diverged; one without "compare_end" as incomplete. Means and spreads are
over the runs that finished ("ok"); the status column counts the others.
"""
import argparse
import json
import math
import os
import re
import statistics
import sys

# Table order, and the plot's colour family per optimizer (matplotlib colormaps); others follow by name.
OPTIMIZERS = ["adamw", "adafactor", "muon", "velo", "small_fc_lopt", "celo2", "elo_celo2"]
COLORMAPS = {"adamw": "Blues", "adafactor": "Purples", "muon": "Greens", "velo": "Oranges",
             "small_fc_lopt": "YlOrBr", "celo2": "Reds", "elo_celo2": "RdPu"}
RUN_NAME = re.compile(r"^(?P<label>.+)_s(?P<seed>\d+)\.jsonl$")


def finite(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def read_run(path, label, seed):
    """One run's log as a dict: validation points (step, loss, top-1 or None; loss None = not finite),
    status, wall seconds, optimizer, flags and the units (tokens or images) one step trains on."""
    run = {"label": label, "seed": seed, "optimizer": label.split("_")[0], "flags": "", "val": [],
           "status": "incomplete", "wall_s": None, "nonfinite": False, "per_step": [], "unit": None}
    with open(path) as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError:
            # A run killed mid-write leaves a partial last line; anything else is a broken file.
            if n < len(lines):
                raise SystemExit(f"plot_compare.py: {path}:{n} is not a JSON line.")
            break
        if "compare_run" in r:
            head = r["compare_run"]
            run["optimizer"] = head.get("optimizer", run["optimizer"])
            run["flags"] = head.get("flags", "")
        elif "compare_end" in r:
            run["status"], run["wall_s"] = r["compare_end"].get("status", "failed"), r["compare_end"].get("wall_s")
        elif "val_loss" in r:
            loss, top1 = r["val_loss"], r.get("val_top1")
            run["nonfinite"] |= not finite(loss)
            # A non-finite loss makes that validation's accuracy meaningless too.
            ok = finite(loss) and finite(top1)
            run["val"].append((r["step"], loss if finite(loss) else None, 100 * top1 if ok else None))
        elif "loss" in r:
            run["nonfinite"] |= not finite(r["loss"])
            # Units per step = rate x step time (the log has no batch size): tok_per_s or img_per_s.
            for k, v in r.items():
                if k.endswith("_per_s") and finite(v) and finite(r.get("ms")):
                    run["unit"] = {"tok": "tokens", "img": "images"}.get(k[:-6], k[:-6])
                    run["per_step"].append(v * r["ms"] / 1000)
    if run["nonfinite"]:
        run["status"] = "diverged"
    return run


def read_runs(logdir):
    runs = []
    for name in sorted(os.listdir(logdir)):
        m = RUN_NAME.match(name)
        if m:
            runs.append(read_run(os.path.join(logdir, name), m["label"], int(m["seed"])))
    return runs


def lr_of(label, flags):
    """The swept learning rate as (text, value): the flags' --set X.lr=V (shown with X.lr) or -l V, else the
    label's _lr<V> suffix."""
    m = re.search(r"--set[ =](\w+)\.lr=(\S+)", flags)
    if m:
        return f"{m[2]} ({m[1]}.lr)", float(m[2])
    m = re.search(r"(?:^|\s)(?:-l|--lr)[ =](\S+)", flags) or re.search(r"_lr([0-9.eE+-]+)$", label)
    if m:
        try:
            return m[1], float(m[1])
        except ValueError:
            pass
    return "default", math.nan


def spread(values, digits):
    """mean ± sample std, or the single value; '' for none."""
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def summarise(runs):
    """One row per label (dicts), sorted by optimizer, then learning rate."""
    rows = {}
    for run in runs:
        rows.setdefault(run["label"], []).append(run)
    out = []
    for label, rs in rows.items():
        rs.sort(key=lambda r: r["seed"])
        ok = [r for r in rs if r["status"] == "ok" and any(v[1] is not None for v in r["val"])]
        lr_text, lr = lr_of(label, rs[0]["flags"])
        row = {"label": label, "optimizer": rs[0]["optimizer"], "lr": lr_text, "lr_value": lr,
               "seeds": [r["seed"] for r in rs], "runs": rs,
               "final": [[v for v in r["val"] if v[1] is not None][-1][1] for r in ok],
               "best": [min(v[1] for v in r["val"] if v[1] is not None) for r in ok],
               "final_top1": [r["val"][-1][2] for r in ok if r["val"][-1][2] is not None],
               "best_top1": [max(v[2] for v in r["val"] if v[2] is not None) for r in ok
                             if any(v[2] is not None for v in r["val"])],
               "wall": [r["wall_s"] for r in (ok or rs) if finite(r["wall_s"])]}
        counts = {}
        for r in rs:
            if r["status"] != "ok":
                counts[r["status"]] = counts.get(r["status"], 0) + 1
        row["diverged"] = counts.get("diverged", 0)
        row["status"] = ", ".join(f"{s} {n}/{len(rs)}" for s, n in sorted(counts.items())) or "ok"
        out.append(row)
    rank = {o: i for i, o in enumerate(OPTIMIZERS)}
    out.sort(key=lambda r: (rank.get(r["optimizer"], len(rank)), r["optimizer"],
                            math.inf if math.isnan(r["lr_value"]) else r["lr_value"], r["label"]))
    return out


def table(rows, top1, title=""):
    head = ["label", "optimizer", "lr", "seeds", "final val loss", "best val loss"]
    head += ["final top-1 (%)", "best top-1 (%)"] if top1 else []
    head += ["wall s / run", "status"]
    lines = [f"### {title}", ""] if title else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        # A label with no finished run shows why in place of its numbers.
        none = "diverged" if r["diverged"] and not r["final"] else "–"
        cells = [r["label"], r["optimizer"], r["lr"], " ".join(map(str, r["seeds"])),
                 spread(r["final"], 4) or none, spread(r["best"], 4) or none]
        if top1:
            cells += [spread(r["final_top1"], 2) or none, spread(r["best_top1"], 2) or none]
        cells += [f"{statistics.mean(r['wall']):.0f}" if r["wall"] else "–", r["status"]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Final: the last validation; best: each run's lowest validation loss (highest top-1); mean ± "
              "sample std over the seeds that finished. Wall: mean seconds per run (of those seeds), build "
              "excluded. Status: runs that diverged (non-finite loss), failed, were stopped or are incomplete "
              "(no end line)."]
    return "\n".join(lines) + "\n"


def curve(runs, index):
    """Mean, min and max over runs at each validation step, of field `index` (1 loss, 2 top-1), finite values
    only; and each diverged run's last finite point (where it stopped)."""
    by_step = {}
    for r in runs:
        for v in r["val"]:
            if v[index] is not None:
                by_step.setdefault(v[0], []).append(v[index])
    steps = sorted(by_step)
    ends = []
    for r in runs:
        pts = [v for v in r["val"] if v[index] is not None]
        if r["status"] == "diverged" and pts:
            ends.append((pts[-1][0], pts[-1][index]))
    return (steps, [statistics.mean(by_step[s]) for s in steps], [min(by_step[s]) for s in steps],
            [max(by_step[s]) for s in steps], ends)


def plot(rows, png, top1, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import EngFormatter
    except ImportError:
        return False
    panels = 2 if top1 else 1
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 5), dpi=110, squeeze=False)
    axes = axes[0]
    by_opt = {}
    for r in rows:
        by_opt.setdefault(r["optimizer"], []).append(r)
    # The best configuration per optimizer (lowest mean final loss; one whose every run finished, where
    # there is one) is drawn thicker.
    def best_of(rs):
        whole = [r for r in rs if r["final"] and r["status"] == "ok"] or [r for r in rs if r["final"]]
        return min(whole, key=lambda r: statistics.mean(r["final"]), default=None)
    best = {o: best_of(rs) for o, rs in by_opt.items()}
    spare = iter(["Greys", "BuPu", "PuBuGn", "YlGn", "OrRd"])
    lo, hi = math.inf, -math.inf
    for opt, rs in by_opt.items():
        cmap = plt.get_cmap(COLORMAPS.get(opt) or next(spare, "Greys"))
        for k, r in enumerate(rs):  # rs: by lr, lightest to darkest
            color = cmap(0.45 + 0.5 * k / max(1, len(rs) - 1))
            thick = r is best[opt]
            name = r["label"] if r["status"] == "ok" else f"{r['label']} ({r['status']})"
            for ax, index in zip(axes, (1, 2)):
                steps, mean, vmin, vmax, ends = curve(r["runs"], index)
                if not steps:
                    continue
                ax.plot(steps, mean, color=color, lw=2.8 if thick else 1.2, label=name, zorder=3 if thick else 2)
                if len(r["runs"]) > 1:
                    ax.fill_between(steps, vmin, vmax, color=color, alpha=0.15, lw=0)
                for s, v in ends:
                    ax.plot([s], [v], "x", color=color, ms=8, mew=2)
                if index == 1:
                    # The y range follows the curves after their first tenth: the initial loss would
                    # otherwise flatten the part where the optimizers differ.
                    tail = [m for s, m in zip(steps, mean) if s >= 0.1 * steps[-1]] or mean
                    lo, hi = min(lo, min(vmin)), max(hi, max(tail))
    if lo < hi:
        axes[0].set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    axes[0].set_ylabel("validation loss")
    if top1:
        axes[1].set_ylabel("validation top-1 (%)")
    per_step = [p for r in rows for run in r["runs"] for p in run["per_step"]]
    unit = next((run["unit"] for r in rows for run in r["runs"] if run["unit"]), None)
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if per_step:  # a second x axis in tokens / images, where the log has the rate to derive them
            u = statistics.median(per_step)
            top = ax.secondary_xaxis("top", functions=(lambda s, u=u: s * u, lambda t, u=u: t / u))
            top.set_xlabel(unit)
            top.xaxis.set_major_formatter(EngFormatter())
    axes[0].legend(fontsize=8, loc="upper right")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir")
    ap.add_argument("outprefix")
    ap.add_argument("--title", default="")
    ap.add_argument("--task", choices=["gpt2", "vit"], help="vit adds top-1 (default: vit where the logs have it)")
    ap.add_argument("--no-plot", action="store_true", help="write the table only")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.logdir):
        sys.exit(f"plot_compare.py: {a.logdir} is not a folder.")
    runs = read_runs(a.logdir)
    if not runs:
        sys.exit(f"plot_compare.py: no LABEL_sSEED.jsonl logs in {a.logdir}.")
    top1 = a.task == "vit" if a.task else any(v[2] is not None for r in runs for v in r["val"])
    rows = summarise(runs)
    text = table(rows, top1, a.title)
    if os.path.dirname(a.outprefix):
        os.makedirs(os.path.dirname(a.outprefix), exist_ok=True)
    with open(a.outprefix + ".md", "w") as f:
        f.write(text)
    print(text, end="")
    if a.no_plot:
        return 0
    if not plot(rows, a.outprefix + ".png", top1, a.title):
        sys.exit(f"plot_compare.py: wrote {a.outprefix}.md; the plot needs matplotlib (pip install matplotlib), "
                 "or pass --no-plot.")
    print(f"wrote {a.outprefix}.md and {a.outprefix}.png ({len(rows)} configurations, {len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
