// fp32 <-> bf16 over a flat range, for gradients communicated in bf16 (train/step_runner.h, --grad-comm
// bf16): half the bytes through NCCL, at the price of bf16 rounding of each process's gradient and of the
// partial sums. Round to nearest even (__float2bfloat16_rn); widening is exact.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

void float_to_bf16(__nv_bfloat16* dst, const float* src, size_t n, cudaStream_t s);
void bf16_to_float(float* dst, const __nv_bfloat16* src, size_t n, cudaStream_t s);
