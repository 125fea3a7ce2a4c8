// What one optimizer step costs per tensor, by optimizer name: the bytes its kernels move per element and
// the Newton-Schulz FLOPs it runs. bench_optim turns them into its bandwidth floor and ns_tflop; the
// shard plan (core/shard_plan) balances ranks by them. Newton-Schulz GEMM traffic is not in the bytes: it
// is compute-bound.
#pragma once
#include <string>

#include "core/param_table.h"
#include "optim/options.h"

struct StepBytesFlags {
  bool bf16_copy = false;       // the step also refreshes the bf16 copy of the parameters (+2)
  bool trainer_clip = false;    // the trainer's grad-norm clip reads g once more (+4)
  bool own_clip = false;        // the optimizer's own global clip (elo.clip_grad) reads g once more (+4)
  bool dx_bf16 = true;          // CELO2's direction buffer in bf16 (its Newton-Schulz in bf16, the default)
  bool lopt_fast = false;       // small_fc_lopt / ELO fast: pass B reads no p of a matrix (-4 on 2-D tensors)
  bool lopt_rec16 = false;      // the learned records in bf16 (VeLO, small_fc_lopt, CELO2's learned tensors): -24
  bool clip_in_pass_a = false;  // the trainer's clip takes pass A's sums of a 2-D tensor (Optimizer::take_clip): -4
};

// Bytes per element of t that `optimizer` reads and writes in one step; UserError for an unknown name.
double step_bytes_per_elem(const std::string& optimizer, const TensorInfo& t, const StepBytesFlags& f = {});

// FLOPs of `steps` Newton-Schulz iterations on t: Muon's matrices (as (shape[0], rest)), CELO2's learned
// matrices (per slice of the last two axes); 0 for every other tensor and optimizer.
double ns_step_flops(const std::string& optimizer, const TensorInfo& t, int steps);

// An estimate of one optimizer's time to step tensor t, in seconds on an H100: the bytes its kernels move
// (step_bytes_per_elem, bench_optim's accounting) at 3.0 TB/s, plus its Newton-Schulz FLOPs (5 iterations)
// at the ~500 TFLOP/s our batched bf16 GEMMs reach. The shard plan (core/shard_plan.h) balances ranks by
// it; only the ratios matter there.
double shard_step_cost(const std::string& optimizer, const TensorInfo& t);

// Where the shard plan may cut t between two ranks (core/shard_plan.h), in elements; 0: `optimizer` needs t
// whole. Element-wise steps (every tensor under AdamW, Muon's AdamW tensors, CELO2's and ELO_CELO2's AdamW
// side path: one per-tensor flag and per-step scalars) cut at ShardPlan::kCutElems. VeLO, small_fc_lopt and
// ELO cut a matrix at lo_cut_unit(t) rows, and sum its statistics over the two ranks (optim/lopt/lo_core.h).
// Adafactor, Newton-Schulz and CELO2's learned matrices take their tensors whole.
int64_t shard_cut_unit(const std::string& optimizer, const OptimOptions& o, const TensorInfo& t);
