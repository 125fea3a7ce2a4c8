// The speed sections of `report pylo`: Tables 2, 3 and 9, Figures 1, 5, 6 and 9.
#include <algorithm>
#include <cmath>
#include <regex>
#include <functional>
#include <set>

#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"
#include "tools/report/pylo_sections.h"

namespace report {
namespace {

const std::vector<std::string> kOptOrder = {"adamw",  "adamw_foreach", "adafactor",          "muon", "small_fc_lopt",
                                            "small_fc_lopt:fast", "velo", "celo2", "elo", "elo:fast", "elo_celo2"};
size_t opt_rank(const std::string& o) {
  const auto it = std::find(kOptOrder.begin(), kOptOrder.end(), o);
  return size_t(it - kOptOrder.begin());
}
template <class T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}
std::vector<std::string> optimizers_in(std::vector<std::string> v) {
  sort_unique(v);
  std::stable_sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return opt_rank(a) < opt_rank(b); });
  return v;
}
bool learned(const std::string& opt) {
  const std::string b = base_optimizer(opt);
  return b != "adamw" && b != "adamw_foreach" && b != "adafactor" && b != "muon";
}
// The paper's impl for one of our optimizers: its CUDA version for a learned optimizer, none otherwise.
std::string paper_impl(const std::string& opt) { return learned(opt) ? "cuda" : ""; }

// Model order: ViTs by size, GPT-2 by size, then the rest by name.
double model_key(const std::string& m) {
  static const std::map<std::string, double> order = {
      {"vit-ti16", 1}, {"vit-s16", 2}, {"vit-b16", 3}, {"vit-l16", 4}, {"gpt2-124m", 11},
      {"gpt2-355m", 12}, {"gpt2-774m", 13}, {"gpt2-1558m", 14}};
  const auto it = order.find(m);
  return it == order.end() ? 100 : it->second;
}
std::vector<std::string> models_in(std::vector<std::string> v) {
  sort_unique(v);
  std::stable_sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return model_key(a) < model_key(b); });
  return v;
}

// The same-run peer (experiment `peers`) of `opt` on `model`, for impl; NaN when none.
double peer_ms(const std::vector<StepRow>& peers, const std::string& model, const std::string& opt, const std::string& impl) {
  for (const auto& p : peers)
    if (p.model == model && p.optimizer == opt && p.impl == impl && p.error.empty()) return p.ms;
  return NAN;
}
std::string errors_note(const std::vector<std::string>& errors) {
  if (errors.empty()) return "";
  std::string o = "\nRuns that gave no number:\n\n";
  for (const auto& e : errors) o += "- " + e + "\n";
  return o;
}
std::string with_paper(const PyloCtx& c, const std::string& item) {
  const std::string g = c.paper.gpu(item);
  return g.empty() ? "its own run" : "its own run on " + g;
}

svg::Series line_series(const std::string& name, const std::string& color, bool dashed, svg::Marker m) {
  svg::Series s;
  s.name = name;
  s.color = color;
  s.dashed = dashed;
  s.marker = m;
  return s;
}
std::string opt_color(const std::string& opt) {
  static const std::map<std::string, std::string> colors = {
      {"adamw", "#1f77b4"}, {"adafactor", "#9467bd"}, {"muon", "#2ca02c"}, {"small_fc_lopt", "#bcbd22"},
      {"small_fc_lopt:fast", "#8c6d00"}, {"velo", "#ff7f0e"}, {"celo2", "#d62728"}, {"elo", "#8c564b"},
      {"elo:fast", "#5a3a2e"}, {"elo_celo2", "#e377c2"}, {"adamw_foreach", "#17becf"}};
  const auto it = colors.find(opt);
  return it == colors.end() ? "#7f7f7f" : it->second;
}

}  // namespace

std::vector<BenchRow> bench_rows(const Experiment& e) {
  std::vector<BenchRow> out;
  for (const Json& j : e.lines) {
    if (!j.has("model") || j.has("bench") || !(j.has("step_ms") || j.has("error"))) continue;
    BenchRow r;
    r.model = canonical_model(str(j, "model"));
    r.extra = str(j, "extra");
    r.optimizer = optimizer_of_extra(r.extra);
    r.error = str(j, "error");
    r.launch = str(j, "launch");
    r.B = (long long)num(j, "B", 0);
    r.world = (long long)num(j, "world", 1);
    r.step_ms = num(j, "step_ms", NAN);
    r.opt_ms = num(j, "opt_ms", NAN);
    r.fwd_ms = num(j, "fwd_ms", NAN);
    if (is_num(j, "loss_ms") && std::isfinite(r.fwd_ms)) r.fwd_ms += num(j, "loss_ms", 0);  // the loss: forward
    r.bwd_ms = num(j, "bwd_ms", NAN);
    r.images = j.has("img_per_s");
    r.rate = num(j, r.images ? "img_per_s" : "tok_per_s", NAN);
    r.sharded = r.extra.find("--shard 1") != std::string::npos;
    r.allreduce = !r.launch.empty() && !r.sharded;
    out.push_back(r);
  }
  return out;
}

