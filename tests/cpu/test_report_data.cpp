// The report tool's numbers: statistics over seeds and steps, JSON lines in and out, markdown tables, the
// bench scripts' summary line (report median), a training log's curves and the optimizer comparison's table.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/test_util.h"
#include "tools/report/bench_line.h"
#include "tools/report/compare.h"
#include "tools/report/jsonl.h"
#include "tools/report/loss_plot.h"
#include "tools/report/markdown.h"
#include "tools/report/stats.h"

namespace {
using namespace report;

TEST(ReportStats, MedianMeanStd) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);  // the mean of the middle two, as Python's statistics.median
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
  // statistics.stdev([2, 4, 4, 4, 5, 5, 7, 9]) = 2.138089935299395 (sample, n - 1)
  EXPECT_NEAR(stddev({2, 4, 4, 4, 5, 5, 7, 9}), 2.138089935299395, 1e-15);
  EXPECT_EQ(stddev({5}), 0);
  const Spread s = spread({1, 5, 3});
  EXPECT_EQ(s.n, 3);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 5);
  EXPECT_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.std, 2);
}

TEST(ReportMarkdown, TablesAndNumbers) {
  MdTable t;
  t.head = {"model", "ms"};
  t.align = {'l', 'r'};
  t.rows = {{"a|b", "1.5"}, {"short"}};
  EXPECT_EQ(t.render(), "| model | ms |\n|---|---:|\n| a\\|b | 1.5 |\n| short |  |\n");
  EXPECT_EQ(fixed(3.14159, 2), "3.14");
  EXPECT_EQ(fixed(-0.0001, 2), "0.00");
  EXPECT_EQ(fixed(NAN, 2), kNone);
  EXPECT_EQ(thousands(545599.7), "545,600");
  EXPECT_EQ(thousands(-1234), "-1,234");
  EXPECT_EQ(thousands(999), "999");
  EXPECT_EQ(significant(0.000123456, 3), "0.000123");
  EXPECT_EQ(significant(12.3456, 3), "12.3");
  EXPECT_EQ(significant(123456, 3), "123,456");
  EXPECT_EQ(mean_std({0.9, 1.0}, 4), "0.9500 ± 0.0707");
  EXPECT_EQ(mean_std({1.3}, 4), "1.3000");
  EXPECT_EQ(mean_std({}, 4), "");
  EXPECT_EQ(ratio(10, 4), "2.50×");
  EXPECT_EQ(ratio(1, 0), kNone);
}

TEST(ReportJson, LinesInAndOut) {
  const auto rows = parse_json_lines("{\"a\":1}\n\n{\"b\":\"x\",\"c\":null}\n{\"cut", "test");
  ASSERT_EQ(rows.size(), 2u) << "a cut last line is dropped";
  EXPECT_EQ(num(rows[0], "a", 0), 1);
  EXPECT_TRUE(std::isnan(num(rows[1], "c", NAN)));
  EXPECT_EQ(str(rows[1], "b"), "x");
  expect_user_error([] { parse_json_lines("{\"a\":1}\n{bad}\n{\"b\":2}\n", "the log"); }, "the log, line 2");
  expect_user_error([] { parse_json_lines("{\"cut", "x", false); }, "line 1");
  const Json nested = parse_json("{\"a\":{\"b\":{\"c\":5}}}", "t");
  ASSERT_NE(find(nested, "a.b.c"), nullptr);
  EXPECT_EQ(find(nested, "a.b.c")->num, 5);
  EXPECT_EQ(find(nested, "a.x"), nullptr);
  // Numbers as Python writes round(x, d): trailing zeros dropped, one decimal kept.
  EXPECT_EQ(json_number(554124.44, 1), "554124.4");
  EXPECT_EQ(json_number(118.0, 3), "118.0");
  EXPECT_EQ(json_number(0.45, 4), "0.45");
  EXPECT_EQ(json_number(INFINITY, 2), "null");
  JsonOut o;
  o.add("z", "a\"b").add("a", 1.5, 2).add_int("n", 3).add_null("x");
  EXPECT_EQ(o.str(), "{\"z\":\"a\\\"b\",\"a\":1.5,\"n\":3,\"x\":null}");
}

