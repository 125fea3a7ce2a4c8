// One training step on the GPU: `accum` micro-batches whose gradients accumulate in the arena (their
// mean loss kept on the device), global grad-norm clipping, and one optimizer step over the tensors it
// owns. With CUDA graphs, the micro-batches and the optimizer are each captured once - at the second
// step, after an eager one did the lazy set-ups - and replayed; a capture needs fixed host buffers, so
// each step's batches are then staged through pinned memory. Only the step's loss and grad norm come
// back to the host, after everything is enqueued.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "common/cuda_graph.h"
#include "common/device_buffer.h"
#include "models/model.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"

// Where a step's micro-batches come from: next() returns one (on the host, its fields sized as the model's
// batch_shape says); release(s) is called once the copies out of it are enqueued on s.
struct BatchSource {
  std::function<Batch()> next;
  std::function<void(cudaStream_t)> release;
};

class StepRunner {
 public:
  StepRunner(Model& model, Optimizer& opt, GradClipper& clipper, bool clip, int accum, bool cuda_graph);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  struct Result {
    float loss, grad_norm;  // the step's mean training loss and global gradient norm (before clipping)
    float ms, opt_ms;       // the whole step, and its clipping + optimizer part
  };
  Result run(const BatchSource& batches);  // waits for the step to finish

 private:
  void enqueue_grads(const BatchSource* batches);  // null: from the staged copies
  void enqueue_optimizer();
  void stage(const BatchSource& batches);
  Batch staged(int micro) const;  // micro-batch `micro`'s fields in the staging buffer
  void free_resources();

  Model& model_;
  Optimizer& opt_;
  GradClipper& clipper_;
  bool clip_, graphs_;
  int accum_;
  BatchShape shape_;
  size_t micro_bytes_ = 0;  // one staged micro-batch: its fields and the mix draw
  bool soft_ = false;       // the batches carry soft targets (seen in the eager step before a capture)
  int steps_run_ = 0;
  cudaStream_t stream_ = nullptr;  // the legacy default stream, or with graphs a blocking stream of its own
  CudaGraph graph_grads_, graph_opt_;
  char* staged_ = nullptr;  // pinned: accum micro-batches
  float* host_ = nullptr;   // pinned: loss, norm
  cudaEvent_t ev_[4] = {};  // step start, optimizer start, optimizer end, step end
  DeviceBuffer<float> loss_;
};
