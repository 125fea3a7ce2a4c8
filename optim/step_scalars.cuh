// Per-step scalars computed on the device at the start of each step (one thread), so that the host
// never has to know the step number: a captured CUDA graph replays correctly step after step.
#pragma once
#include <cuda_runtime.h>

#include "optim/options.h"
#include "optim/schedule.h"

struct AdamWScalars {
  float step_size, bc2_sqrt, lr_wd, beta1, omb1, beta2, omb2, eps, grad_scale;
};

// torch fused AdamW: bias corrections and step size in double, then used in fp32.
__device__ inline AdamWScalars make_adamw_scalars(const AdamWOptions& h, int64_t t, double lr_factor,
                                                  float grad_scale) {
  double lr = h.lr * lr_factor;
  double bc1 = 1.0 - pow(h.beta1, double(t)), bc2 = 1.0 - pow(h.beta2, double(t));
  AdamWScalars s;
  s.step_size = float(lr / bc1);
  s.bc2_sqrt = float(sqrt(bc2));
  s.lr_wd = float(lr * h.weight_decay);
  s.beta1 = float(h.beta1);
  s.omb1 = float(1.0 - h.beta1);
  s.beta2 = float(h.beta2);
  s.omb2 = float(1.0 - h.beta2);
  s.eps = float(h.eps);
  s.grad_scale = grad_scale;
  return s;
}

__device__ inline float read_grad_scale(const float* p) { return p ? *p : 1.0f; }

// torch's lerp: exact at both ends, the formula switches at weight 0.5.
__host__ __device__ inline float torch_lerp(float self, float end, float w) {
  return (w < 0.5f) ? self + w * (end - self) : end - (end - self) * (1.0f - w);
}
