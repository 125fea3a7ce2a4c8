// The figure sections of `report pylo`: Figures 1 (ViT-B/16 step by batch size), 5 (optimizer step against
// model size), 6 (synthetic MLPs) and 9 (one 8192 x 8192 matrix), each with its table.
#include <algorithm>
#include <cmath>
#include <functional>
#include <regex>
#include <set>

#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"
#include "tools/report/pylo_sections.h"

namespace report {
namespace {

// ------------------------------------------------------------------------------------------ Figure 5
// One row per model x optimizer: ours, the peers on the same shapes, the paper's point.
MdTable fig5_table(const PyloCtx& c, const std::vector<StepRow>& ours, const std::vector<StepRow>& peers,
                   const std::vector<std::string>& models, const std::vector<std::string>& opts,
                   std::map<std::string, double>& params, std::vector<NoNumber>& errors) {
  MdTable t;
  t.head = {"model",
            "params",
            "optimizer",
            "ours ms",
            "% of HBM floor",
            "PyLO CUDA ms",
            "PyLO naive ms",
            "torch ms",
            "JAX ms",
            "PyLO CUDA ÷ ours",
            "paper ms (" + c.paper.gpu("fig5") + ")"};
  t.align = {'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'};
  for (const auto& m : models_in(models))
    for (const auto& o : optimizers_in(opts)) {
      const StepRow* r = nullptr;
      for (const auto& x : ours)
        if (x.model == m && x.optimizer == o) r = &x;
      if (!r) continue;
      if (!r->error.empty()) errors.push_back({"ours " + optimizer_title(o), model_title(m), r->error});
      const std::string b = base_optimizer(o);
      const double cuda = learned(o) ? peer_ms(peers, m, b, "pylo_cuda") : NAN;
      const double paper = c.paper.value({{"item", "fig5"}, {"model", m}, {"optimizer", b}, {"impl", paper_impl(o)}});
      t.rows.push_back({model_title(m), std::isfinite(params[m]) ? fixed(params[m] / 1e6, 1) + "M" : kNone,
                        optimizer_title(o), ms(r->ms), fixed(r->pct_of_floor, 0) + "%", ms(cuda),
                        learned(o) ? ms(peer_ms(peers, m, b, "pylo_naive")) : kNone, ms(peer_ms(peers, m, o, "torch")),
                        b == "velo" ? ms(peer_ms(peers, m, "velo", "jax_lopt")) : kNone, ratio(cuda, r->ms, 1),
                        ms(paper)});
    }
  return t;
}

// The earlier same-GPU peer run (docs/specs/targets.md), where this run has no peer; "" when it has one.
std::string fig5_earlier_peers(const PyloCtx& c, const std::vector<StepRow>& peers) {
  bool any_peer = false;
  for (const auto& p : peers) any_peer |= p.error.empty();
  if (any_peer) return "";
  MdTable old;
  old.head = {"model", "optimizer", "peer", "ms", "run"};
  for (const Json& r : c.paper.rows())
    if (str(r, "item") == "peer_earlier")
      old.rows.push_back({model_title(str(r, "model")), optimizer_title(str(r, "optimizer")), str(r, "impl"),
                          ms(num(r, "value", NAN)), str(r, "gpu") + ", " + str(r, "source")});
  return "\nNo peer ran here; the peers of our earlier run on the same GPU model, for reference:\n\n" + old.render();
}

void sort_by_x(svg::Series& s) {
  std::sort(s.points.begin(), s.points.end(), [](const svg::Point& a, const svg::Point& b) { return a.x < b.x; });
}

// The figure: ms against parameters, log-log; ours solid, peers dashed, the paper's points.
void fig5_figure(PyloCtx& c, const std::vector<StepRow>& ours, const std::vector<StepRow>& peers,
                 const std::vector<std::string>& opts, std::map<std::string, double>& params) {
  svg::LinePlot p;
  p.x = svg::Axis{"parameters (millions)", true};
  p.y = svg::Axis{"optimizer step (ms)", true};
  for (const auto& o : optimizers_in(opts)) {
    svg::Series s = line_series("ours: " + optimizer_title(o), opt_color(o), false, svg::Marker::Circle);
    for (const auto& r : ours)
      if (r.optimizer == o && r.error.empty() && std::isfinite(r.params)) s.points.push_back({r.params / 1e6, r.ms});
    sort_by_x(s);
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
    sort_by_x(s);
    p.series.push_back(s);
  }
  svg::Series paper = line_series("paper (" + c.paper.gpu("fig5") + ")", "#000000", false, svg::Marker::Cross);
  paper.line = false;
  for (const Json& r : c.paper.rows())
    if (str(r, "item") == "fig5" && params.count(str(r, "model")))
      paper.points.push_back({params[str(r, "model")] / 1e6, num(r, "value", NAN)});
  if (!paper.points.empty()) p.series.push_back(paper);
  if (p.series.empty()) return;
  svg::Figure f;
  f.panel_width = 900;
  f.panel_height = 520;
  f.panels.push_back(svg::Panel{false, p, {}});
  f.caption = "Ours solid; peers on the same machine dashed (PyLO naive: x); the paper's printed points: black x.";
  c.figure(f, "fig5", "Figure 5: optimizer step time against model size");
}

// ------------------------------------------------------------------------------------------ Figure 6
// A synthetic MLP's step: D layers of W x W (bench_optim's model mlp-w<W>-d<D>).
struct MlpStep {
  double w, d;
  const StepRow* r;
};
const std::regex& mlp_name() {
  static const std::regex mlp(R"(^mlp-w([0-9]+)-d([0-9]+)$)");
  return mlp;
}

// The rows on MLPs that gave a number; the others' errors into `errors`.
std::vector<MlpStep> mlp_steps(const std::vector<StepRow>& rows, std::vector<NoNumber>& errors) {
  std::vector<MlpStep> pts;
  for (const auto& r : rows) {
    std::smatch m;
    if (!std::regex_match(r.model, m, mlp_name())) continue;
    if (!r.error.empty()) {
      errors.push_back({impl_title(r.impl) + " " + optimizer_title(r.optimizer), model_title(r.model), r.error});
      continue;
    }
    pts.push_back({std::stod(m[1]), std::stod(m[2]), &r});
  }
  return pts;
}

// The (impl, optimizer) pairs measured, ours first.
std::vector<std::pair<std::string, std::string>> fig6_keys(const std::vector<MlpStep>& pts) {
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& p : pts) keys.emplace_back(p.r->impl, p.r->optimizer);
  sort_unique(keys);
  std::stable_sort(keys.begin(), keys.end(),
                   [](const auto& a, const auto& b) { return (a.first == "ours") > (b.first == "ours"); });
  return keys;
}

// The table: one row per MLP (by depth, then width), one column per (impl, optimizer).
MdTable fig6_table(const std::vector<MlpStep>& pts, const std::vector<std::pair<std::string, std::string>>& keys) {
  MdTable t;
  t.head = {"MLP", "params"};
  for (const auto& k : keys) t.head.push_back(impl_title(k.first) + " " + optimizer_title(k.second) + " ms");
  t.head.push_back("PyLO CUDA ÷ ours (small_fc_lopt)");
  std::vector<std::string> names;
  for (const auto& p : pts) names.push_back(p.r->model);
  sort_unique(names);
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    std::smatch ma, mb;
    std::regex_match(a, ma, mlp_name());
    std::regex_match(b, mb, mlp_name());
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
  return t;
}

// Three panels: width sweep at depth 1, depth sweeps at width 256 and 4096.
void fig6_figure(PyloCtx& c, const std::vector<MlpStep>& pts,
                 const std::vector<std::pair<std::string, std::string>>& keys) {
  svg::Figure f;
  f.panel_width = 560;
  f.panel_height = 440;
  struct Sweep {
    std::string title, xlabel;
    std::function<bool(const MlpStep&)> in;
    std::function<double(const MlpStep&)> x;
  };
  const std::vector<Sweep> sweeps = {{"one layer, width sweep", "width W (one W x W layer)",
                                      [](const MlpStep& p) { return p.d == 1; }, [](const MlpStep& p) { return p.w; }},
                                     {"width 256, depth sweep", "layers", [](const MlpStep& p) { return p.w == 256; },
                                      [](const MlpStep& p) { return p.d; }},
                                     {"width 4096, depth sweep", "layers", [](const MlpStep& p) { return p.w == 4096; },
                                      [](const MlpStep& p) { return p.d; }}};
  for (const auto& sw : sweeps) {
    svg::LinePlot p;
    p.title = sw.title;
    p.x = svg::Axis{sw.xlabel, true};
    p.y = svg::Axis{"optimizer step (ms)", true};
    for (const auto& k : keys) {
      svg::Series s =
          line_series(impl_title(k.first) + ": " + optimizer_title(k.second), opt_color(k.second), k.first != "ours",
                      k.first == "pylo_naive" ? svg::Marker::Cross
                      : k.first == "ours"     ? svg::Marker::Circle
                                              : svg::Marker::Square);
      for (const auto& pt : pts)
        if (pt.r->impl == k.first && pt.r->optimizer == k.second && sw.in(pt)) s.points.push_back({sw.x(pt), pt.r->ms});
      sort_by_x(s);
      if (s.points.size() > 1 || (!s.points.empty() && sw.title[0] == 'o')) p.series.push_back(s);
    }
    if (!p.series.empty()) f.panels.push_back(svg::Panel{false, p, {}});
  }
  if (f.panels.empty()) return;
  f.caption = "Ours solid, PyLO dashed (naive: x); log axes.";
  c.figure(f, "fig6", "Figure 6: learned optimizer step on synthetic MLPs");
}

}  // namespace