// A fake run of train_gpt2: its header, a log of 8 steps (the first 3 warm-up), a GPT2_PROFILE table.
struct FakeRun {
  std::string dir = make_temp_dir();
  BenchRun run;
  FakeRun() {
    run.log = dir + "/log.jsonl";
    run.out = dir + "/out.txt";
    run.err = dir + "/err.txt";
    run.model = "d12";
    run.B = 4;
    run.T = 1024;
    std::string log = "{\"step\":0,\"val_loss\":11.0}\n";
    for (int s = 1; s <= 8; s++)
      log += "{\"step\":" + std::to_string(s) + ",\"loss\":5.0,\"ms\":" + std::to_string(s <= 3 ? 90 + s : 10 + s) +
             ",\"opt_ms\":2.0,\"tok_per_s\":" + std::to_string(1000 * s) + ".0,\"mfu\":0.25}\n";
    write_file(run.log, log);
    write_file(run.out, "train_gpt2 | NVIDIA H100 80GB HBM3 | d12 separate q/k/v, 124.4M params | bf16\n");
    write_file(run.err,
               "GPT2_PROFILE: GPU ms per step over 7 steps (total 9.50)\n"
               "  bwd attention                   2.000   21.1%\n"
               "  bwd matmul dW                   3.250   34.2%\n"
               "  crossentropy                    0.500    5.3%\n"
               "  fwd attention                   1.250   13.2%\n"
               "  fwd matmul qkv                  2.500   26.3%\n");
  }
};

TEST(ReportMedian, MediansOfTheTimedSteps) {
  FakeRun f;
  const Json j = parse_json(bench_line(f.run), "line");
  // Steps 4..8 are timed: ms 14..18, tok_per_s 4000..8000.
  EXPECT_EQ(num(j, "step_ms", 0), 16);
  EXPECT_EQ(num(j, "tok_per_s", 0), 6000);
  EXPECT_EQ(num(j, "timed_steps", 0), 5);
  EXPECT_EQ(num(j, "params_m", 0), 124.4);
  EXPECT_EQ(num(j, "T", 0), 1024);
  EXPECT_EQ(str(j, "gpu"), "NVIDIA H100 80GB HBM3");  // from the header when not given
  EXPECT_EQ(num(j, "fwd_ms", 0), 3.75);
  EXPECT_EQ(num(j, "bwd_ms", 0), 5.25);
  EXPECT_EQ(num(j, "loss_ms", 0), 0.5);
  EXPECT_FALSE(j.has("error"));
  // The keys in the order the bench scripts have always written them.
  const std::string line = bench_line(f.run);
  EXPECT_LT(line.find("\"model\""), line.find("\"params_m\""));
  EXPECT_LT(line.find("\"opt_ms\""), line.find("\"gpu\""));
  EXPECT_LT(line.find("\"extra\""), line.find("\"timed_steps\""));
  // More warm-up: fewer timed steps, other medians.
  f.run.warmup = 6;
  EXPECT_EQ(num(parse_json(bench_line(f.run), "line"), "step_ms", 0), 17.5);
  // train_vit: img_per_s, no T.
  f.run.program = "train_vit";
  f.run.T = 0;
  write_file(f.run.log, "{\"step\":7,\"loss\":1,\"ms\":5.0,\"opt_ms\":1.0,\"img_per_s\":100.0,\"mfu\":0.1}\n");
  const Json v = parse_json(bench_line(f.run), "line");
  EXPECT_EQ(num(v, "img_per_s", 0), 100);
  EXPECT_FALSE(v.has("T"));
  EXPECT_EQ(str(v, "gpu"), "") << "no train_vit header in stdout: null";
}

