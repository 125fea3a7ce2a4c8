// Learning-rate schedules: a multiplier on every optimizer's step (learned optimizers included, PyLO
// semantics) and on decoupled weight decay. The same function runs on the host (logging, CPU
// reference) and on the device (inside each optimizer's step, so a captured CUDA graph advances the
// schedule by itself). `step` is the 0-based index of the update being made.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#ifdef __CUDACC__
#define HD __host__ __device__
#else
#define HD
#endif

struct LrSchedule {
  enum Kind : int32_t { Constant = 0, Warmup = 1, Cosine = 2, WSD = 3 };
  Kind kind = Constant;
  int64_t warmup = 0;       // linear warmup steps (factor (s+1)/warmup), all kinds but Constant
  int64_t total = 0;        // planned number of updates (Cosine, WSD)
  double final_frac = 0.0;  // factor reached at the end (Cosine, WSD)
  double decay_frac = 0.2;  // WSD: share of `total` spent decaying (linearly) at the end

  HD double factor(int64_t step) const {
    if (kind == Constant) return 1.0;
    if (step < warmup) return double(step + 1) / double(warmup);
    if (kind == Warmup) return 1.0;
    if (step >= total) return final_frac;
    if (kind == Cosine) {
      double span = double(total - warmup);
      double x = span > 0 ? double(step - warmup) / span : 1.0;
      return final_frac + (1.0 - final_frac) * 0.5 * (1.0 + cos(3.14159265358979323846 * x));
    }
    // WSD: flat at 1 until the decay phase, then linear to final_frac.
    int64_t decay_steps = int64_t(decay_frac * double(total) + 0.5);
    int64_t decay_start = total - decay_steps;
    if (step < decay_start || decay_steps <= 0) return 1.0;
    double x = double(step - decay_start + 1) / double(decay_steps);
    return 1.0 + (final_frac - 1.0) * x;
  }
};

// "constant" | "warmup" | "cosine" | "wsd"; UserError for anything else or inconsistent numbers.
LrSchedule make_schedule(const std::string& kind, int64_t warmup, int64_t total, double final_frac, double decay_frac);
const char* schedule_name(LrSchedule::Kind k);
