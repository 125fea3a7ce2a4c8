// Pieces shared between the CPU reference optimizers.
#pragma once
#include <memory>

#include "optim/ref/ref_optim.h"

void ref_adamw_tensor(const AdamWOptions& h, int64_t t, double lr_factor, float grad_scale, bool decay, float* p,
                      const float* g, float* m, float* v, int64_t n);
inline float ref_lerp(float self, float end, float w) {  // torch's lerp
  return (w < 0.5f) ? self + w * (end - self) : end - (end - self) * (1.0f - w);
}
std::unique_ptr<RefOptimizer> make_ref_adamw(const ParamTable& t, const OptimOptions& o);
std::unique_ptr<RefOptimizer> make_ref_adafactor(const ParamTable& t, const OptimOptions& o);
std::unique_ptr<RefOptimizer> make_ref_muon(const ParamTable& t, const OptimOptions& o);
