// `report compare`: an optimizer comparison (scripts/compare_optimizers.sh) as a markdown table and a figure
// of validation loss (train_vit: and top-1) by step, one line per configuration, over its seeds.
//
// A folder holds LABEL_sSEED.jsonl logs: the programs' steps ("loss") and validations ("val_loss",
// train_vit's "val_top1"; null where a value was not finite) between the script's "compare_run" and
// "compare_end" lines (optimizer, seed, flags; status and wall seconds). A run whose loss went null, or whose
// status is "diverged", counts as diverged; one without "compare_end" as incomplete. Means and spreads are
// over the runs that finished ("ok"); the status column counts the others.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "common/json.h"
#include "tools/report/svg.h"

namespace report {

struct ValPoint {
  double step, loss, top1;  // loss, top1 (%) NaN where not finite
};

struct CompareRun {
  std::string label, optimizer, flags, status = "incomplete", unit;
  int seed = 0;
  double wall_s = NAN;
  bool nonfinite = false;
  std::vector<ValPoint> val;
  std::vector<double> per_step;  // tokens or images per step (rate x step time), where the log has both
};

struct CompareRow {
  std::string label, optimizer, lr_text, status;
  double lr = NAN;
  std::vector<int> seeds;
  std::vector<CompareRun> runs;  // by seed
  std::vector<double> final_loss, best_loss, final_top1, best_top1, wall;
  int diverged = 0;
};

// One run's lines (the file's name gives label and seed). `path` names it in messages.
CompareRun compare_run_of(const std::vector<Json>& lines, const std::string& label, int seed);
// Every LABEL_sSEED.jsonl of `dir`, by file name.
std::vector<CompareRun> read_compare_runs(const std::string& dir);
// The swept learning rate: --set X.lr=V ("V (X.lr)"), else -l V / --lr V, else the label's _lr<V> suffix.
void lr_of(const std::string& label, const std::string& flags, std::string* text, double* value);
// One row per label, sorted by optimizer (adamw, adafactor, muon, velo, small_fc_lopt, celo2, elo_celo2,
// then others by name), then learning rate.
std::vector<CompareRow> summarise_runs(const std::vector<CompareRun>& runs);
std::string compare_table(const std::vector<CompareRow>& rows, bool top1, const std::string& title);
// Validation loss by step (and top-1): each configuration's mean over seeds with its min-max band, the best
// configuration of each optimizer thicker, x where a run diverged.
svg::Figure compare_figure(const std::vector<CompareRow>& rows, bool top1, const std::string& title);
// The colour of an optimizer's family at shade k of n (light to dark).
std::string optimizer_color(const std::string& optimizer, size_t k, size_t n);

}  // namespace report
