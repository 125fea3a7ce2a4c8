// What the speed sections of `report pylo` share (pylo_sections.h): the experiment files' lines as rows, the
// order and colours of optimizers and models, the peers' lookups and the notes under the tables.
#include <algorithm>
#include <cmath>

#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"
#include "tools/report/pylo_sections.h"

namespace report {
namespace {

const std::vector<std::string> kOptOrder = {"adamw",         "adamw_foreach",      "adafactor", "muon",
                                            "small_fc_lopt", "small_fc_lopt:fast", "velo",      "celo2",
                                            "elo",           "elo:fast",           "elo_celo2"};
size_t opt_rank(const std::string& o) {
  const auto it = std::find(kOptOrder.begin(), kOptOrder.end(), o);
  return size_t(it - kOptOrder.begin());
}
// Model order: ViTs by size, GPT-2 by size, then the rest by name.
double model_key(const std::string& m) {
  static const std::map<std::string, double> order = {{"vit-ti16", 1},   {"vit-s16", 2},    {"vit-b16", 3},
                                                      {"vit-l16", 4},    {"gpt2-124m", 11}, {"gpt2-355m", 12},
                                                      {"gpt2-774m", 13}, {"gpt2-1558m", 14}};
  const auto it = order.find(m);
  return it == order.end() ? 100 : it->second;
}

}  // namespace

std::vector<std::string> optimizers_in(std::vector<std::string> v) {
  sort_unique(v);
  std::stable_sort(v.begin(), v.end(),
                   [](const std::string& a, const std::string& b) { return opt_rank(a) < opt_rank(b); });
  return v;
}
bool learned(const std::string& opt) {
  const std::string b = base_optimizer(opt);
  return b != "adamw" && b != "adamw_foreach" && b != "adafactor" && b != "muon";
}
std::string paper_impl(const std::string& opt) { return learned(opt) ? "cuda" : ""; }

std::vector<std::string> models_in(std::vector<std::string> v) {
  sort_unique(v);
  std::stable_sort(v.begin(), v.end(),
                   [](const std::string& a, const std::string& b) { return model_key(a) < model_key(b); });
  return v;
}

double peer_ms(const std::vector<StepRow>& peers, const std::string& model, const std::string& opt,
               const std::string& impl) {
  for (const auto& p : peers)
    if (p.model == model && p.optimizer == opt && p.impl == impl && p.error.empty()) return p.ms;
  return NAN;
}
std::string errors_note(const std::vector<NoNumber>& errors) {
  if (errors.empty()) return "";
  std::vector<NoNumber> lines;  // where: the WHEREs of one WHO and WHY, joined
  std::vector<size_t> counts;
  for (const auto& e : errors) {
    auto same = [&](const NoNumber& x) {
      return !e.where.empty() && !x.where.empty() && x.who == e.who && x.why == e.why;
    };
    const auto it = std::find_if(lines.begin(), lines.end(), same);
    if (it == lines.end()) {
      lines.push_back(e), counts.push_back(1);
    } else {
      it->where += "; " + e.where;
      counts[size_t(it - lines.begin())]++;
    }
  }
  std::string o = "\nRuns that gave no number:\n\n";
  for (size_t i = 0; i < lines.size(); i++) {
    const NoNumber& l = lines[i];
    o += "- " + l.who + (l.where.empty() ? "" : " on " + l.where) +
         (counts[i] > 1 ? " (" + std::to_string(counts[i]) + " runs)" : "") + ": " + l.why + "\n";
  }
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
  static const std::map<std::string, std::string> colors = {{"adamw", "#1f77b4"},
                                                            {"adafactor", "#9467bd"},
                                                            {"muon", "#2ca02c"},
                                                            {"small_fc_lopt", "#bcbd22"},
                                                            {"small_fc_lopt:fast", "#8c6d00"},
                                                            {"velo", "#ff7f0e"},
                                                            {"celo2", "#d62728"},
                                                            {"elo", "#8c564b"},
                                                            {"elo:fast", "#5a3a2e"},
                                                            {"elo_celo2", "#e377c2"},
                                                            {"adamw_foreach", "#17becf"}};
  const auto it = colors.find(opt);
  return it == colors.end() ? "#7f7f7f" : it->second;
}

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

}  // namespace report
