// The sections of `report pylo` (tools/report/pylo_report.h): what they share. Speed sections: Tables 2, 3 and 9
// in pylo_tables.cpp, Figures 1, 5, 6 and 9 in pylo_figures.cpp, their shared rows and helpers in pylo_rows.cpp;
// the training and configuration sections in pylo_report.cpp.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tools/report/experiments.h"
#include "tools/report/svg.h"

namespace report {

struct PyloCtx {
  std::string dir, out;
  Paper paper{{}};
  std::string md;  // the page so far
  std::map<std::string, Experiment> cache;
  const Experiment& exp(const std::string& name);
  // A figure written as OUT/NAME.svg and linked from the page.
  void figure(const svg::Figure& f, const std::string& name, const std::string& alt);
  // "Produced by `...`: experiment NAME, 12 runs (1 failed), 85 s on NVIDIA H100 80GB HBM3, 2026-...; status."
  // or why it has no data.
  std::string produced_by(const Experiment& e) const;
  // A section's start: "## title" and what produced it; with `peers`, ours and the peers' experiment each.
  void open_section(const std::string& title, const Experiment& e, const Experiment* peers = nullptr);
  // Experiment `name` where it ran on the GPU that `ours` ran on (or one of them names none); otherwise an
  // absent experiment, and the page says why: a ratio between two kinds of GPU compares the GPUs, not the code.
  const Experiment& on_same_gpu(const Experiment& ours, const std::string& name);
  void no_data() { md += "No data yet.\n\n"; }
};

// One line of bench_gpt2.sh / bench_vit.sh (a training run's medians).
struct BenchRow {
  std::string model, optimizer, extra, error, launch;
  long long B = 0, world = 1;
  double step_ms = NAN, opt_ms = NAN, fwd_ms = NAN, bwd_ms = NAN, rate = NAN;
  bool images = false, sharded = false, allreduce = false;
};
std::vector<BenchRow> bench_rows(const Experiment& e);

// One optimizer step measured by bench_optim ("optim_step") or a peer ("peer_optim_step").
struct StepRow {
  std::string model, optimizer, impl, error;  // impl: "ours", "pylo_cuda", "pylo_naive", "torch", "jax_lopt"
  double params = NAN, ms = NAN, pct_of_floor = NAN;
};
std::vector<StepRow> step_rows(const Experiment& e);

// A step time as the tables write it: 3 significant digits, thousands separated (0.861, 16.3, 446, 2,872).
std::string ms(double v);
std::string impl_title(const std::string& impl);

// Shared by the speed sections (pylo_rows.cpp).
template <class T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}
// The distinct optimizers of v in the paper's order (AdamW first, then the learned ones); the distinct models,
// ViTs then GPT-2s by size, then the rest.
std::vector<std::string> optimizers_in(std::vector<std::string> v);
std::vector<std::string> models_in(std::vector<std::string> v);
bool learned(const std::string& opt);  // a learned optimizer (not AdamW, Adafactor or Muon)
// The paper's impl for one of our optimizers: its CUDA version for a learned optimizer, none otherwise.
std::string paper_impl(const std::string& opt);
// The same-run peer (experiment `peers`) of `opt` on `model`, for impl; NaN when none.
double peer_ms(const std::vector<StepRow>& peers, const std::string& model, const std::string& opt,
               const std::string& impl);
// A run that gave no number: who ran it ("PyLO CUDA VeLO"), on what (a model's title; may be empty) and why.
struct NoNumber {
  std::string who, where, why;
};
// "Runs that gave no number:" and a list, "WHO on WHERE: WHY"; those of one WHO and WHY (a peer missing on
// every size) share a line that lists their WHEREs.
std::string errors_note(const std::vector<NoNumber>& errors);
std::string with_paper(const PyloCtx& c, const std::string& item);  // "its own run on GPU"
svg::Series line_series(const std::string& name, const std::string& color, bool dashed, svg::Marker m);
std::string opt_color(const std::string& opt);

void section_table2(PyloCtx& c);
void section_table9(PyloCtx& c);
void section_fig1(PyloCtx& c);
void section_fig5(PyloCtx& c);
void section_fig6(PyloCtx& c);
void section_fig9(PyloCtx& c);
void section_table3(PyloCtx& c);

}  // namespace report
