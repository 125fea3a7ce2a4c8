// Pieces shared by the learned optimizers (small_fc_lopt, VeLO, CELO2, ELO, ELO_CELO2) and by their CPU
// references (optim/ref/): which axes a tensor's second moment is factored over, the decay constants, the
// options, and which tensors CELO2 gives to its AdamW side path. Plain C++: the GPU code and the
// references read the same constants from here.
//
// Factored dims (velo.md 4.6, small_fc_lopt.md 3.2): for rank >= 2, d0 = the largest axis (R is the
// mean of g^2 over d0) and d1 = the second largest (C is the mean over d1); every other axis is a batch
// axis of R and C. The rules differ only when the two largest sizes are equal:
//   Argsort  numpy's argsort order: of two equal axes the later one is d0. The JAX originals use it for
//            both optimizers (on JAX's (in, out) / HWIO layout), and PyLO uses it on torch's layout for
//            AdafacLO/MuLO (small_fc_lopt) and CELO2.
//   Swapped  PyLO's VeLO rule: d0 and d1 swapped on a tie, except rank-4 tensors whose tied axes are
//            (0, 1). On a square torch (out, in) matrix this gives the axes the roles JAX meta-training
//            gave them (d1 = in, d0 = out).
// The option value "pylo" (the default) picks the rule of PyLO's class for that optimizer, so that our
// steps reproduce PyLO's, with whose code the published weights are used.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/param_table.h"

enum class TieRule { Argsort, Swapped };

struct FactoredDims {
  bool factored = false;
  int d0 = -1, d1 = -1;  // R reduces over d0, C over d1
};
FactoredDims factored_dims(const std::vector<int64_t>& shape, TieRule rule);
// "pylo" -> pylo_rule (the rule of PyLO's class for the optimizer), "argsort", "swapped".
TieRule parse_tie_rule(const std::string& s, TieRule pylo_rule);
constexpr TieRule kSmallFcPyloTie = TieRule::Argsort;  // PyLO AdafacLO_naive / MuLO_naive
constexpr TieRule kVeloPyloTie = TieRule::Swapped;     // PyLO VeLO_naive / VeLO_CUDA
constexpr TieRule kCelo2PyloTie = TieRule::Argsort;    // PyLO CELO2_naive / ELO_CELO2_naive (numpy argsort)
constexpr TieRule kEloPyloTie = TieRule::Argsort;      // PyLO ELO_naive (AdafacLO's factored_dims)

// 1 - (1 - b0) * exp(10 * theta), in float32 as in every implementation, clipped to [0, 1].
float learned_decay(float nominal, float theta);

// The tiles of LoCore's passes over a 2-D tensor (optim/lopt/lo_core.h): pass A sums g^2 over tiles of at
// most kLoPassACols columns and about kLoPassATileElems elements; passes B and C work in tiles of
// kLoTileRows rows.
constexpr int kLoTileRows = 64, kLoPassACols = 1024;
constexpr int64_t kLoPassATileElems = 32768;
// Where the shard plan may cut a 2-D tensor between two ranks of a sharded step of VeLO, small_fc_lopt or
// ELO (core/shard_plan.h): at the rows where a pass-A tile, a pass-B/C tile and a grad-norm chunk
// (ShardPlan::kCutElems) all end, so each rank's partial sums are those one GPU computes; in elements
// (rows x columns). 0 for every other tensor: its statistics are not taken in tiles.
int64_t lo_cut_unit(const TensorInfo& t);

// The decays of a learned optimizer's accumulators: the three momenta m_k, the second moment v, and the
// three factored (Adafactor-style) second moments f_k.
struct LoDecays {
  float m[3], v, f[3];
};
// small_fc_lopt / μLO: the nominal decays (0.9, 0.99, 0.999; v 0.999) moved by the meta-learned offsets
// that its weight files leave out (learned_decay).
LoDecays small_fc_decays();
// VeLO and ELO: the nominal decays as they are: m_k and f_k (0.9, 0.99, 0.999), v 0.999.
LoDecays nominal_decays();
// CELO2 and ELO_CELO2: m_k and f_k (0.9, 0.99, 0.999), v 0.95.
LoDecays celo2_decays();

// VeLO's loss features track 10 EMAs of the clipped training loss; decay j = exp(-1 / 10^e_j), e_j
// evenly spaced from 1 to log10(num_steps). Their running minima start at kVeloLossMinStart.
void velo_loss_decays(int64_t num_steps, float* decay10);
constexpr float kVeloLossMinStart = 999999999999.0f;

