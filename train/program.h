// What every training program's main() shares, beside the flags and the set-up (train/trainer.h): the
// stop signals (SIGINT, SIGTERM: finish the step, save, exit), the GPU check, and the mapping of errors to
// one line on stderr and an exit status (1: bad input, 2: CUDA, 3: an internal check;
// 4, from train/nccl_comm's watchdog: another process of a data-parallel run died or hangs).
#pragma once
#include <functional>
#include <string>

#include "common/cli.h"

// After this, stop_requested() turns true on SIGINT or SIGTERM (the step in progress finishes first).
void catch_stop_signals();
bool stop_requested();

// UserError "needs a CUDA GPU and none is visible." unless one is: a trainer's last check, after every
// input's and before it creates anything.
void require_cuda_gpu();

// --attention cudnn or cudnn-nondet where the loaded cuDNN cannot run the backward at T (its known bugs,
// T = 1): a UserError with cuDNN's reason before anything runs, rather than at the first backward.
void check_attention_shape(const std::string& attention, int T, bool causal);

// Parses the flags (false from the parser: --help was printed, exit 0) and runs `run`; any error becomes
// "<program>: <sentence>" on stderr and the exit status above.
int run_program(const char* program, Cli& cli, int argc, char** argv, const std::function<int()>& run);
