// GPU time of a piece of work on one stream, with CUDA events: `warmup` untimed calls, then `reps` timed
// ones. Synchronises after each call, so it is for start-up choices and benchmarks, never inside a
// training step.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "common/cuda_check.h"

// The time of each timed call in ms, in call order.
template <class F>
std::vector<float> event_times_ms(F&& fn, cudaStream_t s, int reps, int warmup) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; i++) fn();
  std::vector<float> ms;
  for (int i = 0; i < reps; i++) {
    CUDA_CHECK(cudaEventRecord(e0, s));
    fn();
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float t;
    CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  return ms;
}

// The median of times (the upper middle one for an even count); at least one time.
inline float median_ms(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class F>
float median_event_ms(F&& fn, cudaStream_t s, int reps = 7, int warmup = 2) {
  return median_ms(event_times_ms(fn, s, reps, warmup));
}
