// Elementwise dropout on (rows, C) activations, fp32 or bf16, with the masks of kernels/dropout.h
// (row = element / C, col = element % C). Also the device counter of training micro-batches.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/device_buffer.h"
#include "kernels/dropout.h"

// out = (add ? add : 0) + keep * scale * x. out may be x or add (in place). C must be even.
// Serves the forward (embeddings; a residual branch added to the stream) and the backward (the branch's
// gradient is the stream's gradient with the same mask and scale).
void dropout_forward(float* out, const float* x, const float* add, int64_t rows, int C, const DropoutArgs& d,
                     cudaStream_t s);
void dropout_forward(__nv_bfloat16* out, const __nv_bfloat16* x, const __nv_bfloat16* add, int64_t rows, int C,
                     const DropoutArgs& d, cudaStream_t s);
// *counter += 1 (one thread), so that each micro-batch draws new masks, also inside a CUDA graph.
void dropout_counter_advance(uint64_t* counter, cudaStream_t s);

// A model's dropout setting and its device counter of training micro-batches: the masks of a micro-batch
// depend on (seed, counter), so every micro-batch draws new ones and a resumed run, given the counter
// back, draws the same ones as an uninterrupted run.
class DropoutState {
 public:
  DropoutState() : counter_(1, "dropout counter") { counter_.zero(); }
  void set(float p, uint64_t seed);  // 0 <= p < 1; p = 0 turns dropout off
  float p() const { return p_; }
  bool on() const { return threshold_ != 0; }
  DropoutArgs site(uint32_t site) const;  // the kernel arguments for one site (off when p = 0)
  void advance(cudaStream_t s) const {    // after a training micro-batch's backward
    if (on()) dropout_counter_advance(counter_.get(), s);
  }
  uint64_t counter() const { return counter_.download(1)[0]; }
  void set_counter(uint64_t n) { counter_.upload(&n, 1); }

 private:
  float p_ = 0.0f;
  uint64_t seed_ = 0;
  uint32_t threshold_ = 0;
  DeviceBuffer<uint64_t> counter_;
};
