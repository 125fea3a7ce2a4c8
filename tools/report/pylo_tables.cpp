// The table sections of `report pylo`: Tables 2 (step breakdown), 9 (step and throughput) and 3 (data parallel),
// each with its figure.
#include <algorithm>
#include <cmath>

#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"
#include "tools/report/pylo_sections.h"

namespace report {
namespace {

svg::BarSeries bar_series(const std::string& name, const std::string& color) {
  svg::BarSeries s;
  s.name = name;
  s.color = color;
  return s;
}

// "32" for a ViT, "4 x 1024" (sequences x tokens) for GPT-2.
std::string batch_cell(const BenchRow& r) { return r.images ? std::to_string(r.B) : std::to_string(r.B) + " x 1024"; }

// Model m's rows in the paper's order of optimizers (of `opts`): each one measured goes to `row`, each that
// failed to `errors` ("ViT-B/16 VeLO: out of GPU memory").
template <class F>
void each_row(const std::vector<BenchRow>& rows, const std::string& m, const std::vector<std::string>& opts,
              std::vector<NoNumber>& errors, F&& row) {
  for (const auto& o : optimizers_in(opts))
    for (const auto& r : rows) {
      if (r.model != m || r.optimizer != o) continue;
      if (r.error.empty())
        row(r);
      else
        errors.push_back({model_title(m) + " " + optimizer_title(o), "", r.error});
    }
}

// ------------------------------------------------------------------------------------------ Table 2
// One row: our times, the paper's (fwd / bwd / opt), PyLO's optimizer step measured here.
std::vector<std::string> table2_row(const PyloCtx& c, const BenchRow& r, const std::vector<StepRow>& peers) {
  const std::string& m = r.model;
  const std::string& o = r.optimizer;
  const std::string b = base_optimizer(o);
  const double p_opt = c.paper.value({{"item", "table2"}, {"model", m}, {"optimizer", b}, {"impl", paper_impl(o)}});
  const double p_fwd = c.paper.value({{"item", "table2"}, {"model", m}, {"quantity", "fwd_ms"}});
  const double p_bwd = c.paper.value({{"item", "table2"}, {"model", m}, {"quantity", "bwd_ms"}});
  const double cuda = peer_ms(peers, m, b, "pylo_cuda"), naive = peer_ms(peers, m, b, "pylo_naive");
  return {model_title(m),
          batch_cell(r),
          optimizer_title(o),
          ms(r.fwd_ms),
          ms(r.bwd_ms),
          ms(r.opt_ms),
          ms(r.step_ms),
          std::isfinite(p_fwd) ? ms(p_fwd) + " / " + ms(p_bwd) + " / " + ms(p_opt) : kNone,
          ratio(p_opt, r.opt_ms, 1),
          learned(o) ? ms(cuda) + " / " + ms(naive) : kNone,
          ratio(cuda, r.opt_ms, 1)};
}

// The figure: ViT-B/16, ours beside the paper's, stacked forward / backward / optimizer.
void table2_figure(PyloCtx& c, const Experiment& e, const std::vector<BenchRow>& rows,
                   const std::vector<std::string>& opts) {
  svg::BarChart ch;
  ch.title = "ViT-B/16, batch 32: where a step goes";
  ch.y.label = "ms per step";
  ch.segments = {"forward", "backward", "optimizer"};
  svg::BarSeries ours = bar_series("ours (" + e.gpu + ")", "#1f77b4");
  svg::BarSeries paper = bar_series("PyLO paper (" + c.paper.gpu("table2") + ")", "#d62728");
  for (const auto& o : opts) {
    const BenchRow* r = nullptr;
    for (const auto& x : rows)
      if (x.model == "vit-b16" && x.optimizer == o && x.error.empty()) r = &x;
    if (!r) continue;
    ch.groups.push_back(optimizer_title(o));
    ours.values.push_back({r->fwd_ms, r->bwd_ms, r->opt_ms});
    const std::string b = base_optimizer(o);
    paper.values.push_back(
        {c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"quantity", "fwd_ms"}}),
         c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"quantity", "bwd_ms"}}),
         c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"optimizer", b}, {"impl", paper_impl(o)}})});
    if (!std::isfinite(paper.values.back()[2])) paper.values.back() = {};
  }
  if (ch.groups.empty()) return;
  ch.series = {ours, paper};
  svg::Figure f;
  f.panel_width = std::max(640.0, 120.0 * double(ch.groups.size()) + 300);
  f.panels.push_back(svg::Panel{true, {}, ch});
  f.caption =
      "Stacked: forward, backward, optimizer (lighter shades upward). The paper's bars only where it gives "
      "the optimizer's time.";
  c.figure(f, "table2", "Table 2: ViT-B/16 step breakdown, ours and the paper's");
}

