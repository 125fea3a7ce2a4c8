// `report dp`: the README's two data-parallel tables from the JSON lines of one run of
// scripts/bench_data_parallel.sh (PARTS="table3 weak"), so that they are a command's output rather than
// arithmetic by hand, and a CPU test can hold the README to the file it cites.
//
//  - Table 3 (the PyLO paper's setting: GPT-2 124M at 4 × 1024 tokens per GPU): per optimizer, the step on one
//    GPU, all-reduce and sharded on the most GPUs, each q/k/v layout side by side; the sharded step over
//    AdamW's best mode (the faster of its two) on as many GPUs; the paper's figures beside.
//  - Weak scaling: AdamW all-reduce per configuration (model and per-GPU batch) and world size, with the
//    efficiency N-GPU rate / (N × one-GPU rate); AdamW sharded on the most GPUs; and a row per other optimizer
//    run sharded outside Table 3's setting, against its own one-GPU run and AdamW's best mode.
//
// Which line feeds which table: the script runs its Table 3 part before its weak part, and both run 124M at
// 4 × 1024 with AdamW (one GPU and all-reduce), so Table 3 takes the first line of each of its runs and the
// weak-scaling table the last.
#pragma once
#include <string>
#include <vector>

#include "common/json.h"
#include "tools/report/experiments.h"

namespace report {

// Each table as markdown ("" when the lines hold none of its runs); `paper`: tools/report/pylo_paper.jsonl.
std::string dp_table3(const std::vector<Json>& lines, const Paper& paper);
std::string dp_weak(const std::vector<Json>& lines);
// Both, Table 3 first, a blank line between; UserError when the lines hold no run of either.
std::string dp_tables(const std::vector<Json>& lines, const Paper& paper);

}  // namespace report
