// Gpt2Fp32: the fp32 GPT-2 on the GPU, the reference-grade implementation of Gpt2 (--precision fp32).
// Over the parameter arena: forward to logits, fused softmax + cross-entropy that leaves d(loss)/d(logits) in
// place, and a backward that accumulates every gradient into the arena's gradient buffer. Activations are
// kept for one (B, T) micro-batch. q, k, v live side by side in one (N, 3C) buffer whether the model has
// separate projections or a fused qkv matrix.
#pragma once
#include <cublas_v2.h>

#include <vector>

#include "common/device_buffer.h"
#include "kernels/embedding.h"
#include "models/gpt2.h"

class Gpt2Fp32 : public Gpt2 {
 public:
  Gpt2Fp32(const Gpt2Shape& shape, Arena& arena, int B, int T);
  ~Gpt2Fp32();
  Gpt2Fp32(const Gpt2Fp32&) = delete;
  Gpt2Fp32& operator=(const Gpt2Fp32&) = delete;

  using Gpt2::set_batch;
  void set_batch(const Batch& b, cudaStream_t s) override;
  void forward(cudaStream_t s) override;
  void loss_and_dlogits(float grad_scale, cudaStream_t s) override;
  void backward(cudaStream_t s) override;
  const float* d_loss() const override { return loss_mean_.get(); }
  void logits_to_host(int first, int count, float* host) const override;
  const float* logits() const { return logits_.get(); }
  int B() const override { return B_; }
  int T() const override { return T_; }

 private:
  struct LayerParams {
    const float *ln1w, *ln1b, *qkvw[3], *qkvb[3], *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
    float *d_ln1w, *d_ln1b, *d_qkvw[3], *d_qkvb[3], *d_projw, *d_projb, *d_ln2w, *d_ln2b, *d_fcw, *d_fcb, *d_fcprojw,
        *d_fcprojb;
  };
  struct LayerActs {
    DeviceBuffer<float> x_in, ln1, ln1_mean, ln1_rstd, qkv, att, lse, x_mid, ln2, ln2_mean, ln2_rstd, fc, gelu;
  };
  float* param(int i) const;  // tensor i of the table in the arena's parameters
  float* grad(int i) const;   // and in its gradients
  LayerParams layer_params(const BlockTensors& b) const;
  LayerActs layer_acts() const;
  void alloc_top_and_gradients();
  void add_branch(float* branch, const float* stream, uint32_t site, cudaStream_t s);
  const float* branch_grad(const float* dres, uint32_t site, cudaStream_t s);

  Gpt2Shape s_;
  Arena& arena_;
  int B_, T_, N_;
  cublasHandle_t blas_ = nullptr;
  std::vector<LayerParams> lp_;
  std::vector<LayerActs> la_;
  const float *wte_, *wpe_, *lnfw_, *lnfb_;
  float *d_wte_, *d_wpe_, *d_lnfw_, *d_lnfb_;
  DeviceBuffer<float> x_final_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_, loss_mean_;
  DeviceBuffer<float> dres_, dln_, datt_, dqkv_, dbig_, att_D_;
  TokenBatch batch_;
};