TEST(ReportMedian, FailedRunsSayWhy) {
  FakeRun f;
  f.run.exit_status = 1;
  write_file(f.run.err, "loading\ntrain_gpt2: out of GPU memory for the activations; use a smaller -b.\n\n");
  Json j = parse_json(bench_line(f.run), "line");
  EXPECT_EQ(str(j, "error"), "train_gpt2: out of GPU memory for the activations; use a smaller -b.");
  EXPECT_EQ(num(j, "exit_status", 0), 1);
  EXPECT_FALSE(j.has("tok_per_s"));
  f.run.exit_status = 137;
  write_file(f.run.err, "");
  j = parse_json(bench_line(f.run), "line");
  EXPECT_NE(str(j, "error").find("killed by signal 9"), std::string::npos);
  f.run.exit_status = 0;
  f.run.warmup = 8;
  j = parse_json(bench_line(f.run), "line");
  EXPECT_EQ(str(j, "error"), "the log has no steps after the first 8");
  f.run.warmup = 3;
  write_file(f.run.log, "{\"step\":1,\"loss\":5,\"ms\":1}\n{not json}\n{\"step\":9,\"loss\":5,\"ms\":1}\n");
  j = parse_json(bench_line(f.run), "line");
  EXPECT_NE(str(j, "error").find("unreadable line"), std::string::npos);
  // A data-parallel run names its launcher and world size.
  write_file(f.run.log, "{\"step\":5,\"loss\":5,\"ms\":1,\"opt_ms\":1,\"tok_per_s\":1,\"mfu\":0}\n");
  write_file(f.run.out, "train_gpt2 | GPU | 1.0M params\ndata parallel: 4 processes (mpirun), all-reduce\n");
  f.run.launch = "mpirun -np 4";
  j = parse_json(bench_line(f.run), "line");
  EXPECT_EQ(num(j, "world", 0), 4);
  EXPECT_EQ(str(j, "launch"), "mpirun -np 4");
}

TEST(ReportLossPlot, CurvesOfALog) {
  const auto lines = parse_json_lines(
      "{\"step\":0,\"val_loss\":3.0,\"val_top1\":0.1}\n{\"step\":1,\"loss\":4.0,\"ms\":1}\n{\"step\":2,\"loss\":2.0}\n"
      "{\"step\":3,\"loss\":null}\n{\"step\":3,\"val_loss\":1.5,\"val_top1\":0.5}\n",
      "log");
  const TrainLog t = train_log_of(lines);
  EXPECT_EQ(t.step, (std::vector<double>{1, 2}));
  EXPECT_EQ(t.vloss, (std::vector<double>{3.0, 1.5}));
  EXPECT_TRUE(t.has_top1);
  EXPECT_DOUBLE_EQ(t.top1[1], 50);
  EXPECT_EQ(moving_average({1, 2, 3, 4}, 2), (std::vector<double>{1, 1.5, 2.5, 3.5}));
  const svg::Figure f = loss_figure(t, "t", 50);
  ASSERT_EQ(f.panels.size(), 2u) << "top-1 in a second panel";
  EXPECT_DOUBLE_EQ(f.panels[0].line.y.lo, 1.3);  // lowest loss - 0.2
  EXPECT_DOUBLE_EQ(f.panels[0].line.y.hi, 4.2);  // highest of the first five and the first validation + 0.2
}

// The comparison's table on synthetic logs: 2 configurations x 2 seeds, one run diverging (a null
// validation loss); means, spreads, status counts, the sort order.
void write_run(const std::string& dir, const std::string& label, int seed, const std::string& opt,
               const std::string& flags, const std::vector<double>& val, const char* end_status = "ok") {
  std::string s = "{\"compare_run\":{\"task\":\"vit\",\"label\":\"" + label + "\",\"optimizer\":\"" + opt +
                  "\",\"flags\":\"" + flags + "\",\"seed\":" + std::to_string(seed) + ",\"steps\":100}}\n";
  for (size_t i = 0; i < val.size(); i++) {
    const std::string v = std::isnan(val[i]) ? "null" : std::to_string(val[i]);
    s += "{\"step\":" + std::to_string(i * 10 + 1) + ",\"loss\":" + v +
         ",\"ms\":5.0,\"opt_ms\":1.0,\"img_per_s\":51200.0}\n";
    s += "{\"step\":" + std::to_string(i * 10) + ",\"val_loss\":" + v +
         ",\"val_top1\":" + std::to_string(0.5 + 0.1 * double(i)) + "}\n";
  }
  if (end_status)
    s += std::string("{\"compare_end\":{\"status\":\"") + end_status +
         "\",\"exit\":0,\"wall_s\":" + std::to_string(10 + 4 * (seed - 1)) + ".0}}\n";
  write_file(dir + "/" + label + "_s" + std::to_string(seed) + ".jsonl", s);
}

