// Per-step scalars computed on the device at the start of each step (one thread), so that the host
// never has to know the step number: a captured CUDA graph replays correctly step after step.
#pragma once
#include <cuda_runtime.h>

#include "optim/options.h"
#include "optim/schedule.h"

// One AdamW step's scalars (step t counts from 1), what adamw_elem reads.
struct AdamWScalars {
  float step_size;              // lr / (1 - beta1^t): the learning rate with m's bias correction
  float sqrt_bias_correction2;  // sqrt(1 - beta2^t): v's bias correction, under the square root
  float lr_wd;                  // lr * weight_decay
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float grad_scale;  // the trainer's clip coefficient (1 without clipping)
};

// torch fused AdamW: bias corrections and step size in double, then used in fp32.
__device__ inline AdamWScalars make_adamw_scalars(const AdamWOptions& h, int64_t t, double lr_factor,
                                                  float grad_scale) {
  double lr = h.lr * lr_factor;
  double bc1 = 1.0 - pow(h.beta1, double(t)), bc2 = 1.0 - pow(h.beta2, double(t));
  AdamWScalars s;
  s.step_size = float(lr / bc1);
  s.sqrt_bias_correction2 = float(sqrt(bc2));
  s.lr_wd = float(lr * h.weight_decay);
  s.beta1 = float(h.beta1);
  s.one_minus_beta1 = float(1.0 - h.beta1);
  s.beta2 = float(h.beta2);
  s.one_minus_beta2 = float(1.0 - h.beta2);
  s.eps = float(h.eps);
  s.grad_scale = grad_scale;
  return s;
}

__device__ inline float read_grad_scale(const float* p) { return p ? *p : 1.0f; }

// torch's lerp: exact at both ends, the formula switches at weight 0.5.
__host__ __device__ inline float torch_lerp(float self, float end, float w) {
  return (w < 0.5f) ? self + w * (end - self) : end - (end - self) * (1.0f - w);
}
