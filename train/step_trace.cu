#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/cuda_check.h"
#include "train/step_trace.h"

StepTrace::StepTrace(int groups, int rank) : rank_(rank) {
  const char* v = std::getenv("STEP_TRACE");
  on_ = v && std::strcmp(v, "1") == 0;
  if (!on_) return;
  for (int g = 0; g < groups; g++) {
    ready_.push_back(make());
    summed_.push_back(make());
  }
  start_ = make();
  bwd_ = make();
  comm_ = make();
  opt0_ = make();
  opt1_ = make();
  end_ = make();
}

StepTrace::~StepTrace() {  // no checks: nothing may throw from here
  for (auto* v : {&ready_, &summed_})
    for (cudaEvent_t e : *v) cudaEventDestroy(e);
  for (cudaEvent_t e : {start_, bwd_, comm_, opt0_, opt1_, end_})
    if (e) cudaEventDestroy(e);
}

cudaEvent_t StepTrace::make() {
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void StepTrace::start(cudaStream_t s) {
  if (!on_) return;
  ready_n_ = summed_n_ = 0;
  opt_ = false;
  CUDA_CHECK(cudaEventRecord(start_, s));
}

void StepTrace::ready(cudaStream_t compute) {
  if (on_ && ready_n_ < ready_.size()) CUDA_CHECK(cudaEventRecord(ready_[ready_n_++], compute));
}

void StepTrace::summed(cudaStream_t comm) {
  if (on_ && summed_n_ < summed_.size()) CUDA_CHECK(cudaEventRecord(summed_[summed_n_++], comm));
}

void StepTrace::backward_end(cudaStream_t compute) {
  if (on_) CUDA_CHECK(cudaEventRecord(bwd_, compute));
}

void StepTrace::comm_end(cudaStream_t comm) {
  if (on_) CUDA_CHECK(cudaEventRecord(comm_, comm));
}

void StepTrace::optimizer_begin(cudaStream_t compute) {
  if (on_) CUDA_CHECK(cudaEventRecord(opt0_, compute));
}

void StepTrace::optimizer_end(cudaStream_t compute) {
  if (!on_) return;
  CUDA_CHECK(cudaEventRecord(opt1_, compute));
  opt_ = true;
}

void StepTrace::print(cudaStream_t s) {
  if (!on_) return;
  CUDA_CHECK(cudaEventRecord(end_, s));
  CUDA_CHECK(cudaEventSynchronize(end_));
  auto ms = [&](cudaEvent_t e) {
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, start_, e));
    return t;
  };
  auto list = [&](const std::vector<cudaEvent_t>& v, size_t n) {
    std::string s = "[";
    char b[32];
    for (size_t k = 0; k < n; k++) {
      std::snprintf(b, sizeof b, "%s%.3f", k ? "," : "", ms(v[k]));
      s += b;
    }
    return s + "]";
  };
  std::fprintf(stderr,
               "{\"trace\":%d,\"rank\":%d,\"ready\":%s,\"summed\":%s,\"backward_end\":%.3f,\"comm_end\":%.3f,"
               "\"opt_begin\":%.3f,\"opt_end\":%.3f,\"step_end\":%.3f}\n",
               ++steps_, rank_, list(ready_, ready_n_).c_str(), list(summed_, summed_n_).c_str(), ms(bwd_), ms(comm_),
               opt_ ? ms(opt0_) : -1.0f, opt_ ? ms(opt1_) : -1.0f, ms(end_));
}