std::vector<StepRow> step_rows(const Experiment& e) {
  std::vector<StepRow> out;
  for (const Json& j : e.lines) {
    const std::string bench = str(j, "bench");
    if (bench != "optim_step" && bench != "peer_optim_step") continue;
    if (is_num(j, "rank") && num(j, "rank", 0) != 0) continue;  // a sharded share: rank 0 stands for it
    StepRow r;
    r.model = canonical_model(str(j, "model"));
    r.optimizer = str(j, "optimizer");
    const std::string mode = str(j, "mode");
    if (mode == "fast") r.optimizer += ":fast";
    r.impl = bench == "optim_step" ? "ours" : str(j, "impl");
    r.error = str(j, "error");
    r.params = num(j, "params", NAN);
    r.ms = num(j, "median_ms", NAN);
    r.pct_of_floor = num(j, "pct_of_floor", NAN);
    out.push_back(r);
  }
  return out;
}

std::string ms(double v) { return significant(v, 3); }

std::string impl_title(const std::string& impl) {
  if (impl == "ours") return "ours";
  if (impl == "pylo_cuda") return "PyLO CUDA";
  if (impl == "pylo_naive") return "PyLO naive";
  if (impl == "torch") return "torch";
  if (impl == "jax_lopt") return "JAX learned_optimization";
  return impl;
}

// --------------------------------------------------------------------------------------------- Table 2
void section_table2(PyloCtx& c) {
  const Experiment& e = c.exp("table2_step_breakdown");
  const Experiment& peers_e = c.exp("fig5_peers");
  c.md += "## Table 2: forward, backward and optimizer time per step (ViT at batch 32, GPT-2 at 4 x 1024 tokens)\n\n";
  c.md += c.produced_by(e) + "\n\n";
  const std::vector<BenchRow> rows = bench_rows(e);
  const std::vector<StepRow> peers = step_rows(peers_e);
  if (rows.empty()) {
    c.md += "No data yet.\n\n";
    return;
  }
  MdTable t;
  t.head = {"model", "batch", "optimizer", "forward ms", "backward ms", "optimizer ms", "step ms",
            "paper: fwd / bwd / opt ms (" + c.paper.gpu("table2") + ")", "opt: paper ÷ ours",
            "PyLO's step here: CUDA / naive ms", "opt: PyLO CUDA ÷ ours"};
  t.align = {'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  std::vector<std::string> errors, models, opts;
  for (const auto& r : rows) models.push_back(r.model), opts.push_back(r.optimizer);
  for (const auto& m : models_in(models))
    for (const auto& o : optimizers_in(opts))
      for (const auto& r : rows) {
        if (r.model != m || r.optimizer != o) continue;
        if (!r.error.empty()) {
          errors.push_back(model_title(m) + " " + optimizer_title(o) + ": " + r.error);
          continue;
        }
        const std::string b = base_optimizer(o);
        const double p_opt = c.paper.value({{"item", "table2"}, {"model", m}, {"optimizer", b}, {"impl", paper_impl(o)}});
        const double p_fwd = c.paper.value({{"item", "table2"}, {"model", m}, {"quantity", "fwd_ms"}});
        const double p_bwd = c.paper.value({{"item", "table2"}, {"model", m}, {"quantity", "bwd_ms"}});
        const double cuda = peer_ms(peers, m, b, "pylo_cuda"), naive = peer_ms(peers, m, b, "pylo_naive");
        t.rows.push_back({model_title(m), r.images ? std::to_string(r.B) : std::to_string(r.B) + " x 1024",
                          optimizer_title(o), ms(r.fwd_ms), ms(r.bwd_ms), ms(r.opt_ms), ms(r.step_ms),
                          std::isfinite(p_fwd) ? ms(p_fwd) + " / " + ms(p_bwd) + " / " + ms(p_opt) : kNone,
                          ratio(p_opt, r.opt_ms, 1), learned(o) ? ms(cuda) + " / " + ms(naive) : kNone,
                          ratio(cuda, r.opt_ms, 1)});
      }
  c.md += t.render();
  c.md += "\nForward and backward from `GPT2_PROFILE=1` (the kernels' own events; the loss counts as forward), the "
          "optimizer and the whole step from the run's log (medians). Learned optimizers on random meta-weights of "
          "the published shapes (the step costs the same). The paper's column is " + with_paper(c, "table2") +
          "; PyLO's step here is the same-run peer of Figure 5 on the same tensor shapes, where it ran.\n";
  c.md += errors_note(errors);
  // The figure: ViT-B/16, ours beside the paper's, stacked forward / backward / optimizer.
  svg::BarChart ch;
  ch.title = "ViT-B/16, batch 32: where a step goes";
  ch.y.label = "ms per step";
  ch.segments = {"forward", "backward", "optimizer"};
  svg::BarSeries ours, paper;
  ours.name = "ours (" + e.gpu + ")";
  ours.color = "#1f77b4";
  paper.name = "PyLO paper (" + c.paper.gpu("table2") + ")";
  paper.color = "#d62728";
  for (const auto& o : optimizers_in(opts)) {
    const BenchRow* r = nullptr;
    for (const auto& x : rows)
      if (x.model == "vit-b16" && x.optimizer == o && x.error.empty()) r = &x;
    if (!r) continue;
    ch.groups.push_back(optimizer_title(o));
    ours.values.push_back({r->fwd_ms, r->bwd_ms, r->opt_ms});
    const std::string b = base_optimizer(o);
    paper.values.push_back({c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"quantity", "fwd_ms"}}),
                            c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"quantity", "bwd_ms"}}),
                            c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"optimizer", b}, {"impl", paper_impl(o)}})});
    if (!std::isfinite(paper.values.back()[2])) paper.values.back() = {};
  }
  if (!ch.groups.empty()) {
    ch.series = {ours, paper};
    svg::Figure f;
    f.panel_width = std::max(640.0, 120.0 * double(ch.groups.size()) + 300);
    f.panels.push_back(svg::Panel{true, {}, ch});
    f.caption = "Stacked: forward, backward, optimizer (lighter shades upward). The paper's bars only where it gives "
                "the optimizer's time.";
    c.figure(f, "table2", "Table 2: ViT-B/16 step breakdown, ours and the paper's");
  }
}