// ------------------------------------------------------------------------------------------ Figure 1
void section_fig1(PyloCtx& c) {
  const Experiment& e = c.exp("fig1_vit_batch_breakdown");
  c.open_section("Figure 1: ViT-B/16 step breakdown across batch sizes", e);
  std::vector<BenchRow> rows = bench_rows(e);
  // Batch 32 comes from Table 2's runs where this experiment has none of its own (the quick pass).
  bool from_table2 = false;
  if (std::none_of(rows.begin(), rows.end(), [](const BenchRow& r) { return r.B == 32; }))
    for (const auto& r : bench_rows(c.on_same_gpu(e, "table2_step_breakdown")))
      if (r.model == "vit-b16") rows.push_back(r), from_table2 = true;
  std::vector<long long> batches;
  std::vector<std::string> opts;
  std::vector<NoNumber> errors;
  for (const auto& r : rows)
    if (r.model == "vit-b16") batches.push_back(r.B), opts.push_back(r.optimizer);
  sort_unique(batches);
  if (batches.empty()) return c.no_data();
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
      if (r && !r->error.empty())
        errors.push_back({"batch " + std::to_string(B) + " " + optimizer_title(shown[i]), "", r->error});
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
          c.paper.gpu("table2") + "): forward " + ms(p_fwd) + " ms, backward " + ms(p_bwd) + " ms, optimizer: Adam " +
          ms(c.paper.value({{"item", "table2"}, {"optimizer", "adamw"}})) + ", small_fc_lopt " +
          ms(c.paper.value({{"item", "table2"}, {"optimizer", "small_fc_lopt"}})) + ", VeLO " +
          ms(c.paper.value({{"item", "table2"}, {"optimizer", "velo"}})) + " ms (see Table 2 above)." +
          (from_table2 ? " Batch 32 here is Table 2's run." : "") + "\n";
  c.md += errors_note(errors);
  if (!ch.series.empty()) {
    svg::Figure f;
    f.panel_width = std::max(700.0, 130.0 * double(batches.size()) + 320);
    f.panels.push_back(svg::Panel{true, {}, ch});
    f.caption = "Stacked: forward, backward, optimizer (lighter shades upward); one bar per optimizer.";
    c.figure(f, "fig1", "Figure 1: ViT-B/16 step breakdown by batch size");
  }
}

