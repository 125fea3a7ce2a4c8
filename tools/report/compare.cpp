#include "tools/report/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>

#include "common/error.h"
#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"
#include "tools/report/stats.h"

namespace report {
namespace {

const std::vector<std::string> kOrder = {"adamw", "adafactor", "muon", "velo", "small_fc_lopt", "celo2", "elo_celo2"};

bool finite_num(const Json& j, const std::string& key) { return is_num(j, key) && std::isfinite(j.obj.at(key).num); }

}  // namespace

CompareRun compare_run_of(const std::vector<Json>& lines, const std::string& label, int seed) {
  CompareRun run;
  run.label = label;
  run.seed = seed;
  run.optimizer = label.substr(0, label.find('_'));
  for (const Json& r : lines) {
    if (r.has("compare_run")) {
      const Json& head = r.at("compare_run");
      run.optimizer = str(head, "optimizer", run.optimizer);
      run.flags = str(head, "flags", "");
    } else if (r.has("compare_end")) {
      const Json& end = r.at("compare_end");
      run.status = str(end, "status", "failed");
      run.wall_s = num(end, "wall_s", NAN);
    } else if (r.has("val_loss")) {
      const bool loss_ok = finite_num(r, "val_loss");
      run.nonfinite |= !loss_ok;
      // A non-finite loss makes that validation's accuracy meaningless too.
      const bool ok = loss_ok && finite_num(r, "val_top1");
      run.val.push_back(
          {num(r, "step", NAN), loss_ok ? num(r, "val_loss", NAN) : NAN, ok ? 100 * num(r, "val_top1", NAN) : NAN});
    } else if (r.has("loss")) {
      run.nonfinite |= !finite_num(r, "loss");
      // Units per step = rate x step time (the log has no batch size): tok_per_s or img_per_s.
      for (const auto& kv : r.obj) {
        const std::string& k = kv.first;
        if (k.size() > 6 && k.compare(k.size() - 6, 6, "_per_s") == 0 && finite_num(r, k) && finite_num(r, "ms")) {
          const std::string u = k.substr(0, k.size() - 6);
          run.unit = u == "tok" ? "tokens" : u == "img" ? "images" : u;
          run.per_step.push_back(kv.second.num * num(r, "ms", NAN) / 1000);
        }
      }
    }
  }
  if (run.nonfinite) run.status = "diverged";
  return run;
}

std::vector<CompareRun> read_compare_runs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) user_error("'", dir, "' is not a folder.");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  static const std::regex run_name(R"(^(.+)_s([0-9]+)\.jsonl$)");
  std::vector<CompareRun> runs;
  for (const auto& n : names) {
    std::smatch m;
    if (!std::regex_match(n, m, run_name)) continue;
    runs.push_back(compare_run_of(read_json_lines(dir + "/" + n), m[1], std::stoi(m[2])));
  }
  return runs;
}

void lr_of(const std::string& label, const std::string& flags, std::string* text, double* value) {
  std::smatch m;
  static const std::regex set_lr(R"(--set[ =](\w+)\.lr=(\S+))");
  static const std::regex flag_lr(R"((?:^|\s)(?:-l|--lr)[ =](\S+))");
  static const std::regex label_lr(R"(_lr([0-9.eE+-]+)$)");
  *text = "default";
  *value = NAN;
  auto number = [](const std::string& s, double* v) {
    try {
      size_t used = 0;
      *v = std::stod(s, &used);
      return used == s.size();
    } catch (const std::exception&) {
      return false;
    }
  };
  if (std::regex_search(flags, m, set_lr)) {
    double v;
    if (number(m[2], &v)) {
      *text = std::string(m[2]) + " (" + std::string(m[1]) + ".lr)";
      *value = v;
    }
    return;
  }
  if (std::regex_search(flags, m, flag_lr) || std::regex_search(label, m, label_lr)) {
    double v;
    if (number(m[1], &v)) {
      *text = m[1];
      *value = v;
    }
  }
}

