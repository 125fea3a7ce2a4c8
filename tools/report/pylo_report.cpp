#include "tools/report/pylo_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/cli.h"
#include "common/error.h"
#include "tools/report/compare.h"
#include "tools/report/jsonl.h"
#include "tools/report/markdown.h"
#include "tools/report/pylo_sections.h"
#include "tools/report/stats.h"

namespace report {
namespace {

// Every experiment, in the page's order: (name, kind, the paper's item it stands for).
struct ExpInfo {
  const char *name, *kind, *item;
};
const ExpInfo kExperiments[] = {
    {"setup_pylo_cuda", "single", "set-up: PyLO's CUDA extensions for the peers"},
    {"table2_step_breakdown", "single", "Table 2"},
    {"table9_step_throughput", "single", "Table 9"},
    {"fig1_vit_batch_breakdown", "single", "Figure 1"},
    {"fig5_optimizer_step_vs_size", "single", "Figure 5 (ours)"},
    {"fig5_peers", "single", "Figure 5 (peers)"},
    {"fig6_synthetic_mlp", "single", "Figure 6 (ours)"},
    {"fig6_peers", "single", "Figure 6 (peers)"},
    {"fig9_matrix_8192", "single", "Figure 9 (ours)"},
    {"fig9_peers", "single", "Figure 9 (peers)"},
    {"train_vit_fashion_mnist", "single", "Table 4, Figures 10-11 (scaled down)"},
    {"train_gpt2_english", "single", "Figures 10-11 for GPT-2 (scaled down)"},
    {"fig8_gpt2_schedule_wd", "single", "Figure 8 (scaled down)"},
    {"fig16_gpt2_qkv", "single", "Figure 16 (scaled down)"},
    {"configs_smoke", "single", "Table 4, Figures 8, 10-11, 16: the full configurations"},
    {"table3_data_parallel", "multi", "Table 3"},
};

std::string human_seconds(double s) {
  if (!std::isfinite(s)) return kNone;
  if (s < 120) return fixed(s, 0) + " s";
  return fixed(s / 60, 1) + " min";
}

// Validation loss (and top-1) by step: each configuration's mean over its seeds with error bars of one
// standard deviation (the seeds that finished).
svg::Figure seed_figure(const std::vector<CompareRow>& rows, bool top1, const std::string& title) {
  svg::Figure f;
  f.title = title;
  f.panel_width = top1 ? 600 : 800;
  f.panel_height = 440;
  for (int p = 0; p < (top1 ? 2 : 1); p++) {
    svg::Panel panel;
    panel.line.x.label = "step";
    panel.line.y.label = p == 0 ? "validation loss" : "validation top-1 (%)";
    // Configurations of one optimizer (Figure 8's four CELO2 runs) in shades of its colour and their own markers.
    std::map<std::string, size_t> of_optimizer, seen;
    for (const auto& r : rows) of_optimizer[r.optimizer]++;
    for (const auto& r : rows) {
      const size_t k = seen[r.optimizer]++;
      std::map<double, std::vector<double>> at;
      for (const auto& run : r.runs) {
        if (run.status != "ok") continue;
        for (const auto& v : run.val) {
          const double y = p == 0 ? v.loss : v.top1;
          if (std::isfinite(y)) at[v.step].push_back(y);
        }
      }
      if (at.empty()) continue;
      svg::Series s;
      s.name = r.label + " (" + std::to_string(r.final_loss.size()) + " seeds)";
      s.color = optimizer_color(r.optimizer, k, of_optimizer[r.optimizer]);
      const svg::Marker markers[] = {svg::Marker::Circle, svg::Marker::Square, svg::Marker::Cross};
      s.marker = markers[k % 3];
      s.legend = p == 0;
      for (const auto& kv : at) {
        const double m = mean(kv.second), sd = stddev(kv.second);
        s.points.push_back({kv.first, m, kv.second.size() > 1 ? m - sd : NAN, kv.second.size() > 1 ? m + sd : NAN});
      }
      panel.line.series.push_back(s);
    }
    if (p == 0) {  // the y range from the second tenth of the steps on: the start would flatten the rest
      double lo = INFINITY, hi = -INFINITY;
      for (const auto& s : panel.line.series) {
        const double last = s.points.back().x;
        for (const auto& pt : s.points) {
          lo = std::min(lo, std::isfinite(pt.lo) ? pt.lo : pt.y);
          if (pt.x >= 0.1 * last) hi = std::max(hi, std::isfinite(pt.hi) ? pt.hi : pt.y);
        }
      }
      if (lo < hi) panel.line.y.lo = lo - 0.05 * (hi - lo), panel.line.y.hi = hi + 0.05 * (hi - lo);
    }
    f.panels.push_back(panel);
  }
  f.caption = "Mean over the seeds that finished; error bars: one standard deviation over the seeds.";
  return f;
}

// A scaled-down training experiment (compare_optimizers.sh's logs under its logdir, `dir` under the report
// folder unless the experiment's header names another): the table over seeds, what it stands for (`about`,
// after the data's sentence), and a figure named after the folder (train/gpt2 -> train_gpt2.svg).
void section_training(PyloCtx& c, const std::string& name, const std::string& task, const std::string& dir,
                      const std::string& heading, const std::string& about = "") {
  const Experiment& e = c.exp(name);
  c.open_section(heading, e);
  for (const Json& j : e.lines)
    if (j.has("left_out")) c.md += "Left out: " + str(j, "left_out") + " (" + str(j, "why") + ").\n\n";
  const std::string rel = e.header_str("logdir").empty() ? dir : e.header_str("logdir");
  const std::string logdir = c.dir + "/" + rel;
  std::error_code ec;
  std::vector<CompareRun> runs;
  if (std::filesystem::is_directory(logdir, ec)) runs = read_compare_runs(logdir);
  if (runs.empty()) {
    c.md += "No training logs yet.\n\n";
    return;
  }
  const bool top1 = task == "vit";
  const std::vector<CompareRow> rows = summarise_runs(runs);
  const std::string steps = e.header_str("steps"), seeds = e.header_str("seeds");
  c.md += compare_table(rows, top1, "") + "\n";
  const std::string corpus = e.header_str("corpus");
  if (task == "vit") {
    c.md += "ViT-Ti/4 on Fashion-MNIST, train_vit's default recipe, " + steps + " steps of 256 images" +
            (e.quick ? " (the quick pass; the full pass trains the 9,400 steps of 40 epochs)" : "") + ", seeds " +
            seeds +
            ". The paper's Table 4 is ViT-B/16 on ImageNet (150k steps, batch 4096), which needs ImageNet and a "
            "multi-GPU node: its configuration is below (\"The full configurations\"). Its figures, for reference only "
            "(another model, data set and scale):\n\n";
    MdTable t;
    t.head = {"optimizer (paper, ImageNet)", "top-1 (%)", "source"};
    for (const Json& r : c.paper.rows())
      if (str(r, "item") == "table4")
        t.rows.push_back(
            {optimizer_title(str(r, "optimizer")) + (str(r, "schedule").empty() ? "" : " + " + str(r, "schedule")),
             fixed(num(r, "value", NAN), 2), str(r, "source")});
    c.md += t.render() + "\n";
  } else {
    const std::string what = about.empty() ? "The paper's GPT-2 runs train GPT-2 355M on FineWeb-Edu for far longer; "
                                             "their curves are not transcribed here, and their configuration is below."
                                           : about;
    c.md += "GPT-2 124M on the " +
            std::string(corpus == "kjv" ? "KJV (the English corpus was not there)" : "English corpus") + ", " + steps +
            " steps of 8 x 1024 tokens, seeds " + seeds +
            (e.quick ? " (the quick pass; the full pass: 800 steps)" : "") + ". " + what + "\n\n";
  }
  c.figure(seed_figure(rows, top1, ""), "train_" + rel.substr(rel.find_last_of('/') + 1), heading);
}

// What a configs_smoke entry is (its "name"), in the paper's terms; an unknown name as it is.
std::string config_title(const std::string& name) {
  static const std::map<std::string, std::string> titles = {
      {"table4_vit_b16_imagenet", "Table 4: ViT-B/16, ImageNet, 150k steps, batch 4096"},
      {"fig8_gpt2_355m_fineweb", "Figure 8: GPT-2 355M, FineWeb-Edu, 10k steps of 0.5M tokens"},
      {"fig10_gpt2_124m_fineweb", "Figures 10-11: GPT-2 124M, Figure 8's recipe"},
      {"fig10_gpt2_774m_fineweb", "Figures 10-11: GPT-2 774M, Figure 8's recipe"},
      {"fig16_gpt2_355m_fused", "Figure 16: Figure 8's run with q, k and v as one tensor"}};
  const auto it = titles.find(name);
  return it == titles.end() ? name : it->second;
}

void section_configs(PyloCtx& c) {
  const Experiment& e = c.exp("configs_smoke");
  c.open_section("The full configurations (Table 4, Figures 8, 10-11 and 16), for a user with the data and the GPUs",
                 e);
  std::vector<const Json*> configs;
  for (const Json& j : e.lines)
    if (j.has("config")) configs.push_back(&j.at("config"));
  if (configs.empty()) return c.no_data();
  MdTable t;
  t.head = {"what", "optimizer", "meta-weights in the test", "tested here", "the command"};
  for (size_t i = 0; i < configs.size(); i++) {
    const Json& k = *configs[i];
    std::string tested = "not run";
    if (i < e.runs.size()) {
      const Run& r = e.runs[i];
      tested = r.skipped     ? "not run (deadline)"
               : r.exit == 0 ? "3 steps, ok (" + fixed(r.wall_s, 0) + " s)"
                             : "failed, exit status " + std::to_string(r.exit);
    }
    t.rows.push_back({config_title(str(k, "name")), optimizer_title(str(k, "optimizer")), str(k, "weights"), tested,
                      "`" + str(k, "command") + "`"});
  }
  c.md += t.render();
  c.md +=
      "\nEach configuration ran here for 3 steps with everything but the data as a user runs it: train_vit on "
      "`--synthetic 1` images in place of the ImageNet shards, train_gpt2 on the KJV shards in place of "
      "FineWeb-Edu (`scripts/download_fineweb.sh`). With the data, the published weights "
      "(`scripts/download_lopt_weights.sh`) and 8 GPUs for ViT-B/16 (128 images per GPU, 4 micro-batches of "
      "accumulation; one GPU accumulates 32), the commands above are the paper's runs; for Figures 10-11's other "
      "sizes they take Figure 8's recipe (the same steps and tokens per step).\n\n";
}

// The page's head: the GPUs the experiments ran on and a table of every experiment of the kinds of machine
// present (added to `kinds`) with its status, runs and time, and a GPU column where they ran on several.
void page_head(PyloCtx& c, std::set<std::string>& kinds) {
  std::vector<std::string> gpus;  // in the page's order
  std::set<std::string> invocations;
  std::string started;
  bool quick = false;
  for (const auto& x : kExperiments) {
    const Experiment& e = c.exp(x.name);
    if (!e.present) continue;
    kinds.insert(x.kind);
    if (!e.gpu.empty() && std::find(gpus.begin(), gpus.end(), e.gpu) == gpus.end()) gpus.push_back(e.gpu);
    if (started.empty() || (!e.started.empty() && e.started < started)) started = e.started;
    quick |= e.quick;
    if (!e.invocation.empty()) invocations.insert(e.invocation);
  }
  if (kinds.empty()) kinds = {"single", "multi"};
  std::string on = gpus.empty() ? "(no GPU recorded yet)" : "";
  for (size_t i = 0; i < gpus.size(); i++)
    on += std::string(i == 0 ? "" : i + 1 == gpus.size() ? " and " : ", ") + "**" + gpus[i] + "**";
  if (gpus.size() > 1) on += " (the table names each experiment's)";
  c.md = "# The PyLO paper, reproduced\n\n";
  c.md += "Our programs on " + on + (started.empty() ? "" : ", from " + started) +
          (quick ? ", **the quick pass** (few sizes, few steps)" : "") +
          ". Each section: our figure, the paper's (its GPU named), the peer measured in the same run where there is "
          "one, the ratio, and the command that produced it with how long it ran. The paper: Janson et al., \"PyLO: "
          "Towards Accessible Learned Optimizers in PyTorch\" (arXiv 2506.10315); its figures as transcribed in "
          "`tools/report/pylo_paper.jsonl`. Written by `./report pylo` from the experiment files in `exp/`"
          " (`scripts/reproduce_pylo.sh`; docs/reproduce.md).\n\n";
  MdTable s;
  s.head = {"the paper's", "experiment", "status", "runs", "time"};
  s.align = {'l', 'l', 'l', 'r', 'r'};
  if (gpus.size() > 1) s.head.push_back("GPU"), s.align.push_back('l');
  double total = 0;
  for (const auto& x : kExperiments) {
    if (!kinds.count(x.kind)) continue;
    const Experiment& e = c.exp(x.name);
    int runs = 0;
    for (const auto& r : e.runs) runs += !r.skipped;
    total += e.wall_s;
    s.rows.push_back(
        {x.item, "`" + std::string(x.name) + "`", e.status == "skipped" ? "skipped: " + e.reason : e.status,
         e.present ? std::to_string(runs) + (e.failed ? " (" + std::to_string(e.failed) + " failed)" : "") : kNone,
         e.present ? human_seconds(e.wall_s) : kNone});
    if (gpus.size() > 1) s.rows.back().push_back(e.gpu.empty() ? kNone : e.gpu);
  }
  const std::string how = invocations.size() == 1 ? " (`" + *invocations.begin() + "`, resumed calls included)"
                          : invocations.empty()   ? ""
                                                  : " (the commands each section names, resumed calls included)";
  c.md += s.render() + "\nIn all: " + human_seconds(total) + " of runs" + how + ".\n\n";
}

}  // namespace

const Experiment& PyloCtx::exp(const std::string& name) {
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, read_experiment(dir, name)).first;
  return it->second;
}

