#include "tools/report/loss_plot.h"

#include <algorithm>
#include <cmath>

#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"

namespace report {

TrainLog train_log_of(const std::vector<Json>& lines) {
  TrainLog t;
  for (const Json& r : lines) {
    if (r.has("val_loss")) {
      const double v = num(r, "val_loss", NAN);
      if (!std::isfinite(v)) continue;
      t.vstep.push_back(num(r, "step", NAN));
      t.vloss.push_back(v);
      const double top1 = num(r, "val_top1", NAN);
      t.top1.push_back(100 * top1);
      t.has_top1 |= std::isfinite(top1);
    } else if (r.has("loss")) {
      const double v = num(r, "loss", NAN);
      if (!std::isfinite(v)) continue;
      t.step.push_back(num(r, "step", NAN));
      t.loss.push_back(v);
    }
  }
  return t;
}

std::vector<double> moving_average(const std::vector<double>& v, int k) {
  std::vector<double> out;
  double run = 0;
  for (size_t i = 0; i < v.size(); i++) {
    run += v[i] - (i >= size_t(k) ? v[i - size_t(k)] : 0.0);
    out.push_back(run / double(std::min(i + 1, size_t(k))));
  }
  return out;
}

svg::Figure loss_figure(const TrainLog& log, const std::string& title, int smooth) {
  svg::Figure f;
  f.title = title;
  f.panel_width = log.has_top1 ? 560 : 800;
  f.panel_height = 420;
  svg::Panel loss;
  loss.line.x.label = "step";
  loss.line.y.label = log.has_top1 ? "cross-entropy (nats per image)" : "cross-entropy (nats per token)";
  svg::Series raw{"train loss", {}, "#9ecae1", 0.7, true, svg::Marker::None};
  svg::Series avg{"train loss (" + std::to_string(smooth) + "-step mean)", {}, "#3182bd", 1.6, true, svg::Marker::None};
  const std::vector<double> a = moving_average(log.loss, smooth);
  for (size_t i = 0; i < log.step.size(); i++) {
    raw.points.push_back({log.step[i], log.loss[i]});
    avg.points.push_back({log.step[i], a[i]});
  }
  svg::Series val{"validation loss", {}, "#e6550d", 1.6, true, svg::Marker::Circle};
  for (size_t i = 0; i < log.vstep.size(); i++) val.points.push_back({log.vstep[i], log.vloss[i]});
  loss.line.series = {raw, avg, val};
  loss.line.legend_inside = true;
  std::vector<double> all = log.loss, head(log.loss.begin(), log.loss.begin() + std::min<size_t>(5, log.loss.size()));
  all.insert(all.end(), log.vloss.begin(), log.vloss.end());
  if (!log.vloss.empty()) head.push_back(log.vloss[0]);
  if (!all.empty()) {
    loss.line.y.lo = *std::min_element(all.begin(), all.end()) - 0.2;
    loss.line.y.hi = std::min(*std::max_element(head.begin(), head.end()) + 0.2, 12.0);
    if (!(loss.line.y.hi > loss.line.y.lo)) loss.line.y.hi = loss.line.y.lo + 1;
  }
  f.panels.push_back(loss);
  if (log.has_top1) {
    svg::Panel acc;
    acc.line.x.label = "step";
    acc.line.y.label = "validation top-1 (%)";
    svg::Series s{"validation top-1", {}, "#31a354", 1.6, true, svg::Marker::Square};
    for (size_t i = 0; i < log.vstep.size(); i++) s.points.push_back({log.vstep[i], log.top1[i]});
    for (auto it = log.top1.rbegin(); it != log.top1.rend(); ++it)
      if (std::isfinite(*it)) {
        s.name = "validation top-1 (last " + fixed(*it, 2) + "%)";
        break;
      }
    acc.line.series = {s};
    acc.line.legend_inside = true;
    f.panels.push_back(acc);
  }
  f.caption =
      std::to_string(log.step.size()) + " training steps, " + std::to_string(log.vstep.size()) + " validation points";
  return f;
}

}  // namespace report
