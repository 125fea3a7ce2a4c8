// What the trainer and the tools need from a GPT-2 implementation on the arena. Two exist:
//   "fp32": every activation and matmul in fp32 (cuBLAS SGEMM, no TF32): the reference-grade model
//           that the CPU reference checks to 1e-5;
//   "bf16": mixed precision, the fast one: bf16 weights copy and activations, cuBLASLt tensor-core
//           matmuls with fp32 accumulation and fused epilogues, flash attention, fp32 master weights and
//           fp32 gradients in the arena.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernels/dropout_kernels.h"
#include "models/model_tables.h"
#include "optim/arena.h"

class Gpt2Net {
 public:
  virtual ~Gpt2Net() = default;
  // Starts copying a micro-batch of B*T tokens (and targets, or null for inference) on stream s. The
  // host arrays must stay untouched until the copy is done: pass pinned memory and wait on an event
  // recorded after this call, or pageable memory (then the copy completes before the call returns).
  virtual void set_batch(const int* tokens, const int* targets, cudaStream_t s) = 0;
  virtual void forward(cudaStream_t s) = 0;                          // to logits (B, T, V)
  virtual void loss_and_dlogits(float grad_scale, cudaStream_t s) = 0;  // d_loss() = mean loss; logits become its gradient * grad_scale
  virtual void backward(cudaStream_t s) = 0;                         // accumulates into arena.grads()
  virtual const float* d_loss() const = 0;                           // device scalar
  // Synchronous copy of logits rows [first, first + count) to host as fp32 (count * vocab floats).
  virtual void logits_to_host(int first, int count, float* host) const = 0;
  virtual int B() const = 0;
  virtual int T() const = 0;
  // Kernel variants the model picked by timing when it was built ("name=value;..."; empty if none).
  // Checkpoints record them and a resumed run restores them, so that it repeats the first run bit for bit.
  virtual std::string kernel_choices() const { return ""; }
  virtual void set_kernel_choices(const std::string& choices) { (void)choices; }

  // Dropout in GPT-2's four places (the embeddings, the attention probabilities, the outputs of the
  // attention and MLP projections before they join the residual stream) with probability p, for the
  // micro-batches that follow; p = 0, the default, turns it off (evaluation, sampling). The masks are
  // drawn from (seed, a device counter of micro-batches, place, element), see kernels/dropout.h;
  // backward() advances the counter, and a resumed run sets it back.
  void set_dropout(float p, uint64_t seed) { dropout_.set(p, seed); }
  float dropout() const { return dropout_.p(); }
  uint64_t dropout_counter() const { return dropout_.counter(); }
  void set_dropout_counter(uint64_t n) { dropout_.set_counter(n); }

 protected:
  DropoutState dropout_;
};

// precision: "fp32" or "bf16" (the arena must then have its bf16 copy).
std::unique_ptr<Gpt2Net> make_gpt2(const std::string& precision, const Gpt2Shape& shape, Arena& arena, int B, int T);