void PyloCtx::figure(const svg::Figure& f, const std::string& name, const std::string& alt) {
  svg::write(f, out + "/" + name + ".svg");
  md += "\n![" + alt + "](" + name + ".svg)\n\n";
}

const Experiment& PyloCtx::on_same_gpu(const Experiment& ours, const std::string& name) {
  static const Experiment kAbsent;
  const Experiment& other = exp(name);
  if (!ours.present || !other.present || ours.gpu.empty() || other.gpu.empty() || ours.gpu == other.gpu) return other;
  md += "`" + name + "` ran on " + other.gpu + ", not on this section's " + ours.gpu +
        ": its numbers are left out here (a ratio between two kinds of GPU compares the GPUs, not the code).\n\n";
  return kAbsent;
}

void PyloCtx::open_section(const std::string& title, const Experiment& e, const Experiment* peers) {
  md += "## " + title + "\n\n" + (peers ? "Ours: " : "") + produced_by(e) + "\n\n";
  if (peers) md += "Peers: " + produced_by(*peers) + "\n\n";
}

std::string PyloCtx::produced_by(const Experiment& e) const {
  if (!e.present)
    return std::string(e.status == "interrupted"
                           ? "Experiment `" + e.name + "` was interrupted (a .part file); rerun to finish it."
                           : "Experiment `" + e.name + "` has not run in this folder.");
  std::string o = "Produced by `" + e.invocation + "` (experiment `" + e.name + "`): ";
  if (e.status == "skipped") return o + "**skipped**: " + e.reason + ".";
  int runs = 0;
  for (const auto& r : e.runs) runs += !r.skipped;
  o += std::to_string(runs) + (runs == 1 ? " run" : " runs");
  if (e.failed) o += " (" + std::to_string(e.failed) + " failed)";
  o += ", " + human_seconds(e.wall_s) + " on " + (e.gpu.empty() ? "an unnamed GPU" : e.gpu) + ", " + e.started;
  const std::string commits = e.commits();
  if (!commits.empty()) o += ", " + commits;
  o += "; status **" + e.status + "**" + (e.quick ? " (quick pass)" : "") + ".";
  if (!e.runs.empty()) {
    o += "\n\n<details><summary>its commands</summary>\n\n";
    for (const auto& r : e.runs)
      o += "- `" + r.cmd + "` — " +
           (r.skipped ? "not run (deadline)" : "exit " + std::to_string(r.exit) + ", " + fixed(r.wall_s, 1) + " s") +
           "\n";
    o += "\n</details>";
  }
  return o;
}

