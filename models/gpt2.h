// Gpt2: the GPT-2 interface (a Model with token batches and logits); Gpt2Fp32 and Gpt2Bf16 implement it.
// What the trainer and the tools need from a GPT-2 implementation on the arena. Two exist:
//   "fp32", Gpt2Fp32 (models/gpt2_fp32): every activation and matmul in fp32 (cuBLAS SGEMM, no TF32): the
//           reference-grade model that the CPU reference checks to 1e-5;
//   "bf16", Gpt2Bf16 (models/gpt2_bf16): mixed precision, the fast one: bf16 weights copy and activations,
//           cuBLASLt tensor-core matmuls with fp32 accumulation and fused epilogues, flash attention, fp32
//           master weights and fp32 gradients in the arena.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "core/arena.h"
#include "kernels/attention_kind.h"
#include "models/model.h"
#include "models/model_tables.h"

class Gpt2 : public Model {
 public:
  using Model::set_batch;
  // B*T tokens and their next tokens (targets null for inference), as a Batch.
  void set_batch(const int* tokens, const int* targets, cudaStream_t s) { set_batch(Batch{tokens, targets}, s); }
  // Synchronous copy of logits rows [first, first + count) to host as fp32 (count * vocab floats).
  virtual void logits_to_host(int first, int count, float* host) const = 0;
  virtual int B() const = 0;
  virtual int T() const = 0;
  BatchShape batch_shape() const override {
    const int64_t n = int64_t(B()) * T();
    return {n, n, 0, 0};
  }
};

// precision: "fp32" or "bf16" (the arena must then have its bf16 copy); attention: the bf16 model's kernels
// (the fp32 model has its own and refuses cuDNN's).
std::unique_ptr<Gpt2> make_gpt2(const std::string& precision, const Gpt2Shape& shape, Arena& arena, int B, int T,
                                Attention attention = Attention::kOurs);
