// What every training program's main() and loop share, beside the flags: the stop signals (SIGINT,
// SIGTERM: finish the step, save, exit), the checkpoints a run writes, and the mapping of errors to
// one line on stderr and an exit status (1: bad input, 2: CUDA, 3: an internal check).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "common/cli.h"
#include "train/checkpoint.h"

// After this, stop_requested() turns true on SIGINT or SIGTERM (the step in progress finishes first).
void catch_stop_signals();
bool stop_requested();

// Writes <dir>/model_<step>.bin (nothing when dir is empty), says so on stdout, and returns its path.
class Checkpointer {
 public:
  Checkpointer(std::string dir, const Arena& arena, const Model& model, const Optimizer& opt)
      : dir_(std::move(dir)), arena_(arena), model_(model), opt_(opt) {}
  std::string save(int64_t step, TrainState& state) const;

 private:
  std::string dir_;
  const Arena& arena_;
  const Model& model_;
  const Optimizer& opt_;
};

// Parses the flags (false from the parser: --help was printed, exit 0) and runs `run`; any error becomes
// "<program>: <sentence>" on stderr and the exit status above.
int run_program(const char* program, Cli& cli, int argc, char** argv, const std::function<int()>& run);
