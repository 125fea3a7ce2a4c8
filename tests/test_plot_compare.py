#!/usr/bin/env python3
"""scripts/plot_compare.py's table on synthetic logs (standard library only; matplotlib is not needed):
2 configurations x 2 seeds, one run diverging (a null validation loss); runs that diverged without a null,
or have no end line; means, spreads, the status counts, the sort order, and the table without matplotlib.

    python3 tests/test_plot_compare.py
"""
import contextlib
import importlib.util
import io
import json
import os
import statistics
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("plot_compare", os.path.join(HERE, "..", "scripts", "plot_compare.py"))
pc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pc)


def write_log(folder, label, seed, optimizer, flags, val, end=("ok", 0, 12.5), top1=True):
    """A log as compare_optimizers.sh leaves it: its header, a step line and a validation line per point
    of `val` (None = the program's null), then its end line (end=None: a run still going)."""
    lines = [{"compare_run": {"task": "vit", "label": label, "optimizer": optimizer, "flags": flags,
                              "seed": seed, "steps": 100}}]
    for i, v in enumerate(val):
        lines.append({"step": i * 10 + 1, "loss": v, "lr_scale": 1.0, "grad_norm": 1.0, "ms": 5.0, "opt_ms": 1.0,
                      "img_per_s": 51200.0, "mfu": 0.1})
        point = {"step": i * 10, "val_loss": v}
        if top1:
            point.update(val_top1=0.5 + 0.1 * i, val_top5=0.9)
        lines.append(point)
    if end:
        lines.append({"compare_end": {"status": end[0], "exit": end[1], "wall_s": end[2]}})
    with open(os.path.join(folder, f"{label}_s{seed}.jsonl"), "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))


class PlotCompareTable(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        write_log(self.dir, "muon_lr0.02", 1, "muon", "--set muon.lr=0.02", [2.0, 1.2, 0.9], end=("ok", 0, 10.0))
        write_log(self.dir, "muon_lr0.02", 2, "muon", "--set muon.lr=0.02", [2.1, 1.0, 1.1], end=("ok", 0, 14.0))
        write_log(self.dir, "adamw_lr1e-3", 1, "adamw", "-l 1e-3", [2.0, 1.5, 1.3], end=("ok", 0, 11.0))
        # The loss went non-finite: the program logged null, then stopped on it (exit 1).
        write_log(self.dir, "adamw_lr1e-3", 2, "adamw", "-l 1e-3", [2.0, 1.6, None], end=("diverged", 1, 3.0))

    def tearDown(self):
        self.tmp.cleanup()

    def test_aggregates(self):
        rows = pc.summarise(pc.read_runs(self.dir))
        self.assertEqual([r["label"] for r in rows], ["adamw_lr1e-3", "muon_lr0.02"])  # by optimizer, then lr
        adamw, muon = rows
        self.assertEqual(muon["final"], [0.9, 1.1])
        self.assertEqual(muon["best"], [0.9, 1.0])
        self.assertEqual(muon["diverged"], 0)
        self.assertEqual(muon["status"], "ok")
        self.assertEqual(muon["lr"], "0.02 (muon.lr)")
        self.assertAlmostEqual(muon["final_top1"][0], 70.0)
        self.assertEqual(muon["wall"], [10.0, 14.0])
        # Only the finished seed counts; the diverged one is counted in the status.
        self.assertEqual(adamw["final"], [1.3])
        self.assertEqual(adamw["best"], [1.3])
        self.assertEqual(adamw["diverged"], 1)
        self.assertEqual(adamw["status"], "diverged 1/2")
        self.assertEqual(adamw["lr"], "1e-3")
        self.assertEqual(adamw["seeds"], [1, 2])

    def test_table_text(self):
        text = pc.table(pc.summarise(pc.read_runs(self.dir)), top1=True)
        rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
        mean, std = statistics.mean([0.9, 1.1]), statistics.stdev([0.9, 1.1])
        self.assertEqual(rows["muon_lr0.02"][4], f"{mean:.4f} ± {std:.4f}")
        self.assertEqual(rows["muon_lr0.02"][5], "0.9500 ± 0.0707")
        self.assertEqual(rows["muon_lr0.02"][6], "70.00 ± 0.00")
        self.assertEqual(rows["muon_lr0.02"][8], "12")
        self.assertEqual(rows["adamw_lr1e-3"][4], "1.3000")
        self.assertEqual(rows["adamw_lr1e-3"][-1], "diverged 1/2 |")

    def test_all_diverged_and_incomplete(self):
        # A null training loss without an end line (the program was killed as it diverged), and a
        # configuration still running: neither crashes the reader, neither counts as finished.
        write_log(self.dir, "celo2_lr3e-3", 1, "celo2", "-l 3e-3", [2.0, None, None], end=None)
        write_log(self.dir, "celo2_lr1e-3", 1, "celo2", "-l 1e-3", [2.0, 1.4], end=None)
        # What the programs do: stop on a non-finite training loss before logging it; the script's end
        # line alone says so.
        write_log(self.dir, "muon_lr0.1", 1, "muon", "--set muon.lr=0.1", [2.0, 1.9], end=("diverged", 1, 2.0))
        rows = {r["label"]: r for r in pc.summarise(pc.read_runs(self.dir))}
        self.assertEqual(rows["muon_lr0.1"]["status"], "diverged 1/1")
        self.assertEqual(rows["muon_lr0.1"]["final"], [])
        self.assertEqual(rows["celo2_lr3e-3"]["status"], "diverged 1/1")
        self.assertEqual(rows["celo2_lr1e-3"]["status"], "incomplete 1/1")
        text = pc.table(list(rows.values()), top1=False)
        line = next(x for x in text.splitlines() if x.startswith("| celo2_lr3e-3 "))
        self.assertIn("| diverged | diverged |", line)
        line = next(x for x in text.splitlines() if x.startswith("| celo2_lr1e-3 "))
        self.assertIn("| – | – |", line)

    def test_main_writes_table_without_matplotlib(self):
        out = os.path.join(self.dir, "out", "cmp")
        saved = sys.modules.get("matplotlib")
        sys.modules["matplotlib"] = None  # import matplotlib now raises ImportError
        try:
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                with self.assertRaises(SystemExit) as e:
                    pc.main([self.dir, out, "--title", "test"])
                self.assertIn("matplotlib", str(e.exception))
                self.assertEqual(pc.main([self.dir, out, "--no-plot"]), 0)
        finally:
            if saved is None:
                del sys.modules["matplotlib"]
            else:
                sys.modules["matplotlib"] = saved
        with open(out + ".md") as f:
            self.assertIn("| adamw_lr1e-3 | adamw | 1e-3 | 1 2 | 1.3000 |", f.read())
        self.assertIn("final top-1", printed.getvalue())  # found in the logs: vit's columns
        self.assertFalse(os.path.exists(out + ".png"))


if __name__ == "__main__":
    unittest.main()
