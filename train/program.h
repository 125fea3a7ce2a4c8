// What every training program's main() and loop share, beside the flags: the stop signals (SIGINT,
// SIGTERM: finish the step, save, exit), the checkpoints a run writes, and the mapping of errors to
// one line on stderr and an exit status (1: bad input, 2: CUDA, 3: an internal check).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "common/cli.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"

// After this, stop_requested() turns true on SIGINT or SIGTERM (the step in progress finishes first).
void catch_stop_signals();
bool stop_requested();

// Writes <dir>/model_<step>.bin (nothing when dir is empty), says so on stdout, and returns its path.
// Data parallel with several processes, every process calls save: the others write their rank files
// (train/checkpoint.h), then rank 0 its own.
class Checkpointer {
 public:
  Checkpointer(std::string dir, Arena& arena, const Model& model, const Optimizer& opt, DataParallel* dp = nullptr)
      : dir_(std::move(dir)), arena_(arena), model_(model), opt_(opt), dp_(dp) {}
  std::string save(int64_t step, TrainState& state) const;

 private:
  std::string dir_;
  Arena& arena_;  // sharded: its fp32 weights are gathered first (DataParallel::gather_params)
  const Model& model_;
  const Optimizer& opt_;
  DataParallel* dp_;
};

// UserError "needs a CUDA GPU and none is visible." unless one is: a trainer's last check, after every
// input's and before it creates anything.
void require_cuda_gpu();

// Parses the flags (false from the parser: --help was printed, exit 0) and runs `run`; any error becomes
// "<program>: <sentence>" on stderr and the exit status above.
int run_program(const char* program, Cli& cli, int argc, char** argv, const std::function<int()>& run);