// --------------------------------------------------------------------------------------------- Table 9
void section_table9(PyloCtx& c) {
  const Experiment& e = c.exp("table9_step_throughput");
  c.md += "## Table 9: training step and throughput (ViT at batch 32, GPT-2 at 4 x 1024 tokens)\n\n";
  c.md += c.produced_by(e) + "\n\n";
  const std::vector<BenchRow> rows = bench_rows(e);
  if (rows.empty()) {
    c.md += "No data yet.\n\n";
    return;
  }
  MdTable t;
  t.head = {"model", "batch", "optimizer", "step ms", "throughput", "over AdamW", "paper step ms (" + c.paper.gpu("table9") + ")",
            "paper throughput", "paper over Adam", "step: paper ÷ ours", "PyLO's optimizer step here: CUDA / naive ms"};
  t.align = {'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  const std::vector<StepRow> peers = step_rows(c.exp("fig5_peers"));
  std::vector<std::string> errors, models, opts;
  for (const auto& r : rows) models.push_back(r.model), opts.push_back(r.optimizer);
  svg::BarChart ch;
  ch.title = "Learned optimizers: training step over AdamW's";
  ch.y.label = "extra step time over AdamW (%)";
  svg::BarSeries ours_s, paper_s;
  ours_s.name = "ours (" + e.gpu + ")";
  ours_s.color = "#1f77b4";
  paper_s.name = "PyLO paper, CUDA (" + c.paper.gpu("table9") + ")";
  paper_s.color = "#d62728";
  for (const auto& m : models_in(models)) {
    double adamw = NAN, p_adamw = NAN;
    auto paper_step = [&](const std::string& o, long long B) {
      const std::map<std::string, std::string> k = {{"item", "table9"}, {"model", m}, {"optimizer", base_optimizer(o)},
                                                    {"impl", paper_impl(o)}};
      auto q = k;
      q["quantity"] = "step_ms";
      double v = c.paper.value(q);
      q["quantity"] = "img_per_s";
      const double rate = c.paper.value(q);
      if (!std::isfinite(v) && std::isfinite(rate)) v = 1000.0 * double(B) / rate;  // images per second -> ms
      return std::make_pair(v, rate);
    };
    for (const auto& r : rows)
      if (r.model == m && r.optimizer == "adamw" && r.error.empty()) adamw = r.step_ms, p_adamw = paper_step("adamw", r.B).first;
    for (const auto& o : optimizers_in(opts))
      for (const auto& r : rows) {
        if (r.model != m || r.optimizer != o) continue;
        if (!r.error.empty()) {
          errors.push_back(model_title(m) + " " + optimizer_title(o) + ": " + r.error);
          continue;
        }
        const auto [p_step, p_rate] = paper_step(o, r.B);
        const double over = 100 * (r.step_ms / adamw - 1), p_over = 100 * (p_step / p_adamw - 1);
        const std::string unit = r.images ? " img/s" : " tok/s";
        t.rows.push_back({model_title(m), r.images ? std::to_string(r.B) : std::to_string(r.B) + " x 1024",
                          optimizer_title(o), ms(r.step_ms), thousands(r.rate) + unit,
                          o == "adamw" ? kNone : fixed(over, 1) + "%", ms(p_step),
                          std::isfinite(p_rate) ? thousands(p_rate) + unit
                          : std::isfinite(p_step) && !r.images ? thousands(1000.0 * double(r.B) * 1024 / p_step) + unit
                                                               : kNone,
                          o == "adamw" || !std::isfinite(p_over) ? kNone : fixed(p_over, 1) + "%", ratio(p_step, r.step_ms, 1),
                          learned(o) ? ms(peer_ms(peers, m, base_optimizer(o), "pylo_cuda")) + " / " +
                                           ms(peer_ms(peers, m, base_optimizer(o), "pylo_naive"))
                                     : kNone});
        if (learned(o) && std::isfinite(over)) {
          ch.groups.push_back(model_title(m) + " " + optimizer_title(o));
          ours_s.values.push_back({over});
          paper_s.values.push_back({p_over});
        }
      }
  }
  c.md += t.render();
  c.md += "\nMedians of the logged steps after the warm-up (`scripts/bench_vit.sh`: synthetic batches held in memory; "
          "`scripts/bench_gpt2.sh`: the KJV shards). \"Over AdamW\": the step's extra time against AdamW's on the same "
          "model and batch, the measure that carries across GPUs; the paper's is its CUDA learned optimizers' against "
          "Adam (" + with_paper(c, "table9") + "; its ViT step times are derived from its images per second where it "
          "gives only those). The paper's naive PyLO on ViT-B/16: small_fc_lopt " +
          fixed(c.paper.value({{"item", "table9"}, {"model", "vit-b16"}, {"optimizer", "small_fc_lopt"}, {"impl", "naive"}}), 2) +
          ", VeLO " + fixed(c.paper.value({{"item", "table9"}, {"model", "vit-b16"}, {"optimizer", "velo"}, {"impl", "naive"}}), 2) +
          " images/s. The last column is PyLO's optimizer step alone, measured here on the same tensor shapes (Figure "
          "5's peers), to set beside our whole training step.\n";
  c.md += errors_note(errors);
  if (!ch.groups.empty()) {
    ch.series = {ours_s, paper_s};
    svg::Figure f;
    f.panel_width = std::max(700.0, 110.0 * double(ch.groups.size()) + 300);
    f.panels.push_back(svg::Panel{true, {}, ch});
    c.figure(f, "table9", "Table 9: learned optimizers' extra step time over AdamW, ours and the paper's");
  }
}

// --------------------------------------------------------------------------------------------- Figure 1
void section_fig1(PyloCtx& c) {
  const Experiment& e = c.exp("fig1_vit_batch_breakdown");
  c.md += "## Figure 1: ViT-B/16 step breakdown across batch sizes\n\n";
  c.md += c.produced_by(e) + "\n\n";
  std::vector<BenchRow> rows = bench_rows(e);
  for (const auto& r : bench_rows(c.exp("table2_step_breakdown")))  // batch 32 comes from Table 2's runs
    if (r.model == "vit-b16") rows.push_back(r);
  std::vector<long long> batches;
  std::vector<std::string> opts, errors;
  for (const auto& r : rows)
    if (r.model == "vit-b16") batches.push_back(r.B), opts.push_back(r.optimizer);
  sort_unique(batches);
  if (batches.empty()) {
    c.md += "No data yet.\n\n";
    return;
  }
  // Optimizers measured at more than one batch size (Table 2 adds others at batch 32 only).
  std::vector<std::string> shown;
  for (const auto& o : optimizers_in(opts)) {
    std::set<long long> at;
    for (const auto& r : rows)
      if (r.model == "vit-b16" && r.optimizer == o && r.error.empty()) at.insert(r.B);
    if (at.size() > 1 || batches.size() == 1) shown.push_back(o);
  }
  MdTable t;
  t.head = {"batch", "optimizer", "forward ms", "backward ms", "optimizer ms", "optimizer share", "images/s"};
  t.align = {'r', 'l', 'r', 'r', 'r', 'r', 'r'};
  svg::BarChart ch;
  ch.title = "ViT-B/16: forward, backward and optimizer per step";
  ch.y.label = "ms per step";
  ch.segments = {"forward", "backward", "optimizer"};
  for (const auto& o : shown) {
    svg::BarSeries s;
    s.name = optimizer_title(o);
    s.color = opt_color(o);
    ch.series.push_back(s);
  }
  for (long long B : batches) {
    ch.groups.push_back("batch " + std::to_string(B));
    for (size_t i = 0; i < shown.size(); i++) {
      const BenchRow* r = nullptr;
      for (const auto& x : rows)
        if (x.model == "vit-b16" && x.B == B && x.optimizer == shown[i]) r = &x;
      if (r && !r->error.empty()) errors.push_back("batch " + std::to_string(B) + " " + optimizer_title(shown[i]) + ": " + r->error);
      if (!r || !r->error.empty()) {
        ch.series[i].values.push_back({});
        continue;
      }
      ch.series[i].values.push_back({r->fwd_ms, r->bwd_ms, r->opt_ms});
      t.rows.push_back({std::to_string(B), optimizer_title(shown[i]), ms(r->fwd_ms), ms(r->bwd_ms), ms(r->opt_ms),
                        fixed(100 * r->opt_ms / r->step_ms, 1) + "%", thousands(r->rate)});
    }
  }
  c.md += t.render();
  const double p_fwd = c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"quantity", "fwd_ms"}});
  const double p_bwd = c.paper.value({{"item", "table2"}, {"model", "vit-b16"}, {"quantity", "bwd_ms"}});
  c.md += "\nThe paper's Figure 1 is a plot; the values it prints are Table 2's, at batch 32 (" +
          c.paper.gpu("table2") + "): forward " + ms(p_fwd) + " ms, backward " + ms(p_bwd) +
          " ms, optimizer: Adam " + ms(c.paper.value({{"item", "table2"}, {"optimizer", "adamw"}})) + ", small_fc_lopt " +
          ms(c.paper.value({{"item", "table2"}, {"optimizer", "small_fc_lopt"}})) + ", VeLO " +
          ms(c.paper.value({{"item", "table2"}, {"optimizer", "velo"}})) +
          " ms (see Table 2 above). Batch 32 here is Table 2's run.\n";
  c.md += errors_note(errors);
  if (!ch.series.empty()) {
    svg::Figure f;
    f.panel_width = std::max(700.0, 130.0 * double(batches.size()) + 320);
    f.panels.push_back(svg::Panel{true, {}, ch});
    f.caption = "Stacked: forward, backward, optimizer (lighter shades upward); one bar per optimizer.";
    c.figure(f, "fig1", "Figure 1: ViT-B/16 step breakdown by batch size");
  }
}