struct SmallFcOptions {       // PyLO AdafacLO / MuLO semantics
  double lr = 1.0;            // multiplies the whole step (and the decoupled weight decay)
  double weight_decay = 0.0;  // decoupled, after the step: p -= lr * wd * p
  double step_mult = 0.01, exp_mult = 0.001;
  bool mup = true;      // MuLO: hidden matrices' steps x 1/fan_in (how the published weights were trained)
  bool fast = false;    // MLP on tensor cores (bf16 mma, fp32 accumulate) instead of exact fp32
  std::string weights;  // folder or model.safetensors; empty = weights/mulo
  std::string tie = "pylo";
  bool bf16_record = false;  // {m0, m1, m2, v} in bf16, stochastically rounded (lo_record16.h)
};

struct VeloOptions {  // PyLO VeLO semantics with VeLO's lr = 1
  double lr = 1.0, weight_decay = 0.0;
  int64_t num_steps = 10000;  // planned number of updates: drives the fraction and loss-EMA features
  std::string weights;        // folder with VeLO_RNN/ and VeLO_MLP/, or a JAX/flax "params" file; empty = weights/
  std::string tie = "pylo";
  bool bf16_record = false;  // {m0, m1, m2, v} in bf16, stochastically rounded (lo_record16.h)
};

// CELO2 and ELO_CELO2 (celo2.md 2, 5): PyLO CELO2_naive / ELO_CELO2_naive arguments; ELO_CELO2 changes
// only the defaults (elo_celo2_defaults) and shares the learned accumulators with its AdamW path.
struct Celo2Options {
  double lr = 1e-3, weight_decay = 0.0;  // learned path: p -= lr * (u + wd * p), p before the step
  double adam_lr_mult = 1.0;             // AdamW side path: lr x this (PyLO CUDA and README use 20 for ELO_CELO2)
  double adam_weight_decay = -1.0;       // < 0: weight_decay (PyLO's None)
  double adam_beta1 = 0.9, adam_beta2 = 0.95, adam_eps = 1e-8;  // CELO2 only: ELO_CELO2 uses m_0 and v
  bool adamw_1d = true;       // PyLO use_adamw_for_1d: vectors and embeddings take AdamW (false: all take the MLP)
  bool adamw_head = true;     // heads (Role::Head) count as embeddings: AdamW (celo2.md 3.3, PyLO branch celo2)
  bool orthogonalize = true;  // Newton-Schulz on the direction of matrices (false: "celo2-base")
  bool clip_grad = false;     // optax clip_by_global_norm(clip_norm) over every tensor first
  double clip_norm = 1.0;
  double grad_clip_val = 1000.0;  // then every gradient element clamped to +-this
  double exp_mult = 0.0, rmsmult = 1.0;
  bool param_scale_mult = false;
  int ns_steps = 5;
  double ns_a = 3.4445, ns_b = -4.7750, ns_c = 2.0315, ns_eps = 1e-8;
  // GPU Newton-Schulz operands: bf16 (Muon's, fast), tf32 or fp32 (exact: PyLO's float32; the CPU reference
  // is exact whatever this says).
  std::string ns = "bf16";
  // Pass C's MLP on tensor cores for the 2-D matrices (bf16 layer 1, fp16 layers 2-3, fp32 accumulation;
  // celo2_fast.cu) instead of exact fp32.
  bool fast = false;
  // The learned tensors' {m0, m1, m2, v} in bf16, rounded stochastically (lo_record16.h); ELO_CELO2's AdamW
  // side path keeps its fp32 accumulators.
  bool bf16_record = false;
  std::string weights;  // folder or model.safetensors (CELO2MLP layout); empty = the default (celo2_weights.h)
  std::string tie = "pylo";
  double adam_wd() const { return adam_weight_decay < 0 ? weight_decay : adam_weight_decay; }
};
Celo2Options elo_celo2_defaults();  // weight decay 0.1, global clipping on

// Whether CELO2 / ELO_CELO2 update tensor t with AdamW instead of the learned rule (celo2.md 3): PyLO sends
// a tensor to AdamW iff use_adamw_for_1d and (ndim <= 1 or its group says is_embedding). The table has no
// groups, so "embedding" is read from the role: token and position embeddings, the cls token, the patch
// embedding, and heads unless adamw_head is off. An owner set in the table (Muon's choice) decides first.
bool celo2_uses_adamw(const TensorInfo& t, const Celo2Options& o);

struct EloOptions {  // PyLO ELO_naive (celo2.md 8)
  double lr = 1e-3, weight_decay = 0.0, exp_mult = 0.001;
  bool clip_grad = false;  // optax clip_by_global_norm(clip_norm) over every tensor, then nan_to_num
  double clip_norm = 1.0;
  bool fast = false;    // GPU: MLP on tensor cores (small_fc_lopt's fast pass C) instead of exact fp32
  std::string weights;  // folder or model.safetensors (MetaMLP layout); empty = weights/elo
  std::string tie = "pylo";
};