// ------------------------------------------------------------------------------------------ Table 9
// The paper's step (ms) and throughput for `o` on `m`; its ViT step times derived from its images per second
// where it gives only those.
std::pair<double, double> table9_paper_step(const PyloCtx& c, const std::string& m, const std::string& o, long long B) {
  const std::map<std::string, std::string> k = {
      {"item", "table9"}, {"model", m}, {"optimizer", base_optimizer(o)}, {"impl", paper_impl(o)}};
  auto q = k;
  q["quantity"] = "step_ms";
  double v = c.paper.value(q);
  q["quantity"] = "img_per_s";
  const double rate = c.paper.value(q);
  if (!std::isfinite(v) && std::isfinite(rate)) v = 1000.0 * double(B) / rate;  // images per second -> ms
  return std::make_pair(v, rate);
}

// One row: ours, its extra time over AdamW's, the paper's, PyLO's optimizer step measured here.
std::vector<std::string> table9_row(const BenchRow& r, double p_step, double p_rate, double over, double p_over,
                                    const std::vector<StepRow>& peers) {
  const std::string& m = r.model;
  const std::string& o = r.optimizer;
  const std::string unit = r.images ? " img/s" : " tok/s";
  return {model_title(m),
          batch_cell(r),
          optimizer_title(o),
          ms(r.step_ms),
          thousands(r.rate) + unit,
          o == "adamw" ? kNone : fixed(over, 1) + "%",
          ms(p_step),
          std::isfinite(p_rate)                ? thousands(p_rate) + unit
          : std::isfinite(p_step) && !r.images ? thousands(1000.0 * double(r.B) * 1024 / p_step) + unit
                                               : kNone,
          o == "adamw" || !std::isfinite(p_over) ? kNone : fixed(p_over, 1) + "%",
          ratio(p_step, r.step_ms, 1),
          learned(o) ? ms(peer_ms(peers, m, base_optimizer(o), "pylo_cuda")) + " / " +
                           ms(peer_ms(peers, m, base_optimizer(o), "pylo_naive"))
                     : kNone};
}

std::string table9_note(const PyloCtx& c) {
  return "\nMedians of the logged steps after the warm-up (`scripts/bench_vit.sh`: synthetic batches held in memory; "
         "`scripts/bench_gpt2.sh`: the KJV shards). \"Over AdamW\": the step's extra time against AdamW's on the same "
         "model and batch, the measure that carries across GPUs; the paper's is its CUDA learned optimizers' against "
         "Adam (" +
         with_paper(c, "table9") +
         "; its ViT step times are derived from its images per second where it "
         "gives only those). The paper's naive PyLO on ViT-B/16: small_fc_lopt " +
         fixed(c.paper.value(
                   {{"item", "table9"}, {"model", "vit-b16"}, {"optimizer", "small_fc_lopt"}, {"impl", "naive"}}),
               2) +
         ", VeLO " +
         fixed(c.paper.value({{"item", "table9"}, {"model", "vit-b16"}, {"optimizer", "velo"}, {"impl", "naive"}}), 2) +
         " images/s. The last column is PyLO's optimizer step alone, measured here on the same tensor shapes (Figure "
         "5's peers), to set beside our whole training step.\n";
}

// ------------------------------------------------------------------------------------------ Table 3
// The step of `o` on one GPU (mode 0), all-reduce (1) or sharded (2); NaN when it did not run.
double table3_step(const std::vector<BenchRow>& rows, const std::string& o, int mode) {
  for (const auto& r : rows)
    if (r.optimizer == o && r.error.empty() && (mode == 0 ? r.launch.empty() : mode == 1 ? r.allreduce : r.sharded))
      return r.step_ms;
  return double(NAN);
}

MdTable table3_table(const PyloCtx& c, const std::vector<BenchRow>& rows) {
  long long world = 0;
  for (const auto& r : rows) world = std::max(world, r.world);
  MdTable t;
  t.head = {"optimizer",
            "1 GPU ms",
            std::to_string(world) + " GPUs all-reduce ms",
            "sharded ms",
            "sharded over AdamW's",
            "paper all-reduce / sharded ms (" + c.paper.gpu("table3") + ")",
            "paper sharded over Adam's",
            "sharded: paper ÷ ours"};
  t.align = {'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  return t;
}

}  // namespace

