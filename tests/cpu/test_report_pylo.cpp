// `report pylo` on fake experiment files (as scripts/reproduce_pylo.sh writes them): every section finds its
// numbers, sets the paper's beside them with its GPU, computes the ratios, names the command and the time, says
// why an experiment is missing, and writes well-formed SVGs with the right points and error bars.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "tests/cpu/xml_check.h"
#include "tests/test_util.h"
#include "tools/report/experiments.h"
#include "tools/report/jsonl.h"
#include "tools/report/pylo_report.h"
#include "tools/report/pylo_sections.h"

namespace {
using namespace report;

const char* kHead =
    "\"kind\":\"single\",\"quick\":true,\"gpu\":\"NVIDIA H100 80GB HBM3\",\"gpus\":1,\"commit\":\"abc1234\","
    "\"invocation\":\"scripts/reproduce_pylo.sh single --quick\",\"started\":\"2026-11-27T10:00:00Z\"";

std::string header(const std::string& name, const std::string& more = "") {
  return "{\"experiment\":{\"name\":\"" + name + "\",\"title\":\"t\"," + kHead + more + "}}\n";
}
std::string run_line(int exit, double wall) {
  return "{\"run\":{\"cmd\":\"scripts/bench_vit.sh vit-b16:32\",\"exit\":" + std::to_string(exit) +
         ",\"wall_s\":" + std::to_string(wall) + "}}\n";
}
std::string end_line(const std::string& status, double wall, int runs, int failed) {
  return "{\"experiment_end\":{\"status\":\"" + status + "\",\"wall_s\":" + std::to_string(wall) +
         ",\"runs\":" + std::to_string(runs) + ",\"failed\":" + std::to_string(failed) + "}}\n";
}
std::string vit_line(const std::string& extra, double step, double opt, double fwd, double bwd, int B = 32) {
  return "{\"model\":\"vit-b16\",\"params_m\":86.57,\"B\":" + std::to_string(B) +
         ",\"img_per_s\":3000.0,\"mfu\":0.3,\"step_ms\":" + std::to_string(step) +
         ",\"opt_ms\":" + std::to_string(opt) + ",\"fwd_ms\":" + std::to_string(fwd) +
         ",\"bwd_ms\":" + std::to_string(bwd) +
         ",\"loss_ms\":0.5,\"profile_steps\":7,\"gpu\":\"NVIDIA H100 80GB HBM3\","
         "\"extra\":\"" +
         extra + "\",\"timed_steps\":7}\n";
}
std::string step_line(const std::string& bench, const std::string& impl, const std::string& model, long long params,
                      const std::string& opt, double ms) {
  return "{\"bench\":\"" + bench + "\"," + (impl.empty() ? "" : "\"impl\":\"" + impl + "\",") + "\"model\":\"" + model +
         "\",\"params\":" + std::to_string(params) + ",\"optimizer\":\"" + opt +
         "\",\"median_ms\":" + std::to_string(ms) + ",\"pct_of_floor\":90.0}\n";
}

struct FakeRun {
  std::string dir = make_temp_dir();
  FakeRun() {
    std::filesystem::create_directories(dir + "/exp");
    std::filesystem::create_directories(dir + "/train/vit");
    write_file(dir + "/exp/table2_step_breakdown.jsonl",
               header("table2_step_breakdown") + vit_line("-o adamw", 10, 1, 2.5, 6) + run_line(0, 9) +
                   vit_line("-o velo --lopt-random 1", 12, 2, 2.5, 6) + run_line(0, 11) +
                   "{\"model\":\"vit-b16\",\"params_m\":null,\"B\":32,\"gpu\":null,\"extra\":\"-o small_fc_lopt --set "
                   "small_fc_lopt.fast=1 --lopt-random 1\",\"error\":\"out of GPU memory\",\"exit_status\":1}\n" +
                   run_line(0, 5) + end_line("ok", 42, 3, 0));
    write_file(dir + "/exp/fig5_optimizer_step_vs_size.jsonl",
               header("fig5_optimizer_step_vs_size") +
                   step_line("optim_step", "", "gpt2-124m", 124439808, "adamw", 1.3) +
                   step_line("optim_step", "", "gpt2-355m", 354823168, "adamw", 3.46) +
                   step_line("optim_step", "", "gpt2-124m", 124439808, "velo", 3.6) +
                   step_line("optim_step", "", "gpt2-355m", 354823168, "velo", 9.41) + run_line(0, 20) +
                   end_line("ok", 20, 1, 0));
    write_file(
        dir + "/exp/fig5_peers.jsonl",
        header("fig5_peers") + step_line("peer_optim_step", "pylo_cuda", "gpt2-355m", 354823168, "velo", 446.4) +
            step_line("peer_optim_step", "torch", "gpt2-355m", 354823168, "adamw", 5.41) +
            "{\"bench\":\"peer_optim_step\",\"impl\":\"jax_lopt\",\"optimizer\":\"velo\",\"model\":\"gpt2-355m\","
            "\"error\":\"JAX peer unavailable: ModuleNotFoundError\"}\n" +
            run_line(0, 30) + end_line("ok", 30, 1, 0));
    write_file(
        dir + "/exp/fig6_peers.jsonl",
        header("fig6_peers") +
            "{\"experiment_end\":{\"status\":\"skipped\",\"wall_s\":0,\"runs\":0,\"failed\":0,\"reason\":\"no PyLO "
            "source at .deps/pylo\"}}\n");
    // Table 3: one GPU, all-reduce and sharded, AdamW and VeLO.
    const std::string dp = "\"launch\":\"mpirun --allow-run-as-root --bind-to none -np 4\",\"world\":4,";
    auto dp_line = [](const std::string& launch, const std::string& extra, double step) {
      return "{\"model\":\"d12\",\"params_m\":124.4,\"B\":4,\"T\":1024," + launch +
             "\"tok_per_s\":1.0,\"mfu\":0.3,\"step_ms\":" + std::to_string(step) +
             ",\"opt_ms\":1.0,\"gpu\":\"NVIDIA H100 80GB HBM3\",\"extra\":\"" + extra + "\",\"timed_steps\":9}\n";
    };
    write_file(dir + "/exp/table3_data_parallel.jsonl",
               header("table3_data_parallel", ",\"world\":\"4\"") + dp_line("", "-o adamw --qkv separate", 10.2) +
                   dp_line(dp, "-o adamw --qkv separate --nccl 1", 12.4) +
                   dp_line(dp, "-o adamw --qkv separate --shard 1", 13.0) +
                   dp_line(dp, "-o velo --lopt-random 1 -l 0.01 --qkv separate --shard 1", 14.0) + run_line(0, 60) +
                   end_line("ok", 60, 1, 0));
    // The scaled-down ViT runs: 3 seeds of one configuration.
    for (int seed = 1; seed <= 3; seed++) {
      std::string s =
          "{\"compare_run\":{\"task\":\"vit\",\"label\":\"adamw_lr5e-4\",\"optimizer\":\"adamw\",\"flags\":\"-l "
          "5e-4\",\"seed\":" +
          std::to_string(seed) + ",\"steps\":400}}\n";
      for (int v = 0; v < 3; v++)
        s += "{\"step\":" + std::to_string(v * 200) + ",\"val_loss\":" + std::to_string(2.0 - 0.5 * v + 0.1 * seed) +
             ",\"val_top1\":" + std::to_string(0.5 + 0.1 * v) + "}\n";
      s += "{\"compare_end\":{\"status\":\"ok\",\"exit\":0,\"wall_s\":10.0}}\n";
      write_file(dir + "/train/vit/adamw_lr5e-4_s" + std::to_string(seed) + ".jsonl", s);
    }
    write_file(dir + "/exp/train_vit_fashion_mnist.jsonl",
               header("train_vit_fashion_mnist", ",\"logdir\":\"train/vit\",\"steps\":\"400\",\"seeds\":\"1 2 3\"") +
                   run_line(0, 40) + end_line("ok", 40, 1, 0));
    write_file(
        dir + "/exp/configs_smoke.jsonl",
        header("configs_smoke") +
            "{\"config\":{\"name\":\"table4_vit_b16_imagenet\",\"optimizer\":\"velo\",\"command\":\"mpirun -np 8 "
            "./train_vit -o velo -e vit-b16\",\"weights\":\"published (weights/)\"}}\n" +
            run_line(0, 14) +
            "{\"config\":{\"name\":\"fig8_gpt2_355m_fineweb\",\"optimizer\":\"velo\",\"command\":\"./train_gpt2 -o "
            "velo -e d24\",\"weights\":\"published (weights/)\"}}\n" +
            run_line(1, 3) +
            "{\"config\":{\"name\":\"fig16_gpt2_355m_fused\",\"optimizer\":\"velo\",\"command\":\"./train_gpt2 -o "
            "velo -e d24 --qkv fused\",\"weights\":\"published (weights/)\"}}\n" +
            run_line(0, 21) + end_line("partial", 38, 3, 1));
  }
};

TEST(ReportPylo, SectionsNumbersAndRatios) {
  FakeRun f;
  const std::string md = write_pylo_report(f.dir, f.dir, "tools/report/pylo_paper.jsonl");
  for (const char* h : {"## Table 2:", "## Table 9:", "## Figure 1:", "## Figure 5:", "## Figure 6:", "## Figure 9:",
                        "## Table 4 and Figures 10-11", "## Figures 10-11 for GPT-2", "## Figure 8, scaled down",
                        "## Figure 16, scaled down", "## The full configurations", "## Table 3:"})
    EXPECT_NE(md.find(h), std::string::npos) << h;
  // Table 2: forward = 2.5 + the loss's 0.5; the paper's A100 figures; paper / ours = 4.90 / 1.0 and 113.58 / 2.
  EXPECT_NE(md.find("| ViT-B/16 | 32 | AdamW | 3.00 | 6.00 | 1.00 | 10.0 | 17.5 / 38.1 / 4.90 | 4.9× |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| ViT-B/16 | 32 | VeLO | 3.00 | 6.00 | 2.00 | 12.0 | 17.5 / 38.1 / 114 | 56.8× |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("NVIDIA A100"), std::string::npos);
  EXPECT_NE(md.find("small_fc_lopt (fast): out of GPU memory"), std::string::npos) << "a failed run says why";
  // Who produced it, how long it ran.
  EXPECT_NE(
      md.find("Produced by `scripts/reproduce_pylo.sh single --quick` (experiment `table2_step_breakdown`): 3 runs, "
              "42 s on NVIDIA H100 80GB HBM3"),
      std::string::npos)
      << md;
  // Figure 5: the same-run PyLO CUDA peer, the ratio, the paper's 355M point.
  EXPECT_NE(md.find("| GPT-2 355M | 354.8M | VeLO | 9.41 | 90% | 446 | – | – | – | 47.4× | 284 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| GPT-2 355M | 354.8M | AdamW | 3.46 | 90% | – | – | 5.41 | – | – | 20.1 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("JAX learned_optimization VeLO on GPT-2 355M: JAX peer unavailable"), std::string::npos);
  // A skipped experiment says why; one that never ran says so.
  EXPECT_NE(md.find("**skipped**: no PyLO source at .deps/pylo."), std::string::npos);
  EXPECT_NE(md.find("Experiment `fig9_matrix_8192` has not run in this folder."), std::string::npos);
  // Table 3: sharded VeLO 14.0 against AdamW's 13.0 (+7.7%); the paper's 108.71 against 95.93 (+13.3%), 4 x H100.
  EXPECT_NE(md.find("| VeLO | – | – | 14.0 | 7.7% | 128 / 109 | 13.3% | 7.8× |"), std::string::npos) << md;
  EXPECT_NE(md.find("| AdamW | 10.2 | 12.4 | 13.0 | – |"), std::string::npos) << md;
  EXPECT_NE(md.find("4 x NVIDIA H100"), std::string::npos);
  // The scaled-down training table: 3 seeds, mean ± std of the final loss (1.1, 1.2, 1.3).
  EXPECT_NE(md.find("| adamw_lr5e-4 | adamw | 5e-4 | 1 2 3 | 1.2000 ± 0.1000 |"), std::string::npos) << md;
  EXPECT_NE(
      md.find(
          "| Table 4: ViT-B/16, ImageNet, 150k steps, batch 4096 | VeLO | published (weights/) | 3 steps, ok (14 s) |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("failed, exit status 1"), std::string::npos);
  EXPECT_NE(
      md.find("| Figure 16: Figure 8's run with q, k and v as one tensor | VeLO | published (weights/) | 3 steps, ok "
              "(21 s) |"),
      std::string::npos)
      << md;
  EXPECT_EQ(read_file(f.dir + "/report.md"), md);
}

// Runs that failed alike on several models (one peer missing on every size) share a line; the others, and those
// of no model, keep theirs, in order.
TEST(ReportPylo, RunsThatFailedAlikeShareALine) {
  const std::string note = errors_note({{"JAX VeLO", "MLP 128 wide, 1 layer", "JAX peer unavailable: no module"},
                                        {"ours VeLO", "MLP 8192 wide, 1 layer", "out of GPU memory"},
                                        {"JAX VeLO", "MLP 256 wide, 1 layer", "JAX peer unavailable: no module"},
                                        {"JAX VeLO", "GPT-2 124M", "timed out"},
                                        {"batch 8 AdamW", "", "exit status 1"},
                                        {"batch 8 AdamW", "", "exit status 1"}});
  EXPECT_EQ(note,
            "\nRuns that gave no number:\n\n"
            "- JAX VeLO on MLP 128 wide, 1 layer; MLP 256 wide, 1 layer (2 runs): JAX peer unavailable: no module\n"
            "- ours VeLO on MLP 8192 wide, 1 layer: out of GPU memory\n"
            "- JAX VeLO on GPT-2 124M: timed out\n"
            "- batch 8 AdamW: exit status 1\n"
            "- batch 8 AdamW: exit status 1\n");
  EXPECT_EQ(errors_note({}), "");
}

TEST(ReportPylo, FiguresAreWellFormedWithErrorBars) {
  FakeRun f;
  write_pylo_report(f.dir, f.dir, "tools/report/pylo_paper.jsonl");
  for (const char* name : {"table2", "fig5", "table3", "train_vit"}) {
    const std::string svg = read_file(f.dir + "/" + name + ".svg");
    ASSERT_FALSE(svg.empty()) << name;
    EXPECT_NO_THROW(xml_check::Reader r(svg)) << name;
  }
  // Figure 5: ours (AdamW, VeLO: 2 points each), the PyLO and torch peers (1 each), the paper's 355M points (6).
  const xml_check::Reader fig5(read_file(f.dir + "/fig5.svg"));
  EXPECT_EQ(fig5.with_class("point").size(), 2u + 2u + 1u + 1u + 6u);
  // The training figure: 3 validations of 3 seeds, an error bar of one std at each (loss and top-1 panels).
  const xml_check::Reader tv(read_file(f.dir + "/train_vit.svg"));
  const auto bars = tv.with_class("errorbar");
  ASSERT_EQ(bars.size(), 6u);
  const auto areas = tv.with_class("plot-area");
  ASSERT_EQ(areas.size(), 2u);
  // Table 2's chart: ours and the paper's bars for AdamW and VeLO, three segments each.
  const xml_check::Reader t2(read_file(f.dir + "/table2.svg"));
  EXPECT_EQ(t2.with_class("bar").size(), 12u);
}

// The GPT-2 training experiments each read their own folder: Figure 8's logs are its own, and Figure 16, not
// run, shows none although the comparison's folder beside it has logs.
TEST(ReportPylo, TrainingSectionsReadTheirOwnFolders) {
  FakeRun f;
  auto logs = [&](const std::string& sub, const std::string& label, double loss) {
    std::filesystem::create_directories(f.dir + "/" + sub);
    for (int seed = 1; seed <= 3; seed++)
      write_file(f.dir + "/" + sub + "/" + label + "_s" + std::to_string(seed) + ".jsonl",
                 "{\"compare_run\":{\"task\":\"gpt2\",\"label\":\"" + label +
                     "\",\"optimizer\":\"celo2\",\"flags\":\"-l 1e-3\",\"seed\":" + std::to_string(seed) +
                     ",\"steps\":60}}\n{\"step\":60,\"val_loss\":" + std::to_string(loss + 0.01 * seed) +
                     "}\n{\"compare_end\":{\"status\":\"ok\",\"exit\":0,\"wall_s\":5.0}}\n");
  };
  logs("train/gpt2", "celo2_lr1e-3", 4.6);
  logs("train/gpt2_fig8", "celo2_constant_wd", 4.7);
  write_file(f.dir + "/exp/fig8_gpt2_schedule_wd.jsonl",
             header("fig8_gpt2_schedule_wd", ",\"logdir\":\"train/gpt2_fig8\",\"steps\":\"60\",\"seeds\":\"1 2 3\"") +
                 run_line(0, 20) + end_line("ok", 20, 1, 0));
  const std::string md = write_pylo_report(f.dir, f.dir, "tools/report/pylo_paper.jsonl");
  const size_t fig8 = md.find("## Figure 8, scaled down"), fig16 = md.find("## Figure 16, scaled down");
  ASSERT_NE(fig8, std::string::npos);
  ASSERT_NE(fig16, std::string::npos);
  const std::string s8 = md.substr(fig8, fig16 - fig8), s16 = md.substr(fig16, md.find("\n## ", fig16 + 1) - fig16);
  EXPECT_NE(s8.find("| celo2_constant_wd | celo2 |"), std::string::npos) << s8;
  EXPECT_EQ(s8.find("celo2_lr1e-3"), std::string::npos) << "Figure 8 read the comparison's logs";
  EXPECT_NE(s16.find("No training logs yet."), std::string::npos) << s16;
  EXPECT_TRUE(std::filesystem::exists(f.dir + "/train_gpt2_fig8.svg"));
  EXPECT_FALSE(std::filesystem::exists(f.dir + "/train_gpt2_fig16.svg"));
}

// Figure 8's configurations are all CELO2's: each line has a colour of its own (shades of CELO2's).
TEST(ReportPylo, ConfigurationsOfOneOptimizerAreToldApart) {
  FakeRun f;
  for (const char* label : {"celo2_constant", "celo2_constant_wd", "celo2_cosine"}) {
    std::filesystem::create_directories(f.dir + "/train/gpt2_fig8");
    for (int seed = 1; seed <= 2; seed++)
      write_file(f.dir + "/train/gpt2_fig8/" + label + "_s" + std::to_string(seed) + ".jsonl",
                 "{\"compare_run\":{\"task\":\"gpt2\",\"label\":\"" + std::string(label) +
                     "\",\"optimizer\":\"celo2\",\"flags\":\"-l 1e-3\",\"seed\":" + std::to_string(seed) +
                     ",\"steps\":60}}\n{\"step\":30,\"val_loss\":5.0}\n{\"step\":60,\"val_loss\":4.7}\n"
                     "{\"compare_end\":{\"status\":\"ok\",\"exit\":0,\"wall_s\":5.0}}\n");
  }
  write_file(f.dir + "/exp/fig8_gpt2_schedule_wd.jsonl",
             header("fig8_gpt2_schedule_wd", ",\"logdir\":\"train/gpt2_fig8\",\"steps\":\"60\",\"seeds\":\"1 2\"") +
                 run_line(0, 20) + end_line("ok", 20, 1, 0));
  write_pylo_report(f.dir, f.dir, "tools/report/pylo_paper.jsonl");
  const xml_check::Reader svg(read_file(f.dir + "/train_gpt2_fig8.svg"));
  std::set<std::string> colors;
  for (const auto* e : svg.with_class("series")) colors.insert(e->attr.at("stroke"));
  EXPECT_EQ(colors.size(), 3u);
}

// A resumed experiment carries the runs of its earlier call, which may have run at another commit: the report
// names each commit with its runs, in the order they ran (the run lines say, scripts/reproduce_pylo.sh).
TEST(ReportPylo, ResumedExperimentNamesEachCommit) {
  const auto run_at = [](const std::string& commit) {
    return "{\"run\":{\"cmd\":\"c\",\"exit\":0,\"wall_s\":1,\"commit\":\"" + commit + "\"}}\n";
  };
  const auto e = experiment_of(
      parse_json_lines(header("x") + run_at("0d6155c") + run_at("0d6155c") + run_at("abc1234") +
                           "{\"run\":{\"cmd\":\"c\",\"exit\":null,\"wall_s\":0,\"skipped\":\"the deadline\"}}\n" +
                           end_line("stopped", 3, 4, 0),
                       "t"),
      "x");
  EXPECT_EQ(e.commits(), "commits 0d6155c (2 runs), abc1234 (1 run)");
  PyloCtx c;
  EXPECT_NE(c.produced_by(e).find(", commits 0d6155c (2 runs), abc1234 (1 run); status **stopped**"), std::string::npos)
      << c.produced_by(e);
}

// Experiments that ran on two kinds of GPU (a pass resumed on another machine): the page names both and each
// experiment's, and no section joins numbers across them (Figure 5's peers, Table 2's batch 32 in Figure 1),
// while experiments of one GPU still join (the control).
TEST(ReportPylo, ExperimentsOfTwoGpusAreNotJoined) {
  const auto on = [](std::string text, const std::string& gpu) {
    const std::string h100 = "NVIDIA H100 80GB HBM3";
    for (size_t at = text.find(h100); at != std::string::npos; at = text.find(h100, at + gpu.size()))
      text.replace(at, h100.size(), gpu);
    return text;
  };
  const auto fig1 = [&](const std::string& gpu) {
    return on(header("fig1_vit_batch_breakdown") + vit_line("-o adamw", 20, 1, 5, 12, 64) + run_line(0, 9) +
                  end_line("ok", 9, 1, 0),
              gpu);
  };
  const std::string peers = read_file(FakeRun().dir + "/exp/fig5_peers.jsonl");
  for (const bool two : {false, true}) {
    FakeRun f;
    const std::string gpu = two ? "NVIDIA H200" : "NVIDIA H100 80GB HBM3";
    write_file(f.dir + "/exp/fig5_peers.jsonl", on(peers, gpu));
    write_file(f.dir + "/exp/fig1_vit_batch_breakdown.jsonl", fig1(gpu));
    const std::string md = write_pylo_report(f.dir, f.dir, "tools/report/pylo_paper.jsonl");
    const size_t f1 = md.find("## Figure 1:"), f5 = md.find("## Figure 5:");
    ASSERT_NE(f1, std::string::npos);
    ASSERT_NE(f5, std::string::npos);
    const std::string s1 = md.substr(f1, f5 - f1), s5 = md.substr(f5, md.find("\n## ", f5 + 1) - f5);
    EXPECT_EQ(
        md.find("Our programs on **NVIDIA H100 80GB HBM3** and **NVIDIA H200** (the table names each experiment's)") !=
            std::string::npos,
        two)
        << md.substr(0, 600);
    EXPECT_EQ(md.find("| Figure 5 (peers) | `fig5_peers` | ok | 1 | 30 s | NVIDIA H200 |") != std::string::npos, two);
    EXPECT_EQ(
        s5.find("`fig5_peers` ran on NVIDIA H200, not on this section's NVIDIA H100 80GB HBM3") != std::string::npos,
        two)
        << s5;
    EXPECT_EQ(s5.find("| GPT-2 355M | 354.8M | VeLO | 9.41 | 90% | 446 |") != std::string::npos, !two) << s5;
    EXPECT_EQ(s1.find("| 32 | AdamW |") != std::string::npos, !two) << s1;
    EXPECT_EQ(s1.find("Batch 32 here is Table 2's run.") != std::string::npos, !two) << s1;
    EXPECT_NE(s1.find("| 64 | AdamW |"), std::string::npos) << s1;
  }
}

TEST(ReportPylo, ExperimentFilesAndNames) {
  const auto e = experiment_of(
      parse_json_lines(header("x") + "{\"model\":\"d12\"}\n" + run_line(2, 1.5) +
                           "{\"run\":{\"cmd\":\"c\",\"exit\":null,\"wall_s\":0,\"skipped\":\"the deadline\"}}\n",
                       "t"),
      "x");
  EXPECT_EQ(e.status, "interrupted") << "no end line";
  EXPECT_EQ(e.runs.size(), 2u);
  EXPECT_EQ(e.failed, 1);
  EXPECT_TRUE(e.runs[1].skipped);
  EXPECT_EQ(e.lines.size(), 1u);
  EXPECT_EQ(e.gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(e.quick);
  EXPECT_EQ(e.commits(), "commit abc1234") << "runs without a commit of their own ran at the header's";
  EXPECT_EQ(optimizer_of_extra("-o small_fc_lopt --set small_fc_lopt.fast=1 --lopt-random 1"), "small_fc_lopt:fast");
  EXPECT_EQ(optimizer_of_extra("--qkv fused"), "adamw");
  EXPECT_EQ(optimizer_of_extra("-o velo -l 0.01"), "velo");
  EXPECT_EQ(optimizer_of_extra("-o velo --set velo.bf16_record=1"), "velo:rec16");
  EXPECT_EQ(optimizer_of_extra("-o small_fc_lopt --set small_fc_lopt.fast=1 --set small_fc_lopt.bf16_record=1"),
            "small_fc_lopt:fast:rec16");
  EXPECT_EQ(optimizer_of_extra("-o velo --set small_fc_lopt.bf16_record=1"), "velo");  // another optimizer's
  EXPECT_EQ(optimizer_title("small_fc_lopt:fast:rec16"), "small_fc_lopt (fast), bf16 records");
  EXPECT_EQ(optimizer_title("velo:rec16"), "VeLO, bf16 records");
  EXPECT_EQ(canonical_model("d24"), "gpt2-355m");
  EXPECT_EQ(model_title("vit-ti16"), "ViT-Ti/16");
  EXPECT_EQ(model_title("mlp-w4096-d4"), "MLP 4096 wide, 4 layers");
  EXPECT_EQ(model_title("mat-8192x8192"), "8192 x 8192 matrix");
  const Paper p = Paper::read("tools/report/pylo_paper.jsonl");
  EXPECT_DOUBLE_EQ(p.value({{"item", "table3"}, {"optimizer", "velo"}, {"mode", "sharded"}}), 108.71);
  EXPECT_EQ(p.gpu("table3"), "4 x NVIDIA H100");
  EXPECT_TRUE(std::isnan(p.value({{"item", "table2"}, {"optimizer", "muon"}})));
}

}  // namespace
