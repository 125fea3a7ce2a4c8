#include "optim/schedule.h"

#include "common/error.h"

const char* schedule_name(LrSchedule::Kind k) {
  switch (k) {
    case LrSchedule::Constant:
      return "constant";
    case LrSchedule::Warmup:
      return "warmup";
    case LrSchedule::Cosine:
      return "cosine";
    case LrSchedule::WSD:
      return "wsd";
  }
  return "?";
}

LrSchedule make_schedule(const std::string& kind, int64_t warmup, int64_t total, double final_frac, double decay_frac) {
  LrSchedule s;
  if (kind == "constant")
    s.kind = LrSchedule::Constant;
  else if (kind == "warmup")
    s.kind = LrSchedule::Warmup;
  else if (kind == "cosine")
    s.kind = LrSchedule::Cosine;
  else if (kind == "wsd")
    s.kind = LrSchedule::WSD;
  else
    user_error("unknown LR schedule '", kind, "'; choose one of constant, warmup, cosine, wsd.");
  if (warmup < 0) user_error("warmup steps must be >= 0 (got ", warmup, ").");
  if (s.kind == LrSchedule::Constant && warmup > 0)
    user_error("the constant schedule has no warmup; use the 'warmup' schedule for ", warmup, " warmup steps.");
  if (s.kind == LrSchedule::Warmup && warmup == 0) user_error("the warmup schedule needs warmup steps > 0.");
  if (s.kind == LrSchedule::Cosine || s.kind == LrSchedule::WSD) {
    if (total <= 0) user_error("the ", kind, " schedule needs the total number of steps (> 0).");
    if (warmup > total) user_error("warmup (", warmup, ") is longer than the whole run (", total, " steps).");
    if (!(final_frac >= 0 && final_frac <= 1))
      user_error("the final LR fraction must be in [0, 1] (got ", final_frac, ").");
  }
  if (s.kind == LrSchedule::WSD && !(decay_frac > 0 && decay_frac <= 1))
    user_error("the WSD decay fraction must be in (0, 1] (got ", decay_frac, ").");
  s.warmup = warmup;
  s.total = total;
  s.final_frac = final_frac;
  s.decay_frac = decay_frac;
  return s;
}
