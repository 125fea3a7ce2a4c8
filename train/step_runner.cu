#include <cstring>

#include "common/cuda_check.h"
#include "kernels/reduce.h"
#include "train/step_runner.h"

StepRunner::StepRunner(Model& model, Optimizer& opt, GradClipper& clipper, bool clip, int accum, int64_t micro_tokens,
                       bool cuda_graph)
    : model_(model),
      opt_(opt),
      clipper_(clipper),
      clip_(clip),
      graphs_(cuda_graph),
      accum_(accum),
      micro_tokens_(micro_tokens),
      loss_(1, "loss") {
  if (graphs_) {
    CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking: ordered with the default stream's work
    CUDA_CHECK(cudaMallocHost(&staged_, size_t(accum) * 2 * size_t(micro_tokens) * sizeof(int32_t)));
  }
  CUDA_CHECK(cudaMallocHost(&host_, 2 * sizeof(float)));
  for (auto& e : ev_) CUDA_CHECK(cudaEventCreate(&e));
}

StepRunner::~StepRunner() {  // no checks: nothing may throw from here
  for (auto& e : ev_) cudaEventDestroy(e);
  cudaFreeHost(host_);
  cudaFreeHost(staged_);
  if (stream_) cudaStreamDestroy(stream_);
}

void StepRunner::enqueue_grads(const BatchSource* batches) {
  opt_.arena().zero_grads(stream_);
  for (int mi = 0; mi < accum_; mi++) {
    if (batches) {
      model_.set_batch(batches->next(), stream_);
      batches->release(stream_);
    } else {
      const int32_t* x = staged_ + size_t(2 * mi) * size_t(micro_tokens_);
      model_.set_batch(Batch{x, x + micro_tokens_}, stream_);
    }
    model_.forward(stream_);
    model_.loss_and_dlogits(1.0f / float(accum_), stream_);
    model_.backward(stream_);
    scale_add(loss_.get(), model_.d_loss(), 1.0f / float(accum_), mi > 0, stream_);
  }
}

void StepRunner::enqueue_optimizer() {
  StepInfo info;
  info.d_loss = loss_.get();
  clipper_.run(stream_);
  if (clip_) info.d_grad_scale = clipper_.d_scale();
  opt_.step(info, stream_);
}

// The previous replay has finished reading the staging buffers: run() waited for it.
void StepRunner::stage(const BatchSource& batches) {
  for (int mi = 0; mi < accum_; mi++) {
    const Batch b = batches.next();
    int32_t* x = staged_ + size_t(2 * mi) * size_t(micro_tokens_);
    std::memcpy(x, b.tokens, size_t(micro_tokens_) * sizeof(int32_t));
    std::memcpy(x + micro_tokens_, b.targets, size_t(micro_tokens_) * sizeof(int32_t));
    batches.release(stream_);
  }
}

StepRunner::Result StepRunner::run(const BatchSource& batches) {
  if (graphs_ && steps_run_ == 1) {  // capture after one eager step, which did the lazy set-ups
    graph_grads_ = CudaGraph::capture(stream_, [&] { enqueue_grads(nullptr); });
    graph_opt_ = CudaGraph::capture(stream_, [&] { enqueue_optimizer(); });
  }
  CUDA_CHECK(cudaEventRecord(ev_[0], stream_));
  if (graph_grads_) {
    stage(batches);
    graph_grads_.launch(stream_);
  } else {
    enqueue_grads(&batches);
  }
  CUDA_CHECK(cudaEventRecord(ev_[1], stream_));
  if (graph_opt_)
    graph_opt_.launch(stream_);
  else
    enqueue_optimizer();
  CUDA_CHECK(cudaEventRecord(ev_[2], stream_));
  CUDA_CHECK(cudaMemcpyAsync(host_, loss_.get(), 4, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaMemcpyAsync(host_ + 1, clipper_.d_norm(), 4, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaEventRecord(ev_[3], stream_));
  CUDA_CHECK(cudaEventSynchronize(ev_[3]));
  Result r{host_[0], host_[1], 0.0f, 0.0f};
  CUDA_CHECK(cudaEventElapsedTime(&r.ms, ev_[0], ev_[3]));
  CUDA_CHECK(cudaEventElapsedTime(&r.opt_ms, ev_[1], ev_[2]));
  steps_run_++;
  return r;
}