std::string write_pylo_report(const std::string& dir, const std::string& out, const std::string& paper_path) {
  PyloCtx c;
  c.dir = dir;
  c.out = out;
  c.paper = Paper::read(paper_path);
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  // The kinds of machine this folder's experiments ran on; sections of other kinds are left out.
  std::set<std::string> kinds;
  page_head(c, kinds);
  if (kinds.count("single")) {
    const Experiment& setup = c.exp("setup_pylo_cuda");
    if (setup.present && !setup.done())
      c.md += "PyLO's CUDA peers: " +
              (setup.status == "skipped" ? "not built here: " + setup.reason : "their build " + setup.status) +
              "; the sections below say where a peer is missing.\n\n";
    section_table2(c);
    section_table9(c);
    section_fig1(c);
    section_fig5(c);
    section_fig6(c);
    section_fig9(c);
    section_training(c, "train_vit_fashion_mnist", "vit", "train/vit",
                     "Table 4 and Figures 10-11, scaled down: ViT-Ti/4 on Fashion-MNIST, several seeds");
    section_training(c, "train_gpt2_english", "gpt2", "train/gpt2",
                     "Figures 10-11 for GPT-2, scaled down: GPT-2 124M, several seeds");
    section_training(
        c, "fig8_gpt2_schedule_wd", "gpt2", "train/gpt2_fig8",
        "Figure 8, scaled down: weight decay and the learning-rate schedule, GPT-2 124M, several seeds",
        "The paper's Figure 8 adds weight decay and a cosine schedule to its learned optimizers on GPT-2 355M "
        "(FineWeb-Edu); here CELO2, the learned optimizer with real weights, with and without weight decay "
        "(celo2.wd 0.1) under a constant and a cosine schedule, and AdamW for reference. The paper's curves "
        "are not transcribed here.");
    section_training(
        c, "fig16_gpt2_qkv", "gpt2", "train/gpt2_fig16",
        "Figure 16, scaled down: q, k and v as three tensors or one, GPT-2 124M, several seeds",
        "The paper's Figure 16 compares separate and fused q, k and v for its learned optimizers; a learned "
        "optimizer's per-tensor features (CELO2's orthogonalisation of each matrix) see three C x C matrices "
        "or one 3C x C, while AdamW differs only by rounding. The paper's curves are not transcribed here.");
    section_configs(c);
  }
  if (kinds.count("multi")) section_table3(c);
  std::ofstream f(out + "/report.md", std::ios::binary);
  if (!f) user_error("cannot write '", out, "/report.md'.");
  f << c.md;
  if (!f) user_error("writing '", out, "/report.md' failed (disk full?).");
  return c.md;
}

int cmd_pylo(int argc, char** argv) {
  std::string in, out, paper = "tools/report/pylo_paper.jsonl";
  Cli cli("report pylo",
          "The PyLO paper's tables and figures beside ours: OUT/report.md (a section per table or figure) and one SVG "
          "per figure, from the experiment files of scripts/reproduce_pylo.sh (DIR/exp/NAME.jsonl, DIR/train/) and the "
          "paper's figures.");
  cli.add('i', "input", &in, "the folder reproduce_pylo.sh wrote (--out of it)");
  cli.add(0, "out", &out, "where report.md and the SVGs go (default: the input folder)");
  cli.add(0, "paper", &paper, "the paper's figures (JSON lines)");
  if (!cli.parse(argc, argv)) return 0;
  if (in.empty()) user_error("-i DIR is needed (the folder scripts/reproduce_pylo.sh wrote).");
  if (out.empty()) out = in;
  std::error_code ec;
  if (!std::filesystem::is_directory(in, ec)) user_error("'", in, "' is not a folder.");
  write_pylo_report(in, out, paper);
  std::printf("wrote %s/report.md\n", out.c_str());
  return 0;
}

}  // namespace report