// ------------------------------------------------------------------------------------------ Figure 5
void section_fig5(PyloCtx& c) {
  const Experiment& e = c.exp("fig5_optimizer_step_vs_size");
  const Experiment& pe = c.exp("fig5_peers");
  c.open_section("Figure 5: optimizer step time against model size", e, &pe);
  const std::vector<StepRow> ours = step_rows(e), peers = step_rows(c.on_same_gpu(e, pe.name));
  if (ours.empty() && peers.empty()) return c.no_data();
  std::vector<std::string> models, opts;
  std::vector<NoNumber> errors;
  std::map<std::string, double> params;
  for (const auto& r : ours) {
    models.push_back(r.model), opts.push_back(r.optimizer);
    if (std::isfinite(r.params)) params[r.model] = r.params;
  }
  for (const auto& r : peers) {
    models.push_back(r.model);
    if (std::isfinite(r.params)) params.emplace(r.model, r.params);
    if (!r.error.empty())
      errors.push_back({impl_title(r.impl) + " " + optimizer_title(r.optimizer), model_title(r.model), r.error});
  }
  c.md += fig5_table(c, ours, peers, models, opts, params, errors).render();
  c.md +=
      "\nOurs: `bench_optim` (CUDA events, median of 20 steps; the floor is the bytes the step must move over the "
      "measured copy bandwidth). Peers on the same tensor shapes (`bench_optim --shapes 1`), same machine, same "
      "session: PyLO's CUDA and naive optimizers, torch's AdamW (fused) / Adafactor (foreach) / Muon (+ AdamW), "
      "learned_optimization's VeLO in JAX (`bench/pylo_step_bench.py`, `bench/jax_velo_bench.py`). The paper's "
      "column: " +
      with_paper(c, "fig5") +
      ", the GPT-2 355M points it prints; the rest of its Figure 5 is a plot "
      "not transcribed here.\n";
  c.md += fig5_earlier_peers(c, peers);
  c.md += errors_note(errors);
  fig5_figure(c, ours, peers, opts, params);  // after the table: its lookups add the models without a count
}