// --------------------------------------------------------------------------------------------- Figure 5
void section_fig5(PyloCtx& c) {
  const Experiment& e = c.exp("fig5_optimizer_step_vs_size");
  const Experiment& pe = c.exp("fig5_peers");
  c.md += "## Figure 5: optimizer step time against model size\n\n";
  c.md += "Ours: " + c.produced_by(e) + "\n\nPeers: " + c.produced_by(pe) + "\n\n";
  const std::vector<StepRow> ours = step_rows(e), peers = step_rows(pe);
  if (ours.empty() && peers.empty()) {
    c.md += "No data yet.\n\n";
    return;
  }
  std::vector<std::string> models, opts, errors;
  std::map<std::string, double> params;
  for (const auto& r : ours) {
    models.push_back(r.model), opts.push_back(r.optimizer);
    if (std::isfinite(r.params)) params[r.model] = r.params;
  }
  for (const auto& r : peers) {
    models.push_back(r.model);
    if (std::isfinite(r.params)) params.emplace(r.model, r.params);
    if (!r.error.empty()) errors.push_back(impl_title(r.impl) + " " + optimizer_title(r.optimizer) + " on " + model_title(r.model) + ": " + r.error);
  }
  MdTable t;
  t.head = {"model", "params", "optimizer", "ours ms", "% of HBM floor", "PyLO CUDA ms", "PyLO naive ms", "torch ms",
            "JAX ms", "PyLO CUDA ÷ ours", "paper ms (" + c.paper.gpu("fig5") + ")"};
  t.align = {'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  for (const auto& m : models_in(models))
    for (const auto& o : optimizers_in(opts)) {
      const StepRow* r = nullptr;
      for (const auto& x : ours)
        if (x.model == m && x.optimizer == o) r = &x;
      if (!r) continue;
      if (!r->error.empty()) errors.push_back("ours " + optimizer_title(o) + " on " + model_title(m) + ": " + r->error);
      const std::string b = base_optimizer(o);
      const double cuda = learned(o) ? peer_ms(peers, m, b, "pylo_cuda") : NAN;
      const double paper = c.paper.value({{"item", "fig5"}, {"model", m}, {"optimizer", b}, {"impl", paper_impl(o)}});
      t.rows.push_back({model_title(m), std::isfinite(params[m]) ? fixed(params[m] / 1e6, 1) + "M" : kNone,
                        optimizer_title(o), ms(r->ms), fixed(r->pct_of_floor, 0) + "%", ms(cuda),
                        learned(o) ? ms(peer_ms(peers, m, b, "pylo_naive")) : kNone, ms(peer_ms(peers, m, o, "torch")),
                        b == "velo" ? ms(peer_ms(peers, m, "velo", "jax_lopt")) : kNone, ratio(cuda, r->ms, 1), ms(paper)});
    }
  c.md += t.render();
  c.md += "\nOurs: `bench_optim` (CUDA events, median of 20 steps; the floor is the bytes the step must move over the "
          "measured copy bandwidth). Peers on the same tensor shapes (`bench_optim --shapes 1`), same machine, same "
          "session: PyLO's CUDA and naive optimizers, torch's AdamW (fused) / Adafactor (foreach) / Muon (+ AdamW), "
          "learned_optimization's VeLO in JAX (`bench/pylo_step_bench.py`, `bench/jax_velo_bench.py`). The paper's "
          "column: " + with_paper(c, "fig5") + ", the GPT-2 355M points it prints; the rest of its Figure 5 is a plot "
          "not transcribed here.\n";
  // The earlier same-GPU peer run (docs/specs/targets.md), where this run has no peer.
  bool any_peer = false;
  for (const auto& p : peers) any_peer |= p.error.empty();
  if (!any_peer) {
    MdTable old;
    old.head = {"model", "optimizer", "peer", "ms", "run"};
    for (const Json& r : c.paper.rows())
      if (str(r, "item") == "peer_earlier")
        old.rows.push_back({model_title(str(r, "model")), optimizer_title(str(r, "optimizer")), str(r, "impl"),
                            ms(num(r, "value", NAN)), str(r, "gpu") + ", " + str(r, "source")});
    c.md += "\nNo peer ran here; the peers of our earlier run on the same GPU model, for reference:\n\n" + old.render();
  }
  c.md += errors_note(errors);
  // The figure: ms against parameters, log-log; ours solid, peers dashed, the paper's points.
  svg::LinePlot p;
  p.x = svg::Axis{"parameters (millions)", true};
  p.y = svg::Axis{"optimizer step (ms)", true};
  for (const auto& o : optimizers_in(opts)) {
    svg::Series s = line_series("ours: " + optimizer_title(o), opt_color(o), false, svg::Marker::Circle);
    for (const auto& r : ours)
      if (r.optimizer == o && r.error.empty() && std::isfinite(r.params)) s.points.push_back({r.params / 1e6, r.ms});
    std::sort(s.points.begin(), s.points.end(), [](const svg::Point& a, const svg::Point& b) { return a.x < b.x; });
    if (!s.points.empty()) p.series.push_back(s);
  }
  std::vector<std::pair<std::string, std::string>> peer_keys;
  for (const auto& r : peers)
    if (r.error.empty()) peer_keys.emplace_back(r.impl, r.optimizer);
  sort_unique(peer_keys);
  for (const auto& [impl, o] : peer_keys) {
    svg::Series s = line_series(impl_title(impl) + ": " + optimizer_title(o), opt_color(o), true,
                                impl == "pylo_naive" ? svg::Marker::Cross : svg::Marker::Square);
    for (const auto& r : peers)
      if (r.impl == impl && r.optimizer == o && r.error.empty() && std::isfinite(r.params))
        s.points.push_back({r.params / 1e6, r.ms});
    std::sort(s.points.begin(), s.points.end(), [](const svg::Point& a, const svg::Point& b) { return a.x < b.x; });
    p.series.push_back(s);
  }
  svg::Series paper = line_series("paper (" + c.paper.gpu("fig5") + ")", "#000000", false, svg::Marker::Cross);
  paper.line = false;
  for (const Json& r : c.paper.rows())
    if (str(r, "item") == "fig5" && params.count(str(r, "model")))
      paper.points.push_back({params[str(r, "model")] / 1e6, num(r, "value", NAN)});
  if (!paper.points.empty()) p.series.push_back(paper);
  if (!p.series.empty()) {
    svg::Figure f;
    f.panel_width = 900;
    f.panel_height = 520;
    f.panels.push_back(svg::Panel{false, p, {}});
    f.caption = "Ours solid; peers on the same machine dashed (PyLO naive: x); the paper's printed points: black x.";
    c.figure(f, "fig5", "Figure 5: optimizer step time against model size");
  }
}

// --------------------------------------------------------------------------------------------- Figure 6
void section_fig6(PyloCtx& c) {
  const Experiment& e = c.exp("fig6_synthetic_mlp");
  const Experiment& pe = c.exp("fig6_peers");
  c.md += "## Figure 6: learned optimizer step on synthetic MLPs\n\n";
  c.md += "Ours: " + c.produced_by(e) + "\n\nPeers: " + c.produced_by(pe) + "\n\n";
  std::vector<StepRow> rows = step_rows(e);
  for (const auto& r : step_rows(pe)) rows.push_back(r);
  if (rows.empty()) {
    c.md += "No data yet.\n\n";
    return;
  }
  static const std::regex mlp(R"(^mlp-w([0-9]+)-d([0-9]+)$)");
  struct Pt {
    double w, d;
    const StepRow* r;
  };
  std::vector<Pt> pts;
  std::vector<std::string> errors;
  for (const auto& r : rows) {
    std::smatch m;
    if (!std::regex_match(r.model, m, mlp)) continue;
    if (!r.error.empty()) {
      errors.push_back(impl_title(r.impl) + " " + optimizer_title(r.optimizer) + " on " + model_title(r.model) + ": " + r.error);
      continue;
    }
    pts.push_back({std::stod(m[1]), std::stod(m[2]), &r});
  }
  std::vector<std::pair<std::string, std::string>> keys;  // (impl, optimizer)
  for (const auto& p : pts) keys.emplace_back(p.r->impl, p.r->optimizer);
  sort_unique(keys);
  std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return (a.first == "ours") > (b.first == "ours"); });
  // The table: one row per MLP, one column per (impl, optimizer).
  MdTable t;
  t.head = {"MLP", "params"};
  for (const auto& k : keys) t.head.push_back(impl_title(k.first) + " " + optimizer_title(k.second) + " ms");
  t.head.push_back("PyLO CUDA ÷ ours (small_fc_lopt)");
  std::vector<std::pair<double, double>> shapes;
  for (const auto& p : pts) shapes.emplace_back(p.d == 1 ? 0 : p.w, p.d == 1 ? p.w : p.d);
  sort_unique(shapes);
  std::vector<std::string> names;
  for (const auto& p : pts) names.push_back(p.r->model);
  sort_unique(names);
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    std::smatch ma, mb;
    std::regex_match(a, ma, mlp);
    std::regex_match(b, mb, mlp);
    return std::make_pair(std::stod(ma[2]), std::stod(ma[1])) < std::make_pair(std::stod(mb[2]), std::stod(mb[1]));
  });
  auto find = [&](const std::string& model, const std::string& impl, const std::string& o) {
    for (const auto& p : pts)
      if (p.r->model == model && p.r->impl == impl && p.r->optimizer == o) return p.r->ms;
    return double(NAN);
  };
  for (const auto& n : names) {
    double params = NAN;
    for (const auto& p : pts)
      if (p.r->model == n && std::isfinite(p.r->params)) params = p.r->params;
    std::vector<std::string> row = {model_title(n), std::isfinite(params) ? significant(params / 1e6, 3) + "M" : kNone};
    for (const auto& k : keys) row.push_back(ms(find(n, k.first, k.second)));
    row.push_back(ratio(find(n, "pylo_cuda", "small_fc_lopt"), find(n, "ours", "small_fc_lopt"), 1));
    t.rows.push_back(row);
  }
  c.md += t.render();
  c.md += "\nSynthetic MLPs (`bench_optim -e mlp-w<W>-d<D>`: D linear layers of W x W, each with a bias). Ours: "
          "small_fc_lopt exact (fp32 MLP) and fast (tensor cores), VeLO; PyLO's CUDA and naive optimizers on the same "
          "shapes, same machine. The paper's Figure 6 is a plot whose values are not transcribed here; compare the "
          "shapes of the curves and the ratio column.\n";
  c.md += errors_note(errors);
  // Three panels: width sweep at depth 1, depth sweeps at width 256 and 4096.
  svg::Figure f;
  f.panel_width = 560;
  f.panel_height = 440;
  struct Sweep {
    std::string title, xlabel;
    std::function<bool(const Pt&)> in;
    std::function<double(const Pt&)> x;
  };
  const std::vector<Sweep> sweeps = {
      {"one layer, width sweep", "width W (one W x W layer)", [](const Pt& p) { return p.d == 1; }, [](const Pt& p) { return p.w; }},
      {"width 256, depth sweep", "layers", [](const Pt& p) { return p.w == 256; }, [](const Pt& p) { return p.d; }},
      {"width 4096, depth sweep", "layers", [](const Pt& p) { return p.w == 4096; }, [](const Pt& p) { return p.d; }}};
  for (const auto& sw : sweeps) {
    svg::LinePlot p;
    p.title = sw.title;
    p.x = svg::Axis{sw.xlabel, true};
    p.y = svg::Axis{"optimizer step (ms)", true};
    for (const auto& k : keys) {
      svg::Series s = line_series(impl_title(k.first) + ": " + optimizer_title(k.second), opt_color(k.second),
                                  k.first != "ours", k.first == "pylo_naive" ? svg::Marker::Cross
                                                     : k.first == "ours"     ? svg::Marker::Circle
                                                                             : svg::Marker::Square);
      for (const auto& pt : pts)
        if (pt.r->impl == k.first && pt.r->optimizer == k.second && sw.in(pt)) s.points.push_back({sw.x(pt), pt.r->ms});
      std::sort(s.points.begin(), s.points.end(), [](const svg::Point& a, const svg::Point& b) { return a.x < b.x; });
      if (s.points.size() > 1 || (!s.points.empty() && sw.title[0] == 'o')) p.series.push_back(s);
    }
    if (!p.series.empty()) f.panels.push_back(svg::Panel{false, p, {}});
  }
  if (!f.panels.empty()) {
    f.caption = "Ours solid, PyLO dashed (naive: x); log axes.";
    c.figure(f, "fig6", "Figure 6: learned optimizer step on synthetic MLPs");
  }
}

