#include "optim/step_cost.h"

#include <algorithm>

#include "common/error.h"
#include "core/shard_plan.h"
#include "optim/lopt/lopt_common.h"

namespace {
bool celo2_family(const std::string& o) { return o == "celo2" || o == "elo_celo2"; }
// CELO2's learned path (the rest takes its AdamW side path): the Hidden matrices of the tables.
bool celo2_learned(const TensorInfo& t) { return t.ndim() > 1 && t.role == Role::Hidden; }

// A X X^T, B = c A A + b A, X' = a X + B X per iteration on m x n (m <= n) matrices.
double ns_flops(int64_t rows, int64_t cols, int64_t batch, int steps) {
  const double m = double(std::min(rows, cols)), n = double(std::max(rows, cols));
  return double(batch) * steps * (4 * m * m * n + 2 * m * m * m);
}
}  // namespace

// AdamW and Muon's elementwise part (optimizers.md D): 28. Adafactor: 24, vectors 40. Learned optimizers
// (small_fc_lopt, VeLO, ELO): pass A (R g: 4, matrices), pass B (R g, p, {m0,m1,m2,v}; W record: 40), pass
// C (R g, p, record; W p: 28); vectors also read and write {V0,V1,V2} (+32, small_fc_lopt.md 8.2). VeLO's
// pass B reads no p after its first step (its pass C sums p^2 as it writes p): 4 less; so does fast small_fc_lopt's
// and ELO's on matrices (their fast pass C takes the matrices; the exact one, going another way, does not).
// Records in bf16 (lopt_rec16): 8 bytes, not 16, in pass B's read and write and pass C's read: 24 less.
// CELO2's learned matrices: pass A (4), B (R g, {m0,m1,m2,v}; W record: 36; its sum of p^2 comes from the
// last apply), C (R g, p, record; W D: 24 + |D|), the NS input scaling (R/W D: 2 |D|), the sum of O^2 (|D|)
// and apply (R O, p; W p: 8 + |D|), |D| = 2 in bf16, else 4: 82 or 92; its AdamW side path 28.
double step_bytes_per_elem(const std::string& o, const TensorInfo& t, const StepBytesFlags& f) {
  double per;
  if (o == "adamw" || o == "muon")
    per = 28;
  else if (o == "adafactor")
    per = t.ndim() > 1 ? 24 : 40;
  else if (o == "small_fc_lopt" || o == "elo")
    per = (t.ndim() > 1 ? (f.lopt_fast && t.ndim() == 2 ? 68 : 72) : 100) - (f.lopt_rec16 ? 24 : 0);
  else if (o == "velo")
    per = (t.ndim() > 1 ? 68 : 96) - (f.lopt_rec16 ? 24 : 0);
  else if (celo2_family(o))
    per = celo2_learned(t) ? (f.dx_bf16 ? 82 : 92) - (f.lopt_rec16 ? 24 : 0) : 28;
  else
    user_error("no step cost is known for optimizer '", o, "'.");
  const bool in_pass_a = t.ndim() == 2 && (!celo2_family(o) || celo2_learned(t));  // CELO2: not the AdamW side
  const bool clip_read = f.trainer_clip && !(f.clip_in_pass_a && in_pass_a);
  return per + (f.bf16_copy ? 2 : 0) + (clip_read ? 4 : 0) + (f.own_clip ? 4 : 0);
}

double ns_step_flops(const std::string& o, const TensorInfo& t, int steps) {
  if (o == "muon" && t.resolved_owner() == Owner::Muon) return ns_flops(t.mat_rows(), t.mat_cols(), 1, steps);
  if (celo2_family(o) && celo2_learned(t)) return ns_flops(t.rows(), t.cols(), t.batch(), steps);
  return 0;
}

double shard_step_cost(const std::string& optimizer, const TensorInfo& t) {
  constexpr double kBandwidth = 3.0e12;  // bytes/s: the H100's measured copy rate
  constexpr double kNsRate = 5.0e14;     // FLOP/s: our batched bf16 Newton-Schulz GEMMs on the H100
  constexpr int kNsSteps = 5;
  return step_bytes_per_elem(optimizer, t) * double(t.numel) / kBandwidth +
         ns_step_flops(optimizer, t, kNsSteps) / kNsRate;
}

int64_t shard_cut_unit(const std::string& optimizer, const OptimOptions& o, const TensorInfo& t) {
  bool elementwise = optimizer == "adamw";
  if (optimizer == "muon") elementwise = t.resolved_owner() == Owner::AdamW;
  if (optimizer == "celo2") elementwise = celo2_uses_adamw(t, o.celo2);
  if (optimizer == "elo_celo2") elementwise = celo2_uses_adamw(t, o.elo_celo2);
  if (elementwise) return ShardPlan::kCutElems;
  if (optimizer == "velo" || optimizer == "small_fc_lopt" || optimizer == "elo") return lo_cut_unit(t);
  return 0;
}
