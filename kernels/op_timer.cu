#include <cstdio>
#include <cstdlib>

#include "common/cuda_check.h"
#include "kernels/op_timer.h"

OpTimer::OpTimer() {
  const char* e = std::getenv("GPT2_PROFILE");
  enabled_ = e && std::string(e) == "1";
}

OpTimer::~OpTimer() {
  if (!enabled_ || ms_.empty()) return;
  double total = 0;
  for (const auto& kv : ms_) total += kv.second;
  std::fprintf(stderr, "GPT2_PROFILE: GPU ms per step over %d steps (total %.2f)\n", steps_, total / steps_);
  for (const auto& kv : ms_)
    std::fprintf(stderr, "  %-28s %8.3f  %5.1f%%\n", kv.first.c_str(), kv.second / steps_, 100 * kv.second / total);
  for (auto e : events_) cudaEventDestroy(e);
}

void OpTimer::mark(const char* name, cudaStream_t s) {
  if (!enabled_) return;
  if (used_ == events_.size()) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
    names_.push_back(nullptr);
  }
  names_[used_] = name;
  CUDA_CHECK(cudaEventRecord(events_[used_++], s));
}

void OpTimer::collect() {
  if (!enabled_ || used_ < 2) return;
  CUDA_CHECK(cudaEventSynchronize(events_[used_ - 1]));
  if (!warm_) {  // the first step pays for lazy module loading and matmul plans: leave it out
    warm_ = true;
    used_ = 0;
    return;
  }
  for (size_t i = 1; i < used_; i++) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
    ms_[names_[i]] += ms;
  }
  steps_++;
  used_ = 0;
}