// --------------------------------------------------------------------------------------------- Figure 9
void section_fig9(PyloCtx& c) {
  const Experiment& e = c.exp("fig9_matrix_8192");
  const Experiment& pe = c.exp("fig9_peers");
  c.md += "## Figure 9: optimizer step on one 8192 x 8192 matrix\n\n";
  c.md += "Ours: " + c.produced_by(e) + "\n\nPeers: " + c.produced_by(pe) + "\n\n";
  const std::vector<StepRow> ours = step_rows(e), peers = step_rows(pe);
  if (ours.empty() && peers.empty()) {
    c.md += "No data yet.\n\n";
    return;
  }
  std::vector<std::string> opts, errors;
  for (const auto& r : ours) opts.push_back(r.optimizer);
  for (const auto& r : peers)
    if (!r.error.empty()) errors.push_back(impl_title(r.impl) + " " + optimizer_title(r.optimizer) + ": " + r.error);
  MdTable t;
  t.head = {"optimizer", "ours ms", "% of HBM floor", "PyLO CUDA ms", "PyLO naive ms", "torch ms", "peer ÷ ours"};
  t.align = {'l', 'r', 'r', 'r', 'r', 'r', 'r'};
  svg::BarChart ch;
  ch.title = "8192 x 8192 matrix (67M parameters)";
  ch.y = svg::Axis{"optimizer step (ms)", true};
  std::vector<svg::BarSeries> series(4);
  const char* names[] = {"ours", "PyLO CUDA", "PyLO naive", "torch"};
  const char* colors[] = {"#1f77b4", "#d62728", "#ff9896", "#7f7f7f"};
  for (int i = 0; i < 4; i++) series[size_t(i)].name = names[i], series[size_t(i)].color = colors[i];
  for (const auto& o : optimizers_in(opts)) {
    const StepRow* r = nullptr;
    for (const auto& x : ours)
      if (x.optimizer == o) r = &x;
    if (!r->error.empty()) {
      errors.push_back("ours " + optimizer_title(o) + ": " + r->error);
      continue;
    }
    const std::string b = base_optimizer(o);
    const std::string m = r->model;
    const double cuda = learned(o) ? peer_ms(peers, m, b, "pylo_cuda") : NAN;
    const double naive = learned(o) ? peer_ms(peers, m, b, "pylo_naive") : NAN;
    const double torch = peer_ms(peers, m, o, "torch");
    const double peer = std::isfinite(cuda) ? cuda : torch;
    t.rows.push_back({optimizer_title(o), ms(r->ms), fixed(r->pct_of_floor, 0) + "%", ms(cuda), ms(naive), ms(torch),
                      ratio(peer, r->ms, 1) + (std::isfinite(cuda) ? " (CUDA)" : std::isfinite(torch) ? " (torch)" : "")});
    ch.groups.push_back(optimizer_title(o));
    const double v[4] = {r->ms, cuda, naive, torch};
    for (int i = 0; i < 4; i++) series[size_t(i)].values.push_back({v[i]});
  }
  c.md += t.render();
  c.md += "\nOne 8192 x 8192 matrix (`bench_optim -e mat-8192x8192`): Muon and CELO2 orthogonalise it whole "
          "(Newton-Schulz), the others step it element by element. Peers on the same matrix, same machine. The "
          "paper's Figure 9 is a plot whose values are not transcribed here.\n";
  c.md += errors_note(errors);
  for (const auto& s : series) {
    bool any = false;
    for (const auto& v : s.values) any |= !v.empty() && std::isfinite(v[0]);
    if (any) ch.series.push_back(s);
  }
  if (!ch.groups.empty()) {
    svg::Figure f;
    f.panel_width = std::max(700.0, 100.0 * double(ch.groups.size()) + 300);
    f.panels.push_back(svg::Panel{true, {}, ch});
    c.figure(f, "fig9", "Figure 9: one 8192 x 8192 matrix");
  }
}

