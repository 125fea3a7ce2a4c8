#include <csignal>
#include <cstdio>

#include "common/cuda_check.h"
#include "train/program.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }
}  // namespace

void catch_stop_signals() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool stop_requested() { return g_stop != 0; }

std::string Checkpointer::save(int64_t step, TrainState& state) const {
  if (dir_.empty()) return std::string();
  state.step = step;
  const std::string path = checkpoint_path(dir_, step);
  const DpRecord rec = dp_ ? dp_->record() : DpRecord{};
  if (dp_) dp_->gather_params(arena_);  // collective: every process saves
  NcclComm* comm = dp_ ? dp_->comm() : nullptr;
  if (dp_ && dp_->world() > 1) {
    if (dp_->rank() > 0) {
      comm->set_local_work(true);  // the watchdog must not end this process halfway through its file
      save_rank_checkpoint(rank_checkpoint_path(path, dp_->rank()), arena_, dp_->sharded() ? &opt_ : nullptr, state,
                           rec);
      comm->set_local_work(false);
    }
    dp_->barrier();  // every rank file is in place before rank 0's file makes the checkpoint
    if (dp_->rank() > 0) return path;
  }
  if (comm) comm->set_local_work(true);
  save_checkpoint(path, arena_, model_, opt_, state, rec);
  if (comm) comm->set_local_work(false);
  std::printf("checkpoint %s\n", path.c_str());
  return path;
}

void require_cuda_gpu() {
  if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");
}

int run_program(const char* program, Cli& cli, int argc, char** argv, const std::function<int()>& run) {
  try {
    if (!cli.parse(argc, argv)) return 0;
    return run();
  } catch (const UserError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "%s: CUDA error: %s\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {  // a failed internal check (CHECK) or out of host memory: one line, not an abort
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
    return 3;
  }
}