TEST(ReportCompare, TableOfAComparison) {
  const std::string dir = make_temp_dir();
  write_run(dir, "muon_lr0.02", 1, "muon", "--set muon.lr=0.02", {2.0, 1.2, 0.9});
  write_run(dir, "muon_lr0.02", 2, "muon", "--set muon.lr=0.02", {2.1, 1.0, 1.1});
  write_run(dir, "adamw_lr1e-3", 1, "adamw", "-l 1e-3", {2.0, 1.5, 1.3});
  write_run(dir, "adamw_lr1e-3", 2, "adamw", "-l 1e-3", {2.0, 1.6, NAN}, "diverged");
  write_run(dir, "celo2_lr1e-3", 1, "celo2", "-l 1e-3", {2.0, 1.4}, nullptr);  // still running
  const auto rows = summarise_runs(read_compare_runs(dir));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].label, "adamw_lr1e-3");  // by optimizer: adamw, muon, celo2
  EXPECT_EQ(rows[1].label, "muon_lr0.02");
  EXPECT_EQ(rows[2].label, "celo2_lr1e-3");
  EXPECT_EQ(rows[1].final_loss, (std::vector<double>{0.9, 1.1}));
  EXPECT_EQ(rows[1].best_loss, (std::vector<double>{0.9, 1.0}));
  EXPECT_EQ(rows[1].lr_text, "0.02 (muon.lr)");
  EXPECT_EQ(rows[0].final_loss, (std::vector<double>{1.3})) << "only the finished seed";
  EXPECT_EQ(rows[0].status, "diverged 1/2");
  EXPECT_EQ(rows[2].status, "incomplete 1/1");
  const std::string text = compare_table(rows, true, "");
  EXPECT_NE(
      text.find("| muon_lr0.02 | muon | 0.02 (muon.lr) | 1 2 | 1.0000 ± 0.1414 | 0.9500 ± 0.0707 | 70.00 ± 0.00 |"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("| adamw_lr1e-3 | adamw | 1e-3 | 1 2 | 1.3000 | 1.3000 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| celo2_lr1e-3 | celo2 | 1e-3 | 1 | – | – | – | – | – | incomplete 1/1 |"), std::string::npos)
      << text;
  std::string t;
  double v;
  lr_of("x_lr3e-4", "", &t, &v);
  EXPECT_EQ(t, "3e-4");
  EXPECT_DOUBLE_EQ(v, 3e-4);
  lr_of("x", "--lr 0.5", &t, &v);
  EXPECT_EQ(t, "0.5");
  lr_of("x", "", &t, &v);
  EXPECT_EQ(t, "default");
  // The figure: one series per configuration in the loss panel, the best of each optimizer thicker.
  const svg::Figure f = compare_figure(rows, true, "t");
  ASSERT_EQ(f.panels.size(), 2u);
  int thick = 0;
  for (const auto& s : f.panels[0].line.series) thick += s.width > 2;
  EXPECT_EQ(thick, 2) << "adamw's and muon's best (celo2 has no finished run)";
}

// The committed comparison tables come out of the committed logs unchanged.
TEST(ReportCompare, CommittedTablesAreReproduced) {
  for (const char* task : {"gpt2", "vit"}) {
    const std::string md = read_file(std::string("docs/compare_") + task + ".md");
    ASSERT_FALSE(md.empty()) << "run from the repository root";
    const std::string title = md.substr(4, md.find('\n') - 4);
    const auto rows = summarise_runs(read_compare_runs(std::string("results/compare_") + task));
    EXPECT_EQ(compare_table(rows, std::string(task) == "vit", title), md) << task;
  }
}

}  // namespace
