// STEP_TRACE=1's lines (train/step_trace.h: one JSON line per eager data-parallel step and rank, on stderr)
// summarised as results/dp_traces.txt writes them: medians over one rank's steps from a first step on.
#pragma once
#include <string>
#include <vector>

namespace report {

struct TraceSummary {
  int steps = 0;  // trace lines summarised
  // Medians over the steps, ms from the step's start: block L-1's gradients final (the first hook call),
  // backward's end, the communication's end, the step's end.
  double ready0 = 0, backward_end = 0, comm_end = 0, step_end = 0;
  double block_gap = 0;  // backward time per block: (ready[L-2] - ready[0]) / (L - 2) with L hook calls
  double sum = 0;        // a block's gradients final to summed (each step's median over the blocks)
  double tail = 0;       // comm_end - backward_end: the communication backward did not hide
  double last = 0;       // backward_end - block 0's gradients final: the work after the blocks (the lookup part)
  // Lines with opt_begin (whole-model steps): the clip and the optimizer's step (opt_end - opt_begin) and what
  // follows until the step's end (the sharded mode's all-gather); -1 where the lines have none.
  double opt = -1, gather = -1;
};

// The trace lines of `rank` with step >= first_step among the text's lines; other lines are skipped.
TraceSummary summarise_trace(const std::string& text, int rank, int first_step);
// The ranks that have trace lines in the text, ascending.
std::vector<int> trace_ranks(const std::string& text);
// One line: NAME n=.. ready0 .. bwd_end .. comm_end .. step .. blockgap .. sum .. tail .. last .. [opt .. gather ..]
std::string trace_line(const std::string& name, const TraceSummary& s);

}  // namespace report
