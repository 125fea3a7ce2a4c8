// report: JSON lines in; medians, markdown tables and SVG figures out. The project's one tool for turning the
// programs' logs and benchmark lines into results, with no Python on the way.
//
//   ./report median --program train_gpt2 --log LOG --stdout OUT --stderr ERR --exit N --model d12 -b 64 -t 1024
//   ./report plot-log -i run.jsonl --out loss.svg [--title TEXT]
//   ./report compare -i .out/compare/gpt2 --out docs/compare_gpt2 [--title TEXT] [--task gpt2|vit] [--no-plot 1]
//   ./report pylo -i .out/pylo_single --out .out/pylo_single [--paper tools/report/pylo_paper.jsonl]
//   ./report trace -i run_a.txt -i run_b.txt [--rank 0] [--from 4]
//   ./report dp -i results/.../h100x4_dp.jsonl [--paper tools/report/pylo_paper.jsonl]
//
// `./report SUBCOMMAND --help` lists each one's flags.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/error.h"
#include "tools/report/bench_line.h"
#include "tools/report/compare.h"
#include "tools/report/dp_tables.h"
#include "tools/report/jsonl.h"
#include "tools/report/loss_plot.h"
#include "tools/report/pylo_report.h"
#include "tools/report/step_trace.h"
#include "tools/report/svg.h"