// --------------------------------------------------------------------------------------------- Table 3
void section_table3(PyloCtx& c) {
  const Experiment& e = c.exp("table3_data_parallel");
  c.md += "## Table 3: data parallel on 4 GPUs, all-reduce and sharded (GPT-2 124M, 4 x 1024 tokens per GPU)\n\n";
  c.md += c.produced_by(e) + "\n\n";
  const std::vector<BenchRow> rows = bench_rows(e);
  if (rows.empty()) {
    c.md += "No data yet.\n\n";
    return;
  }
  std::vector<std::string> opts, errors;
  for (const auto& r : rows) {
    opts.push_back(r.optimizer);
    if (!r.error.empty())
      errors.push_back(optimizer_title(r.optimizer) + (r.sharded ? " sharded" : r.allreduce ? " all-reduce" : " 1 GPU") + ": " + r.error);
  }
  auto find = [&](const std::string& o, int mode) {  // 0: one GPU, 1: all-reduce, 2: sharded
    for (const auto& r : rows)
      if (r.optimizer == o && r.error.empty() && (mode == 0 ? r.launch.empty() : mode == 1 ? r.allreduce : r.sharded))
        return r.step_ms;
    return double(NAN);
  };
  long long world = 0;
  for (const auto& r : rows) world = std::max(world, r.world);
  MdTable t;
  t.head = {"optimizer", "1 GPU ms", std::to_string(world) + " GPUs all-reduce ms", "sharded ms", "sharded over AdamW's",
            "paper all-reduce / sharded ms (" + c.paper.gpu("table3") + ")", "paper sharded over Adam's", "sharded: paper ÷ ours"};
  t.align = {'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  svg::BarChart ch;
  ch.title = "GPT-2 124M, 4 x 1024 tokens per GPU";
  ch.y = svg::Axis{"training step (ms)", true};
  svg::BarSeries s_ar, s_sh, p_ar, p_sh;
  s_ar.name = "ours, all-reduce (" + e.gpu + ")", s_ar.color = "#1f77b4";
  s_sh.name = "ours, sharded", s_sh.color = "#6baed6";
  p_ar.name = "paper, all-reduce (" + c.paper.gpu("table3") + ")", p_ar.color = "#d62728";
  p_sh.name = "paper, reduce-scatter + sharded", p_sh.color = "#ff9896";
  const double adamw_sh = find("adamw", 2);
  const double p_adamw_sh = c.paper.value({{"item", "table3"}, {"optimizer", "adamw"}, {"mode", "sharded"}});
  for (const auto& o : optimizers_in(opts)) {
    const std::string b = base_optimizer(o);
    const double one = find(o, 0), ar = find(o, 1), sh = find(o, 2);
    const double par = c.paper.value({{"item", "table3"}, {"optimizer", b}, {"mode", "allreduce"}, {"impl", paper_impl(o)}});
    const double psh = c.paper.value({{"item", "table3"}, {"optimizer", b}, {"mode", "sharded"}, {"impl", paper_impl(o)}});
    t.rows.push_back({optimizer_title(o), ms(one), ms(ar), ms(sh), o == "adamw" ? kNone : fixed(100 * (sh / adamw_sh - 1), 1) + "%",
                      ms(par) + " / " + ms(psh), o == "adamw" || !std::isfinite(psh) ? kNone : fixed(100 * (psh / p_adamw_sh - 1), 1) + "%",
                      ratio(psh, sh, 1)});
    ch.groups.push_back(optimizer_title(o));
    s_ar.values.push_back({ar});
    s_sh.values.push_back({sh});
    p_ar.values.push_back({par});
    p_sh.values.push_back({psh});
  }
  c.md += t.render();
  c.md += "\n`scripts/bench_data_parallel.sh` (PARTS=table3, separate q/k/v as in the paper): one process per GPU, "
          "per-GPU batch 4 x 1024; all-reduce (`--nccl 1`) and sharded (`--shard 1`: each GPU steps and keeps the "
          "state of whole tensors). The paper's: " + with_paper(c, "table3") + ", its all-reduce and its "
          "reduce-scatter + sharded step.\n";
  c.md += errors_note(errors);
  ch.series = {s_ar, s_sh, p_ar, p_sh};
  svg::Figure f;
  f.panel_width = std::max(700.0, 120.0 * double(ch.groups.size()) + 320);
  f.panels.push_back(svg::Panel{true, {}, ch});
  c.figure(f, "table3", "Table 3: data-parallel step on 4 GPUs, ours and the paper's");
}

}  // namespace report
