// The interface every model offers the trainer, the tools and the tests: a batch of tokens or images, a
// forward pass to the loss, a backward pass that accumulates into the arena's gradients, and a hook that
// backward calls as each block's gradients become final — where multi-GPU gradient communication and an
// optimizer that starts early plug in, without either knowing the model.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/image_mix.h"
#include "kernels/dropout_kernels.h"

// One micro-batch on the host. Pinned memory lets the copy run asynchronously (the caller then keeps it
// untouched until an event recorded after set_batch has passed); pageable memory is copied before
// set_batch returns.
struct Batch {
  const int32_t* tokens = nullptr;      // language models: (B, T) token ids
  const int32_t* targets = nullptr;     // (B, T) next tokens, or (B) class labels; null: inference
  const uint8_t* pixels = nullptr;      // image models: (B, H, W, channels) bytes, as decoded, cropped, flipped
  const float* soft_targets = nullptr;  // (B, classes) label distributions (mixup, label smoothing); or null
  const ImageMix* mix = nullptr;        // the batch's mixup / cutmix draw (common/image_mix.h); null: none
  uint64_t digest = 0;                  // not read by the model: the trainers log it (common/digest.h)
};

// How many elements each field of a model's micro-batch holds (0: a field it does not take), so that a
// caller can stage batches in memory of its own (the CUDA-graph step copies them to pinned buffers).
struct BatchShape {
  int64_t tokens = 0, targets = 0, pixels = 0, soft_targets = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual void set_batch(const Batch& b, cudaStream_t s) = 0;
  virtual void forward(cudaStream_t s) = 0;  // to logits
  virtual void loss_and_dlogits(float grad_scale,
                                cudaStream_t s) = 0;  // d_loss() = mean loss; logits become its gradient * grad_scale
  virtual void backward(cudaStream_t s) = 0;          // accumulates into arena.grads()
  virtual const float* d_loss() const = 0;            // device scalar
  virtual BatchShape batch_shape() const = 0;

  // Called on backward's stream with block l = L-1, ..., 0 once that block's parameter gradients are
  // final, then with -1 once the rest (embeddings, final norm, head) are. Empty: no calls.
  using BlockHook = std::function<void(int block, cudaStream_t s)>;
  void set_block_hook(BlockHook hook) { block_hook_ = std::move(hook); }
  // Where the model calls it (calls_mlp_hook()), on backward's stream once block l's MLP tensors
  // (block_mlp_list, models/block_table.h) are final, before the rest of block l's backward: a data-parallel
  // sum can then start on two thirds of the block while its attention's backward runs.
  void set_mlp_hook(BlockHook hook) { mlp_hook_ = std::move(hook); }
  virtual bool calls_mlp_hook() const { return false; }

  // Data parallel, for a token table tied to the head (GPT-2's bf16 model; others return {}): its gradient
  // is summed over the processes in two parts instead of as one (vocab, C) table after backward. The
  // head's part is summed during backward: `early` is called on backward's stream once the tensors that
  // the call returns in `early` (the table, the final norm) hold all this process's gradient but the
  // lookup's. The lookup's part is then computed on every process from every process's positions (their
  // token ids and residual gradients, which `gather` all-gathers rank by rank from `mine` into `all`), which
  // also completes the tensors returned in `gathered` (the table, the position embedding) with no sum.
  // Where the processes read each other's GPU memory (`shared` set), each sums its own positions per token
  // instead, into its buffer of `shared(bytes)` (called once, by every process: every process's buffer,
  // rank by rank, mapped here), and adds every process's sums rank by rank, after `barrier` (on backward's
  // stream: waits until every process's work before its barrier call, and the early sum, are done); no
  // gather. Every process then holds the same table.
  // These calls happen only in a backward with a block hook: the micro-batch that makes gradients final.
  struct EmbeddingSum {
    int world = 1, rank = 0;
    std::function<void(cudaStream_t)> early;
    std::function<void(const void* mine, void* all, size_t bytes, cudaStream_t)> gather;
    std::function<std::vector<void*>(size_t bytes)> shared;
    std::function<void(cudaStream_t)> barrier;
  };
  struct EmbeddingParts {
    std::vector<int> early, gathered;  // table indices; both empty: not taken
  };
  virtual EmbeddingParts sum_embedding_in_parts(const EmbeddingSum& e) {
    (void)e;
    return {};
  }

  // Kernel variants the model picked by timing when it was built ("name=value;..."; empty if none).
  // Checkpoints record them and a resumed run restores them, so that it repeats the first run bit for bit.
  virtual std::string kernel_choices() const { return ""; }
  virtual void set_kernel_choices(const std::string& choices) { (void)choices; }

  // Dropout in the model's places with probability p, for the micro-batches that follow; p = 0, the
  // default, turns it off (evaluation, sampling). The masks are drawn from (seed, a device counter of
  // micro-batches, place, element), see kernels/dropout.h; backward() advances the counter, and a resumed
  // run sets it back.
  void set_dropout(float p, uint64_t seed) { dropout_.set(p, seed); }
  float dropout() const { return dropout_.p(); }
  uint64_t dropout_counter() const { return dropout_.counter(); }
  void set_dropout_counter(uint64_t n) { dropout_.set_counter(n); }

 protected:
  void block_done(int block, cudaStream_t s) const {
    if (block_hook_) block_hook_(block, s);
  }
  void mlp_done(int block, cudaStream_t s) const {
    if (mlp_hook_) mlp_hook_(block, s);
  }
  DropoutState dropout_;
  BlockHook block_hook_, mlp_hook_;
};