namespace {

const char* kUsage =
    "usage: report SUBCOMMAND [flags]   (report SUBCOMMAND --help for its flags)\n"
    "JSON lines in; medians, markdown tables and SVG figures out.\n\n"
    "subcommands:\n"
    "  median    one bench_gpt2.sh / bench_vit.sh run as one JSON line: medians of the timed steps\n"
    "  plot-log  the loss curves of a train_gpt2 / train_vit log as an SVG\n"
    "  compare   an optimizer comparison (compare_optimizers.sh logs): markdown table and SVG\n"
    "  pylo      the PyLO paper's tables and figures from scripts/reproduce_pylo.sh's experiment files\n"
    "  trace     where a data-parallel step's time goes: STEP_TRACE=1's lines, one summary line per file\n"
    "  dp        the data-parallel tables (Table 3, weak scaling) of one bench_data_parallel.sh run, as markdown\n";

int cmd_median(int argc, char** argv) {
  report::BenchRun r;
  int64_t B = 0, T = 0;
  int warmup = 3, status = 0;
  Cli cli("report median",
          "One training run of scripts/bench_gpt2.sh or bench_vit.sh as one JSON line on stdout: the medians of the "
          "logged steps after the warm-up (and, where stderr holds a GPT2_PROFILE=1 table, forward, backward and loss "
          "ms), or the run's error.");
  cli.add(0, "program", &r.program, "train_gpt2 (tok_per_s) or train_vit (img_per_s)");
  cli.add(0, "log", &r.log, "the run's --log file");
  cli.add(0, "stdout", &r.out, "the run's standard output (its header names the GPU and the parameter count)");
  cli.add(0, "stderr", &r.err, "the run's standard error (its last line is the error of a failed run)");
  cli.add(0, "exit", &status, "the run's exit status");
  cli.add('e', "model", &r.model, "the model name, as given to the program");
  cli.add('b', "batch-size", &B, "micro-batch size");
  cli.add('t', "sequence-length", &T, "sequence length (0: not written, as for train_vit)");
  cli.add(0, "warmup", &warmup, "steps left out at the start");
  cli.add(0, "gpu", &r.gpu, "the GPU's name (\"\": from the program's header)");
  cli.add(0, "extra", &r.extra, "the extra flags of the run, recorded as given");
  cli.add(0, "launch", &r.launch, "the launcher of a data-parallel run (adds \"launch\" and \"world\")");
  if (!cli.parse(argc, argv)) return 0;
  if (r.program != "train_gpt2" && r.program != "train_vit")
    user_error("--program must be train_gpt2 or train_vit (got '", r.program, "').");
  if (r.log.empty()) user_error("--log is needed (the run's JSON-lines log).");
  r.B = B;
  r.T = T;
  r.warmup = warmup;
  r.exit_status = status;
  std::printf("%s\n", report::bench_line(r).c_str());
  return 0;
}

int cmd_plot_log(int argc, char** argv) {
  std::string in, out, title;
  int smooth = 50;
  Cli cli("report plot-log",
          "Plots a train_gpt2 / train_vit JSON-lines log: training loss and its moving average, validation loss and, "
          "for train_vit, validation top-1 (a second panel), by step. Lines with \"loss\" are training steps, lines "
          "with \"val_loss\" validation points.");
  cli.add('i', "input", &in, "the log (--log of the program)");
  cli.add(0, "out", &out, "the SVG file to write");
  cli.add(0, "title", &title, "a title over the figure");
  cli.add(0, "smooth", &smooth, "steps in the moving average of the training loss");
  if (!cli.parse(argc, argv)) return 0;
  if (in.empty() || out.empty()) user_error("-i LOG and --out FILE.svg are both needed.");
  if (smooth < 1) user_error("--smooth must be >= 1 (got ", smooth, ").");
  const report::TrainLog log = report::train_log_of(report::read_json_lines(in));
  if (log.step.empty()) user_error("no training steps in '", in, "'.");
  report::svg::write(report::loss_figure(log, title, smooth), out);
  std::printf("wrote %s: %zu steps, %zu validation points\n", out.c_str(), log.step.size(), log.vstep.size());
  return 0;
}

int cmd_compare(int argc, char** argv) {
  std::string in, out, title, task;
  bool no_plot = false;
  Cli cli("report compare",
          "Summarises an optimizer comparison (scripts/compare_optimizers.sh): OUT.md, a table of final and best "
          "validation loss (and top-1) per configuration over its seeds (also printed), and OUT.svg, validation loss "
          "(and top-1) by step.");
  cli.add('i', "input", &in, "the folder of LABEL_sSEED.jsonl logs");
  cli.add(0, "out", &out, "the prefix of the two files to write (OUT.md, OUT.svg)");
  cli.add(0, "title", &title, "a title over the table and the figure");
  cli.add(0, "task", &task, "gpt2 or vit (vit adds top-1; default: vit where the logs have top-1)");
  cli.add(0, "no-plot", &no_plot, "write the table only");
  if (!cli.parse(argc, argv)) return 0;
  if (in.empty() || out.empty()) user_error("-i LOGDIR and --out PREFIX are both needed.");
  if (!task.empty() && task != "gpt2" && task != "vit") user_error("--task must be gpt2 or vit (got '", task, "').");
  const auto runs = report::read_compare_runs(in);
  if (runs.empty()) user_error("no LABEL_sSEED.jsonl logs in '", in, "'.");
  bool top1 = task == "vit";
  if (task.empty())
    for (const auto& r : runs)
      for (const auto& v : r.val) top1 |= v.top1 == v.top1;
  const auto rows = report::summarise_runs(runs);
  const std::string text = report::compare_table(rows, top1, title);
  {
    std::ofstream f(out + ".md", std::ios::binary);
    if (!f) user_error("cannot write '", out, ".md' (does its folder exist?).");
    f << text;
  }
  std::fputs(text.c_str(), stdout);
  if (no_plot) return 0;
  report::svg::write(report::compare_figure(rows, top1, title), out + ".svg");
  std::printf("wrote %s.md and %s.svg (%zu configurations, %zu runs)\n", out.c_str(), out.c_str(), rows.size(),
              runs.size());
  return 0;
}

int cmd_trace(int argc, char** argv) {
  std::vector<std::string> in;
  int rank = 0, from = 4;
  Cli cli("report trace",
          "Summarises STEP_TRACE=1's lines (train/step_trace.h) of each file, one line each: the medians over one "
          "rank's steps of when block L-1's gradients were final (ready0), backward's, the communication's and "
          "the step's ends, the backward time per block, a block's gradients final to summed, the "
          "communication backward did not hide (tail), and backward's time after the blocks (last), in ms.");
  cli.add('i', "input", &in, "a run's output with the trace lines (repeat for several runs)");
  cli.add(0, "rank", &rank, "whose lines (-1: every rank's, one line each, for how far apart the ranks run)");
  cli.add(0, "from", &from, "the first step summarised (the first ones warm up)");
  if (!cli.parse(argc, argv)) return 0;
  if (in.empty()) user_error("-i FILE is needed (a run's output with STEP_TRACE=1 lines).");
  for (const std::string& path : in) {
    std::ifstream f(path, std::ios::binary);
    if (!f) user_error("cannot read '", path, "'.");
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string name = path.substr(path.find_last_of('/') + 1);
    const std::vector<int> ranks = rank < 0 ? report::trace_ranks(text) : std::vector<int>{rank};
    if (ranks.empty()) user_error("'", path, "' has no trace lines (STEP_TRACE=1).");
    for (int r : ranks) {
      const report::TraceSummary s = report::summarise_trace(text, r, from);
      if (!s.steps)
        user_error("'", path, "' has no trace lines of rank ", r, " from step ", from, " on (STEP_TRACE=1).");
      std::printf("%s\n", report::trace_line(rank < 0 ? name + " rank " + std::to_string(r) : name, s).c_str());
    }
  }
  return 0;
}

int cmd_dp(int argc, char** argv) {
  std::string in, paper = "tools/report/pylo_paper.jsonl";
  Cli cli("report dp",
          "The README's data-parallel tables from the JSON lines of one scripts/bench_data_parallel.sh run "
          "(PARTS=\"table3 weak\"), as markdown on stdout: the PyLO paper's Table 3 and weak scaling "
          "(tools/report/dp_tables.h says which line feeds which cell).");
  cli.add('i', "input", &in, "the run's JSON lines (its OUTFILE)");
  cli.add(0, "paper", &paper, "the paper's figures (JSON lines)");
  if (!cli.parse(argc, argv)) return 0;
  if (in.empty()) user_error("-i FILE is needed (the JSON lines of scripts/bench_data_parallel.sh).");
  std::fputs(report::dp_tables(report::read_json_lines(in), report::Paper::read(paper)).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  try {
    if (sub == "median") return cmd_median(argc - 1, argv + 1);
    if (sub == "plot-log") return cmd_plot_log(argc - 1, argv + 1);
    if (sub == "compare") return cmd_compare(argc - 1, argv + 1);
    if (sub == "pylo") return report::cmd_pylo(argc - 1, argv + 1);
    if (sub == "trace") return cmd_trace(argc - 1, argv + 1);
    if (sub == "dp") return cmd_dp(argc - 1, argv + 1);
    std::fprintf(stderr, "report: unknown subcommand '%s'.\n%s", sub.c_str(), kUsage);
    return 2;
  } catch (const UserError& e) {
    std::fprintf(stderr, "report: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "report: internal error in %s: %s\n", sub.c_str(), e.what());
    return 3;
  }
}
