#include <cstring>

#include "common/cuda_check.h"
#include "kernels/reduce.h"
#include "train/step_runner.h"

namespace {
// Field sizes in bytes, each rounded up to 16 so that every staged field stays aligned.
size_t padded(int64_t n, size_t elem) { return (size_t(n) * elem + 15) / 16 * 16; }
}  // namespace

StepRunner::StepRunner(Model& model, Optimizer& opt, GradClipper& clipper, bool clip, int accum, bool cuda_graph,
                       bool overlap)
    : model_(model),
      opt_(opt),
      clipper_(clipper),
      clip_(clip),
      graphs_(cuda_graph),
      accum_(accum),
      shape_(model.batch_shape()),
      loss_(1, "loss") {
  micro_bytes_ = padded(shape_.tokens, 4) + padded(shape_.targets, 4) + padded(shape_.pixels, 1) +
                 padded(shape_.soft_targets, 4) + padded(1, sizeof(ImageMix));
  if (overlap) {
    grouped_ = dynamic_cast<GroupedOptimizer*>(&opt);
    CHECK(grouped_ && !clip);
  }
  try {  // the destructor frees what was made if a later call throws
    if (overlap) {
      // The optimizer's stream first: measured on the H100 (README, "Overlap"), it left GPT-2 124M's step
      // at 4 x 1024 tokens 2% shorter than a low-priority optimizer stream.
      int least = 0, greatest = 0;
      CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking, as below
      CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, greatest));
      CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
    } else if (graphs_) {
      CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking: ordered with the default stream's work
    }
    if (graphs_) CUDA_CHECK(cudaMallocHost(&staged_, size_t(accum) * micro_bytes_));
    CUDA_CHECK(cudaMallocHost(&host_, 2 * sizeof(float)));
    for (auto& e : ev_) CUDA_CHECK(cudaEventCreate(&e));
  } catch (...) {
    free_resources();  // a throwing constructor runs no destructor
    throw;
  }
}

StepRunner::~StepRunner() { free_resources(); }

void StepRunner::free_resources() {  // no checks: nothing may throw from here
  for (auto& e : ev_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : {fork_, join_})
    if (e) cudaEventDestroy(e);
  if (host_) cudaFreeHost(host_);
  if (staged_) cudaFreeHost(staged_);
  for (cudaStream_t s : {stream_, side_})
    if (s) cudaStreamDestroy(s);
  host_ = nullptr;
  staged_ = nullptr;
  stream_ = side_ = nullptr;
  fork_ = join_ = nullptr;
}

// The staged fields of a micro-batch: tokens, targets, pixels, soft targets, then the mix draw; the
// fields are null when the model does not take them, or when the staged batch lacked them.
Batch StepRunner::staged(int micro) const {
  char* p = staged_ + size_t(micro) * micro_bytes_;
  Batch b;
  b.tokens = shape_.tokens ? reinterpret_cast<const int32_t*>(p) : nullptr;
  p += padded(shape_.tokens, 4);
  b.targets = shape_.targets ? reinterpret_cast<const int32_t*>(p) : nullptr;
  p += padded(shape_.targets, 4);
  b.pixels = shape_.pixels ? reinterpret_cast<const uint8_t*>(p) : nullptr;
  p += padded(shape_.pixels, 1);
  b.soft_targets = shape_.soft_targets && soft_ ? reinterpret_cast<const float*>(p) : nullptr;
  p += padded(shape_.soft_targets, 4);
  b.mix = shape_.pixels ? reinterpret_cast<const ImageMix*>(p) : nullptr;
  return b;
}

void StepRunner::enqueue_grads(const BatchSource* batches) {
  opt_.arena().zero_grads(stream_);
  for (int mi = 0; mi < accum_; mi++) {
    if (batches) {
      const Batch b = batches->next();
      soft_ = b.soft_targets != nullptr;  // what a captured step will stage
      model_.set_batch(b, stream_);
      batches->release(stream_);
    } else {
      model_.set_batch(staged(mi), stream_);
    }
    model_.forward(stream_);
    model_.loss_and_dlogits(1.0f / float(accum_), stream_);
    scale_add(loss_.get(), model_.d_loss(), 1.0f / float(accum_), mi > 0, stream_);  // final before any step
    const bool early = grouped_ && mi == accum_ - 1;  // the last micro-batch makes the gradients final
    if (early) model_.set_block_hook([this](int block, cudaStream_t s) { step_group_early(block, s); });
    model_.backward(stream_);
    if (early) model_.set_block_hook(nullptr);
  }
  if (grouped_) {  // the norm (for the log; clipping is off) beside the last groups' steps, then the join
    clipper_.run(stream_);
    CUDA_CHECK(cudaEventRecord(join_, side_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, join_, 0));
  }
}

// Group `block` (block -1: the last group, every tensor outside the blocks) after the work on s so far.
void StepRunner::step_group_early(int block, cudaStream_t s) {
  const int last = grouped_->groups() - 1;
  CHECK(block >= -1 && block < last);
  StepInfo info;
  info.d_loss = loss_.get();
  CUDA_CHECK(cudaEventRecord(fork_, s));
  CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
  grouped_->step_group(block >= 0 ? block : last, info, side_);
}

void StepRunner::enqueue_optimizer() {
  if (grouped_) return;  // stepped in enqueue_grads
  StepInfo info;
  info.d_loss = loss_.get();
  clipper_.run(stream_);
  if (clip_) info.d_grad_scale = clipper_.d_scale();
  opt_.step(info, stream_);
}

// The previous replay has finished reading the staging buffers: run() waited for it. A captured step
// replays the fields the first staged batch had, so every batch must bring the same ones.
void StepRunner::stage(const BatchSource& batches) {
  for (int mi = 0; mi < accum_; mi++) {
    const Batch b = batches.next();
    const Batch d = staged(mi);
    CHECK(!d.soft_targets == !b.soft_targets);
    auto copy = [](const void* dst, const void* src, size_t bytes) {
      if (dst && src) std::memcpy(const_cast<void*>(dst), src, bytes);
    };
    copy(d.tokens, b.tokens, size_t(shape_.tokens) * 4);
    copy(d.targets, b.targets, size_t(shape_.targets) * 4);
    copy(d.pixels, b.pixels, size_t(shape_.pixels));
    copy(d.soft_targets, b.soft_targets, size_t(shape_.soft_targets) * 4);
    const ImageMix none;
    if (d.mix) copy(d.mix, b.mix ? b.mix : &none, sizeof(ImageMix));
    batches.release(stream_);
  }
}

StepRunner::Result StepRunner::run(const BatchSource& batches) {
  if (graphs_ && steps_run_ == 1) {  // capture after one eager step, which did the lazy set-ups
    graph_grads_ = CudaGraph::capture(stream_, [&] { enqueue_grads(nullptr); });
    if (!grouped_) graph_opt_ = CudaGraph::capture(stream_, [&] { enqueue_optimizer(); });
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
