// The sections of `report pylo` (tools/report/pylo_report.h): what they share. Speed sections (Tables 2, 3, 9;
// Figures 1, 5, 6, 9) are in pylo_speed.cpp, the training and configuration sections in pylo_report.cpp.
#pragma once
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

void section_table2(PyloCtx& c);
void section_table9(PyloCtx& c);
void section_fig1(PyloCtx& c);
void section_fig5(PyloCtx& c);
void section_fig6(PyloCtx& c);
void section_fig9(PyloCtx& c);
void section_table3(PyloCtx& c);

}  // namespace report
