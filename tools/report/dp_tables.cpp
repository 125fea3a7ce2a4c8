#include "tools/report/dp_tables.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include "common/error.h"
#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"
#include "tools/report/pylo_sections.h"

namespace report {
namespace {

enum Mode { kOneGpu, kAllReduce, kSharded };

// One training run of the file: bench_gpt2.sh's or bench_vit.sh's line.
struct DpRun {
  std::string model, opt, qkv;  // qkv: "" where the run names none (ViT)
  long long B = 0, T = 0, world = 1;
  Mode mode = kOneGpu;
  double step_ms = NAN, rate = NAN;
  bool images = false;
};

std::vector<DpRun> dp_runs(const std::vector<Json>& lines) {
  static const std::regex qkv(R"((?:^|\s)--qkv[ =](\S+))");
  std::vector<DpRun> out;
  for (const Json& j : lines) {
    if (!j.has("model") || !is_num(j, "step_ms") || j.has("error")) continue;
    DpRun r;
    const std::string extra = str(j, "extra");
    std::smatch m;
    r.model = canonical_model(str(j, "model"));
    r.opt = optimizer_of_extra(extra);
    r.qkv = std::regex_search(extra, m, qkv) ? std::string(m[1]) : "";
    r.B = (long long)num(j, "B", 0);
    r.T = (long long)num(j, "T", 0);
    r.world = (long long)num(j, "world", 1);
    r.mode = extra.find("--shard 1") != std::string::npos ? kSharded : str(j, "launch").empty() ? kOneGpu : kAllReduce;
    r.step_ms = num(j, "step_ms", NAN);
    r.images = j.has("img_per_s");
    r.rate = num(j, r.images ? "img_per_s" : "tok_per_s", NAN);
    out.push_back(r);
  }
  return out;
}

bool table3_setting(const DpRun& r) { return r.model == "gpt2-124m" && r.B == 4 && !r.qkv.empty(); }
// The weak-scaling runs are of fused q/k/v (or of a model without the choice).
bool weak_layout(const DpRun& r) { return r.qkv.empty() || r.qkv == "fused"; }

// The first (Table 3) or last (weak scaling) run that `match` accepts; null when none.
template <class F>
const DpRun* pick(const std::vector<DpRun>& runs, bool last, F match) {
  const DpRun* found = nullptr;
  for (const DpRun& r : runs)
    if (match(r)) {
      found = &r;
      if (!last) break;
    }
  return found;
}

std::string step(const DpRun* r) { return r ? fixed(r->step_ms, 2) : ""; }
std::string signed_pct(double v) { return std::isfinite(v) ? (v >= 0 ? "+" : "") + fixed(v, 1) + "%" : kNone; }
std::string joined(const std::vector<std::string>& v) {
  std::string o;
  for (const std::string& s : v) o += (o.empty() ? "" : " / ") + (s.empty() ? std::string(kNone) : s);
  return o;
}
long long most_gpus(const std::vector<DpRun>& runs, bool (*in)(const DpRun&)) {
  long long w = 1;
  for (const DpRun& r : runs)
    if (in(r)) w = std::max(w, r.world);
  return w;
}
// NaN where either is missing: the faster of AdamW's two modes counts only when both ran.
double faster(const DpRun* a, const DpRun* b) { return a && b ? std::min(a->step_ms, b->step_ms) : double(NAN); }

std::string table3_paper(const Paper& paper, const std::string& opt) {
  auto value = [&](const std::string& o, const std::string& mode) {
    return paper.value({{"item", "table3"}, {"optimizer", base_optimizer(o)}, {"mode", mode}, {"impl", paper_impl(o)}});
  };
  const double ar = value(opt, "allreduce"), sh = value(opt, "sharded"), adamw = value("adamw", "sharded");
  if (!std::isfinite(ar) && !std::isfinite(sh)) return kNone;
  std::string o = fixed(ar, 2) + " / " + fixed(sh, 2);
  if (opt != "adamw" && std::isfinite(sh)) o += " (" + signed_pct(100.0 * (sh / adamw - 1.0)) + ")";
  return o;
}
}  // namespace

std::string dp_table3(const std::vector<Json>& lines, const Paper& paper) {
  const std::vector<DpRun> runs = dp_runs(lines);
  const long long W = most_gpus(runs, table3_setting);
  std::vector<std::string> qkvs, opts;
  for (const DpRun& r : runs)
    if (table3_setting(r)) {
      if (std::find(qkvs.begin(), qkvs.end(), r.qkv) == qkvs.end()) qkvs.push_back(r.qkv);
      opts.push_back(r.opt);
    }
  if (qkvs.empty()) return "";
  auto run = [&](const std::string& o, const std::string& q, Mode m) {
    return pick(runs, false, [&](const DpRun& r) {
      return table3_setting(r) && r.opt == o && r.qkv == q && r.mode == m && r.world == (m == kOneGpu ? 1 : W);
    });
  };
  MdTable t;
  const std::string w = std::to_string(W);
  t.head = {"optimizer",
            "q/k/v",
            "1 GPU",
            w + " all-reduce",
            w + " sharded",
            "over AdamW's best",
            "PyLO (" + paper.gpu("table3") + "): all-reduce / sharded"};
  for (const std::string& o : optimizers_in(opts)) {
    std::vector<std::string> one, ar, sh, over;
    for (const std::string& q : qkvs) {
      const DpRun* mine = run(o, q, kSharded);
      one.push_back(step(run(o, q, kOneGpu)));
      ar.push_back(step(run(o, q, kAllReduce)));
      sh.push_back(step(mine));
      const double best = faster(run("adamw", q, kAllReduce), run("adamw", q, kSharded));
      over.push_back(mine ? signed_pct(100.0 * (mine->step_ms / best - 1.0)) : "");
    }
    t.rows.push_back({optimizer_title(o), joined(qkvs), joined(one), joined(ar), joined(sh),
                      o == "adamw" ? kNone : joined(over), table3_paper(paper, o)});
  }
  return t.render();
}

std::string dp_weak(const std::vector<Json>& lines) {
  const std::vector<DpRun> runs = dp_runs(lines);
  auto weak = [](const DpRun& r) { return weak_layout(r) && r.mode == kAllReduce && r.opt == "adamw"; };
  std::vector<long long> worlds;
  std::vector<std::pair<std::string, long long>> configs;  // (model, B), in the order they first appear
  for (const DpRun& r : runs)
    if (weak(r)) {
      worlds.push_back(r.world);
      if (std::find(configs.begin(), configs.end(), std::make_pair(r.model, r.B)) == configs.end())
        configs.push_back({r.model, r.B});
    }
  if (configs.empty()) return "";
  sort_unique(worlds);
  const long long W = worlds.back();
  auto run = [&](const std::string& model, long long B, const std::string& o, Mode m, long long world) {
    return pick(runs, true, [&](const DpRun& r) {
      return weak_layout(r) && r.model == model && r.B == B && r.opt == o && r.mode == m && r.world == world;
    });
  };
  auto eff = [](const DpRun& r, const DpRun& one) {  // N-GPU rate over N x the one-GPU rate
    return fixed(100.0 * r.rate / (double(r.world) * one.rate), 1) + "%";
  };
  auto with_eff = [&](const DpRun* r, const DpRun* one) {
    return r && one ? fixed(r->step_ms, 2) + " (" + eff(*r, *one) + ")" : step(r);
  };
  auto label = [](const DpRun& r) {
    const std::string b = std::to_string(r.B);
    return model_title(r.model) + ", " + (r.images ? b + " images" : b + " × " + std::to_string(r.T) + " tokens");
  };

  MdTable t;
  t.head = {"per GPU", "1 GPU"};
  for (long long w : worlds)
    if (w > 1) t.head.push_back(std::to_string(w) + " GPUs");
  t.head.push_back(std::to_string(W) + " GPUs, sharded");
  for (const auto& [model, B] : configs) {
    const DpRun* one = run(model, B, "adamw", kOneGpu, 1);
    const DpRun* any = one ? one : run(model, B, "adamw", kAllReduce, W);
    std::vector<std::string> row = {any ? label(*any) : model, step(one)};
    for (long long w : worlds)
      if (w > 1) row.push_back(with_eff(run(model, B, "adamw", kAllReduce, w), one));
    row.push_back(with_eff(run(model, B, "adamw", kSharded, W), one));
    t.rows.push_back(row);
  }
  // Other optimizers run sharded outside Table 3's setting: against their own one GPU and AdamW's best mode.
  std::vector<const DpRun*> others;
  for (const DpRun& r : runs)
    if (weak_layout(r) && r.mode == kSharded && r.opt != "adamw" && !table3_setting(r) && r.world == W &&
        std::none_of(others.begin(), others.end(),
                     [&](const DpRun* o) { return o->model == r.model && o->B == r.B && o->opt == r.opt; }))
      others.push_back(&r);
  for (const DpRun* first : others) {
    const DpRun* sh = run(first->model, first->B, first->opt, kSharded, W);
    const DpRun* one = run(first->model, first->B, first->opt, kOneGpu, 1);
    const double best =
        faster(run(first->model, first->B, "adamw", kAllReduce, W), run(first->model, first->B, "adamw", kSharded, W));
    std::vector<std::string> row = {label(*sh) + ", " + optimizer_title(sh->opt), step(one)};
    for (long long w : worlds)
      if (w > 1) row.push_back("");
    row.push_back(fixed(sh->step_ms, 2) + " (" + (one ? eff(*sh, *one) + "; " : "") +
                  signed_pct(100.0 * (sh->step_ms / best - 1.0)) + " over AdamW's best)");
    t.rows.push_back(row);
  }
  return t.render();
}

std::string dp_tables(const std::vector<Json>& lines, const Paper& paper) {
  const std::string a = dp_table3(lines, paper), b = dp_weak(lines);
  if (a.empty() && b.empty())
    user_error(
        "the input holds no run of Table 3 (GPT-2 124M at B 4 with --qkv) nor an AdamW all-reduce "
        "run for weak scaling; give it the JSON lines of scripts/bench_data_parallel.sh.");
  return a + (a.empty() || b.empty() ? "" : "\n") + b;
}

}  // namespace report