std::vector<CompareRow> summarise_runs(const std::vector<CompareRun>& runs) {
  std::vector<CompareRow> rows;
  std::map<std::string, size_t> index;
  for (const auto& r : runs) {
    if (!index.count(r.label)) {
      index[r.label] = rows.size();
      rows.emplace_back();
      rows.back().label = r.label;
    }
    rows[index[r.label]].runs.push_back(r);
  }
  for (auto& row : rows) {
    std::stable_sort(row.runs.begin(), row.runs.end(),
                     [](const CompareRun& a, const CompareRun& b) { return a.seed < b.seed; });
    row.optimizer = row.runs[0].optimizer;
    lr_of(row.label, row.runs[0].flags, &row.lr_text, &row.lr);
    std::vector<const CompareRun*> ok;
    for (const auto& r : row.runs) {
      row.seeds.push_back(r.seed);
      const bool any = std::any_of(r.val.begin(), r.val.end(), [](const ValPoint& v) { return std::isfinite(v.loss); });
      if (r.status == "ok" && any) ok.push_back(&r);
    }
    for (const CompareRun* r : ok) {
      double last = NAN, best = INFINITY, best_top1 = -INFINITY;
      bool any_top1 = false;
      for (const auto& v : r->val) {
        if (std::isfinite(v.loss)) last = v.loss, best = std::min(best, v.loss);
        if (std::isfinite(v.top1)) best_top1 = std::max(best_top1, v.top1), any_top1 = true;
      }
      row.final_loss.push_back(last);
      row.best_loss.push_back(best);
      if (!r->val.empty() && std::isfinite(r->val.back().top1)) row.final_top1.push_back(r->val.back().top1);
      if (any_top1) row.best_top1.push_back(best_top1);
    }
    const bool use_ok = !ok.empty();
    for (const auto& r : row.runs) {
      const bool in_ok = std::find(ok.begin(), ok.end(), &r) != ok.end();
      if ((!use_ok || in_ok) && std::isfinite(r.wall_s)) row.wall.push_back(r.wall_s);
    }
    std::map<std::string, int> counts;
    for (const auto& r : row.runs)
      if (r.status != "ok") counts[r.status]++;
    row.diverged = counts.count("diverged") ? counts["diverged"] : 0;
    std::string status;
    for (const auto& kv : counts)
      status += (status.empty() ? "" : ", ") + kv.first + " " + std::to_string(kv.second) + "/" +
                std::to_string(row.runs.size());
    row.status = status.empty() ? "ok" : status;
  }
  auto rank = [](const std::string& o) {
    const auto it = std::find(kOrder.begin(), kOrder.end(), o);
    return size_t(it - kOrder.begin());
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const CompareRow& a, const CompareRow& b) {
    if (rank(a.optimizer) != rank(b.optimizer)) return rank(a.optimizer) < rank(b.optimizer);
    if (a.optimizer != b.optimizer) return a.optimizer < b.optimizer;
    const double la = std::isnan(a.lr) ? INFINITY : a.lr, lb = std::isnan(b.lr) ? INFINITY : b.lr;
    if (la != lb) return la < lb;
    return a.label < b.label;
  });
  return rows;
}

std::string compare_table(const std::vector<CompareRow>& rows, bool top1, const std::string& title) {
  MdTable t;
  t.head = {"label", "optimizer", "lr", "seeds", "final val loss", "best val loss"};
  if (top1) t.head.insert(t.head.end(), {"final top-1 (%)", "best top-1 (%)"});
  t.head.insert(t.head.end(), {"wall s / run", "status"});
  for (const auto& r : rows) {
    // A label with no finished run shows why in place of its numbers.
    const std::string none = r.diverged && r.final_loss.empty() ? "diverged" : kNone;
    auto or_none = [&](const std::string& s) { return s.empty() ? none : s; };
    std::string seeds;
    for (int s : r.seeds) seeds += (seeds.empty() ? "" : " ") + std::to_string(s);
    std::vector<std::string> cells = {
        r.label, r.optimizer, r.lr_text, seeds, or_none(mean_std(r.final_loss, 4)), or_none(mean_std(r.best_loss, 4))};
    if (top1) cells.insert(cells.end(), {or_none(mean_std(r.final_top1, 2)), or_none(mean_std(r.best_top1, 2))});
    cells.push_back(r.wall.empty() ? kNone : fixed(mean(r.wall), 0));
    cells.push_back(r.status);
    t.rows.push_back(cells);
  }
  std::string o = title.empty() ? "" : "### " + title + "\n\n";
  o += t.render();
  o += "\nFinal: the last validation; best: each run's lowest validation loss (highest top-1); mean ± sample std "
       "over the seeds that finished. Wall: mean seconds per run (of those seeds), build excluded. Status: runs that "
       "diverged (non-finite loss), failed, were stopped or are incomplete (no end line).\n";
  return o;
}

std::string optimizer_color(const std::string& optimizer, size_t k, size_t n) {
  // A dark colour per family; lighter shades for the other configurations of the same optimizer.
  static const std::map<std::string, std::string> dark = {
      {"adamw", "#08519c"},         {"adafactor", "#54278f"}, {"muon", "#006d2c"},      {"velo", "#a63603"},
      {"small_fc_lopt", "#8c6d00"}, {"celo2", "#a50f15"},     {"elo_celo2", "#ae017e"}, {"elo", "#6a3d9a"}};
  const auto it = dark.find(optimizer);
  const std::string base = it != dark.end() ? it->second : "#404040";
  const double t = n <= 1 ? 0.0 : 0.55 * (1.0 - double(k) / double(n - 1));
  return svg::tint(base, t);
}

