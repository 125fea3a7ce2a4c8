// Deterministic device-side random fill (counter-based hash, Box-Muller), for benchmarks: a 1.5B-element
// arena is filled in milliseconds without a host round trip. Not for training initialisation.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

void fill_normal(float* dst, int64_t n, uint64_t seed, float stddev, cudaStream_t s = 0);
void fill_normal(__nv_bfloat16* dst, int64_t n, uint64_t seed, float stddev, cudaStream_t s = 0);