// ------------------------------------------------------------------------------------------ Table 2
void section_table2(PyloCtx& c) {
  const Experiment& e = c.exp("table2_step_breakdown");
  c.open_section("Table 2: forward, backward and optimizer time per step (ViT at batch 32, GPT-2 at 4 x 1024 tokens)",
                 e);
  const std::vector<BenchRow> rows = bench_rows(e);
  const std::vector<StepRow> peers = step_rows(c.on_same_gpu(e, "fig5_peers"));
  if (rows.empty()) return c.no_data();
  MdTable t;
  t.head = {"model",
            "batch",
            "optimizer",
            "forward ms",
            "backward ms",
            "optimizer ms",
            "step ms",
            "paper: fwd / bwd / opt ms (" + c.paper.gpu("table2") + ")",
            "opt: paper ÷ ours",
            "PyLO's step here: CUDA / naive ms",
            "opt: PyLO CUDA ÷ ours"};
  t.align = {'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  std::vector<std::string> models, opts;
  std::vector<NoNumber> errors;
  for (const auto& r : rows) models.push_back(r.model), opts.push_back(r.optimizer);
  for (const auto& m : models_in(models))
    each_row(rows, m, opts, errors, [&](const BenchRow& r) { t.rows.push_back(table2_row(c, r, peers)); });
  c.md += t.render();
  c.md +=
      "\nForward and backward from `GPT2_PROFILE=1` (the kernels' own events; the loss counts as forward), the "
      "optimizer and the whole step from the run's log (medians). Learned optimizers on random meta-weights of "
      "the published shapes (the step costs the same). The paper's column is " +
      with_paper(c, "table2") +
      "; PyLO's step here is the same-run peer of Figure 5 on the same tensor shapes, where it ran.\n";
  c.md += errors_note(errors);
  table2_figure(c, e, rows, optimizers_in(opts));
}

// ------------------------------------------------------------------------------------------ Table 9
void section_table9(PyloCtx& c) {
  const Experiment& e = c.exp("table9_step_throughput");
  c.open_section("Table 9: training step and throughput (ViT at batch 32, GPT-2 at 4 x 1024 tokens)", e);
  const std::vector<BenchRow> rows = bench_rows(e);
  if (rows.empty()) return c.no_data();
  MdTable t;
  t.head = {"model",
            "batch",
            "optimizer",
            "step ms",
            "throughput",
            "over AdamW",
            "paper step ms (" + c.paper.gpu("table9") + ")",
            "paper throughput",
            "paper over Adam",
            "step: paper ÷ ours",
            "PyLO's optimizer step here: CUDA / naive ms"};
  t.align = {'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  const std::vector<StepRow> peers = step_rows(c.on_same_gpu(e, "fig5_peers"));
  std::vector<std::string> models, opts;
  std::vector<NoNumber> errors;
  for (const auto& r : rows) models.push_back(r.model), opts.push_back(r.optimizer);
  svg::BarChart ch;
  ch.title = "Learned optimizers: training step over AdamW's";
  ch.y.label = "extra step time over AdamW (%)";
  svg::BarSeries ours_s = bar_series("ours (" + e.gpu + ")", "#1f77b4");
  svg::BarSeries paper_s = bar_series("PyLO paper, CUDA (" + c.paper.gpu("table9") + ")", "#d62728");
  for (const auto& m : models_in(models)) {
    double adamw = NAN, p_adamw = NAN;
    for (const auto& r : rows)
      if (r.model == m && r.optimizer == "adamw" && r.error.empty())
        adamw = r.step_ms, p_adamw = table9_paper_step(c, m, "adamw", r.B).first;
    each_row(rows, m, opts, errors, [&](const BenchRow& r) {
      const auto [p_step, p_rate] = table9_paper_step(c, m, r.optimizer, r.B);
      const double over = 100 * (r.step_ms / adamw - 1), p_over = 100 * (p_step / p_adamw - 1);
      t.rows.push_back(table9_row(r, p_step, p_rate, over, p_over, peers));
      if (learned(r.optimizer) && std::isfinite(over)) {
        ch.groups.push_back(model_title(m) + " " + optimizer_title(r.optimizer));
        ours_s.values.push_back({over});
        paper_s.values.push_back({p_over});
      }
    });
  }
  c.md += t.render() + table9_note(c) + errors_note(errors);
  if (!ch.groups.empty()) {
    ch.series = {ours_s, paper_s};
    svg::Figure f;
    f.panel_width = std::max(700.0, 110.0 * double(ch.groups.size()) + 300);
    f.panels.push_back(svg::Panel{true, {}, ch});
    c.figure(f, "table9", "Table 9: learned optimizers' extra step time over AdamW, ours and the paper's");
  }
}

// ------------------------------------------------------------------------------------------ Table 3
void section_table3(PyloCtx& c) {
  const Experiment& e = c.exp("table3_data_parallel");
  c.open_section("Table 3: data parallel on 4 GPUs, all-reduce and sharded (GPT-2 124M, 4 x 1024 tokens per GPU)", e);
  const std::vector<BenchRow> rows = bench_rows(e);
  if (rows.empty()) return c.no_data();
  std::vector<std::string> opts;
  std::vector<NoNumber> errors;
  for (const auto& r : rows) {
    opts.push_back(r.optimizer);
    if (!r.error.empty())
      errors.push_back({optimizer_title(r.optimizer) + (r.sharded     ? " sharded"
                                                        : r.allreduce ? " all-reduce"
                                                                      : " 1 GPU"),
                        "", r.error});
  }
  MdTable t = table3_table(c, rows);
  svg::BarChart ch;
  ch.title = "GPT-2 124M, 4 x 1024 tokens per GPU";
  ch.y = svg::Axis{"training step (ms)", true};
  svg::BarSeries s_ar = bar_series("ours, all-reduce (" + e.gpu + ")", "#1f77b4");
  svg::BarSeries s_sh = bar_series("ours, sharded", "#6baed6");
  svg::BarSeries p_ar = bar_series("paper, all-reduce (" + c.paper.gpu("table3") + ")", "#d62728");
  svg::BarSeries p_sh = bar_series("paper, reduce-scatter + sharded", "#ff9896");
  const double adamw_sh = table3_step(rows, "adamw", 2);
  const double p_adamw_sh = c.paper.value({{"item", "table3"}, {"optimizer", "adamw"}, {"mode", "sharded"}});
  for (const auto& o : optimizers_in(opts)) {
    const std::string b = base_optimizer(o);
    const double one = table3_step(rows, o, 0), ar = table3_step(rows, o, 1), sh = table3_step(rows, o, 2);
    const double par =
        c.paper.value({{"item", "table3"}, {"optimizer", b}, {"mode", "allreduce"}, {"impl", paper_impl(o)}});
    const double psh =
        c.paper.value({{"item", "table3"}, {"optimizer", b}, {"mode", "sharded"}, {"impl", paper_impl(o)}});
    t.rows.push_back({optimizer_title(o), ms(one), ms(ar), ms(sh),
                      o == "adamw" ? kNone : fixed(100 * (sh / adamw_sh - 1), 1) + "%", ms(par) + " / " + ms(psh),
                      o == "adamw" || !std::isfinite(psh) ? kNone : fixed(100 * (psh / p_adamw_sh - 1), 1) + "%",
                      ratio(psh, sh, 1)});
    ch.groups.push_back(optimizer_title(o));
    s_ar.values.push_back({ar});
    s_sh.values.push_back({sh});
    p_ar.values.push_back({par});
    p_sh.values.push_back({psh});
  }
  c.md += t.render();
  c.md +=
      "\n`scripts/bench_data_parallel.sh` (PARTS=table3, separate q/k/v as in the paper): one process per GPU, "
      "per-GPU batch 4 x 1024; all-reduce (`--nccl 1`) and sharded (`--shard 1`: each GPU steps and keeps the "
      "state of whole tensors). The paper's: " +
      with_paper(c, "table3") +
      ", its all-reduce and its "
      "reduce-scatter + sharded step.\n";
  c.md += errors_note(errors);
  ch.series = {s_ar, s_sh, p_ar, p_sh};
  svg::Figure f;
  f.panel_width = std::max(700.0, 120.0 * double(ch.groups.size()) + 320);
  f.panels.push_back(svg::Panel{true, {}, ch});
  c.figure(f, "table3", "Table 3: data-parallel step on 4 GPUs, ours and the paper's");
}

}  // namespace report