namespace {

// The best configuration per optimizer: lowest mean final loss, among those whose every run finished where
// there is one.
std::map<std::string, const CompareRow*> best_per_optimizer(
    const std::vector<std::string>& opts, std::map<std::string, std::vector<const CompareRow*>>& by_opt) {
  std::map<std::string, const CompareRow*> best;
  for (const auto& o : opts) {
    const CompareRow* b = nullptr;
    for (int pass = 0; pass < 2 && !b; pass++)
      for (const CompareRow* r : by_opt[o]) {
        if (r->final_loss.empty() || (pass == 0 && r->status != "ok")) continue;
        if (!b || mean(r->final_loss) < mean(b->final_loss)) b = r;
      }
    best[o] = b;
  }
  return best;
}

// One configuration in panel p (0: loss, 1: top-1): mean, min and max over the runs at each validation step
// (finite values only); no points when it has none.
svg::Series mean_series(const CompareRow& r, int p, const std::string& color, bool thick) {
  std::map<double, std::vector<double>> at;
  for (const auto& run : r.runs)
    for (const auto& v : run.val) {
      const double y = p == 0 ? v.loss : v.top1;
      if (std::isfinite(y)) at[v.step].push_back(y);
    }
  svg::Series s;
  if (at.empty()) return s;
  s.name = r.status == "ok" ? r.label : r.label + " (" + r.status + ")";
  s.color = color;
  s.width = thick ? 3.0 : 1.3;
  s.marker = svg::Marker::None;
  s.band = r.runs.size() > 1;
  s.legend = p == 0;
  for (const auto& kv : at)
    s.points.push_back({kv.first, mean(kv.second), s.band ? min_of(kv.second) : NAN, s.band ? max_of(kv.second) : NAN});
  return s;
}

// Where a diverged run stopped: its last finite point.
svg::Series diverged_ends(const CompareRow& r, int p, const svg::Series& s) {
  svg::Series ends;
  ends.name = s.name + " diverged";
  ends.color = s.color;
  ends.line = false;
  ends.marker = svg::Marker::Cross;
  ends.legend = false;
  for (const auto& run : r.runs) {
    if (run.status != "diverged") continue;
    for (auto it = run.val.rbegin(); it != run.val.rend(); ++it) {
      const double y = p == 0 ? it->loss : it->top1;
      if (std::isfinite(y)) {
        ends.points.push_back({it->step, y});
        break;
      }
    }
  }
  return ends;
}

// The loss panel's y range follows the curves after their first tenth: the initial loss would otherwise
// flatten the part where the optimizers differ.
void widen_loss_range(const svg::Series& s, double* lo, double* hi) {
  const double last = s.points.back().x;
  for (const auto& pt : s.points) {
    *lo = std::min(*lo, s.band ? pt.lo : pt.y);
    if (pt.x >= 0.1 * last) *hi = std::max(*hi, pt.y);
  }
}

}  // namespace

svg::Figure compare_figure(const std::vector<CompareRow>& rows, bool top1, const std::string& title) {
  svg::Figure f;
  f.title = title;
  f.panel_width = top1 ? 620 : 820;
  f.panel_height = 460;
  const int panels = top1 ? 2 : 1;
  for (int p = 0; p < panels; p++) {
    svg::Panel panel;
    panel.line.y.label = p == 0 ? "validation loss" : "validation top-1 (%)";
    f.panels.push_back(panel);
  }
  std::map<std::string, std::vector<const CompareRow*>> by_opt;
  std::vector<std::string> opts;
  for (const auto& r : rows) {
    if (!by_opt.count(r.optimizer)) opts.push_back(r.optimizer);
    by_opt[r.optimizer].push_back(&r);
  }
  const std::map<std::string, const CompareRow*> best = best_per_optimizer(opts, by_opt);
  double lo = INFINITY, hi = -INFINITY;
  std::vector<double> per_step;
  std::string unit;
  for (const auto& o : opts) {
    const auto& rs = by_opt[o];
    for (size_t k = 0; k < rs.size(); k++) {
      const CompareRow& r = *rs[k];
      for (const auto& run : r.runs) {
        per_step.insert(per_step.end(), run.per_step.begin(), run.per_step.end());
        if (unit.empty()) unit = run.unit;
      }
      for (int p = 0; p < panels; p++) {
        const svg::Series s = mean_series(r, p, optimizer_color(o, k, rs.size()), best.at(o) == &r);
        if (s.points.empty()) continue;
        if (p == 0) widen_loss_range(s, &lo, &hi);
        f.panels[size_t(p)].line.series.push_back(s);
        const svg::Series ends = diverged_ends(r, p, s);
        if (!ends.points.empty()) f.panels[size_t(p)].line.series.push_back(ends);
      }
    }
  }
  if (lo < hi) {
    f.panels[0].line.y.lo = lo - 0.05 * (hi - lo);
    f.panels[0].line.y.hi = hi + 0.05 * (hi - lo);
  }
  std::string xlabel = "step";
  if (!per_step.empty()) xlabel += " (1 step = " + thousands(median(per_step)) + " " + unit + ")";
  for (auto& p : f.panels) p.line.x.label = xlabel;
  f.caption =
      "Mean over seeds; the band spans the seeds' min and max; the best configuration of each optimizer "
      "is thicker; x marks where a run diverged.";
  return f;
}

}  // namespace report
