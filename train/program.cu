#include <csignal>
#include <cstdio>

#include "common/cuda_check.h"
#include "kernels/attention_kind.h"
#include "kernels/cudnn_attention.h"
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

void require_cuda_gpu() {
  if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");
}

void check_attention_shape(const std::string& attention, int T, bool causal) {
  if (attention_by_name(attention) == Attention::kOurs) return;
  const std::string why = CudnnAttention::backward_refusal(T, causal);
  if (!why.empty()) user_error("--attention ", attention, ": ", why);
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
