// The CPU double-precision reference of one pre-LayerNorm transformer block, the oracle for the GPU block
// (models/transformer_block) and the block of every reference model (GPT-2, ViT):
//   mid = in + dropout(proj(attention(LN1(in))))      out = mid + dropout(fc_proj(gelu(fc(LN2(mid)))))
// with the attention probabilities dropped out too. BlockShape chooses causal or not, the LayerNorm
// epsilon, the GELU form, the MLP width and separate or fused q/k/v. Parameters are read from, and
// gradients accumulated into, the arena's flat layout at the offsets of the block's tensors (BlockTensors).
#pragma once
#include <cstdint>
#include <vector>

#include "core/param_table.h"
#include "models/block_table.h"
#include "models/ref_ops.h"

// What one block's backward needs from its forward. Rows are tokens n = b T + t: x_in, ln1, q, k, v, ctx,
// x_mid, ln2 are (B*T, C), fc (the MLP's pre-activation) and gelu (B*T, hidden); att (the softmax
// probabilities) and att_keep (their dropout factors) are (B, heads, T, T), zero where the mask hides a key.
struct RefBlockActs {
  int B = 0, T = 0;
  std::vector<double> x_in, ln1, ln1_mean, ln1_rstd, q, k, v, att, att_keep, ctx, x_mid, ln2, ln2_mean, ln2_rstd, fc,
      gelu;
};

class RefBlock {
 public:
  // `sites`: where the block's dropout masks come from (kernels/dropout.h); unused without dropout.
  RefBlock(const BlockShape& s, const BlockTensors& ix, const ParamTable& t, BlockSites sites = {});
  // x (B*T, C): the block's input on entry, its output on return. P: all parameters (flat layout).
  void forward(const double* P, const RefDropout& drop, int B, int T, double* x, RefBlockActs* a) const;
  // dx (B*T, C): d(out) on entry, d(in) on return. The block's parameter gradients are added into G (the
  // flat layout of P). `a` and `drop` as the forward had them.
  void backward(const double* P, const RefDropout& drop, const RefBlockActs& a, double* dx, double* G) const;
  const BlockShape& shape() const { return s_; }

 private:
  void qkv_forward(const double* P, RefBlockActs* a) const;
  void attention_forward(const RefDropout& drop, RefBlockActs* a) const;
  void mlp_forward(const double* P, RefBlockActs* a, std::vector<double>* out) const;
  void add_dropped(const RefDropout& drop, uint32_t site, const std::vector<double>& y, double* x) const;
  void mlp_backward(const double* P, const RefDropout& drop, const RefBlockActs& a, double* dx, double* G) const;
  void attention_backward(const double* P, const RefDropout& drop, const RefBlockActs& a, double* dx, double* G) const;
  void attention_core_backward(const RefBlockActs& a, const std::vector<double>& dctx, std::vector<double>* dq,
                               std::vector<double>* dk, std::vector<double>* dv) const;
  void qkv_backward(const double* P, const RefBlockActs& a, const std::vector<double>& dq,
                    const std::vector<double>& dk, const std::vector<double>& dv, double* dln1, double* G) const;
  double gelu(double u) const;
  double gelu_grad(double u) const;
  // The number of keys query i attends to: all T, or the first i + 1 with the causal mask.
  int keys(int i, int T) const { return s_.causal ? i + 1 : T; }

  BlockShape s_;
  BlockSites sites_;
  // offsets into the flat layout; qkvw_[1..2], qkvb_[1..2] unused (-1) with fused q/k/v
  int64_t ln1w_, ln1b_, qkvw_[3], qkvb_[3], projw_, projb_, ln2w_, ln2b_, fcw_, fcb_, fcprojw_, fcprojb_;
};