// ------------------------------------------------------------------------------------------ Figure 6
void section_fig6(PyloCtx& c) {
  const Experiment& e = c.exp("fig6_synthetic_mlp");
  const Experiment& pe = c.exp("fig6_peers");
  c.open_section("Figure 6: learned optimizer step on synthetic MLPs", e, &pe);
  std::vector<StepRow> rows = step_rows(e);
  for (const auto& r : step_rows(c.on_same_gpu(e, pe.name))) rows.push_back(r);
  if (rows.empty()) return c.no_data();
  std::vector<NoNumber> errors;
  const std::vector<MlpStep> pts = mlp_steps(rows, errors);
  const auto keys = fig6_keys(pts);
  c.md += fig6_table(pts, keys).render();
  c.md +=
      "\nSynthetic MLPs (`bench_optim -e mlp-w<W>-d<D>`: D linear layers of W x W, each with a bias). Ours: "
      "small_fc_lopt exact (fp32 MLP) and fast (tensor cores), VeLO; PyLO's CUDA and naive optimizers on the same "
      "shapes, same machine. The paper's Figure 6 is a plot whose values are not transcribed here; compare the "
      "shapes of the curves and the ratio column.\n";
  c.md += errors_note(errors);
  fig6_figure(c, pts, keys);
}

// ------------------------------------------------------------------------------------------ Figure 9
void section_fig9(PyloCtx& c) {
  const Experiment& e = c.exp("fig9_matrix_8192");
  const Experiment& pe = c.exp("fig9_peers");
  c.open_section("Figure 9: optimizer step on one 8192 x 8192 matrix", e, &pe);
  const std::vector<StepRow> ours = step_rows(e), peers = step_rows(c.on_same_gpu(e, pe.name));
  if (ours.empty() && peers.empty()) return c.no_data();
  std::vector<std::string> opts;
  std::vector<NoNumber> errors;
  for (const auto& r : ours) opts.push_back(r.optimizer);
  for (const auto& r : peers)
    if (!r.error.empty()) errors.push_back({impl_title(r.impl) + " " + optimizer_title(r.optimizer), "", r.error});
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
      errors.push_back({"ours " + optimizer_title(o), "", r->error});
      continue;
    }
    const std::string b = base_optimizer(o);
    const std::string m = r->model;
    const double cuda = learned(o) ? peer_ms(peers, m, b, "pylo_cuda") : NAN;
    const double naive = learned(o) ? peer_ms(peers, m, b, "pylo_naive") : NAN;
    const double torch = peer_ms(peers, m, o, "torch");
    const double peer = std::isfinite(cuda) ? cuda : torch;
    t.rows.push_back({optimizer_title(o), ms(r->ms), fixed(r->pct_of_floor, 0) + "%", ms(cuda), ms(naive), ms(torch),
                      ratio(peer, r->ms, 1) + (std::isfinite(cuda)    ? " (CUDA)"
                                               : std::isfinite(torch) ? " (torch)"
                                                                      : "")});
    ch.groups.push_back(optimizer_title(o));
    const double v[4] = {r->ms, cuda, naive, torch};
    for (int i = 0; i < 4; i++) series[size_t(i)].values.push_back({v[i]});
  }
  c.md += t.render();
  c.md +=
      "\nOne 8192 x 8192 matrix (`bench_optim -e mat-8192x8192`): Muon and CELO2 orthogonalise it whole "
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

}  // namespace report
