#include "common/cuda_check.h"
#include "common/digest.h"
#include "data/prefetcher.h"

BatchPrefetcher::BatchPrefetcher(TokenLoader& loader, int B, int T, int depth)
    : loader_(loader), B_(B), T_(T), n_(int64_t(B) * T), slots_(size_t(depth)), consumed_(loader.position()) {
  for (Slot& s : slots_) {
    CUDA_CHECK(cudaMallocHost(&s.x, size_t(n_) * sizeof(int32_t)));
    CUDA_CHECK(cudaMallocHost(&s.y, size_t(n_) * sizeof(int32_t)));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
  }
  thread_ = std::thread([this, device = current_device()] {
    cudaSetDevice(device);  // this process's GPU, not GPU 0 (common/cuda_check.h)
    run();
  });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (Slot& s : slots_) {
    cudaEventSynchronize(s.copied);
    cudaEventDestroy(s.copied);
    cudaFreeHost(s.x);
    cudaFreeHost(s.y);
  }
}

void BatchPrefetcher::run() {
  for (size_t i = 0;; i = (i + 1) % slots_.size()) {
    Slot& s = slots_[i];
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return stop_ || !s.filled; });
      if (stop_) return;
    }
    try {
      CUDA_CHECK(cudaEventSynchronize(s.copied));  // the GPU is done reading this slot
      loader_.next(s.x, s.y);
      const size_t row = size_t(T_) * sizeof(int32_t);
      s.digest = digest_samples(s.x, row, s.y, row, B_);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> g(mu_);
    s.after = loader_.position();
    s.filled = true;
    cv_.notify_all();
  }
}

BatchPrefetcher::Batch BatchPrefetcher::next() {
  Slot& s = slots_[size_t(head_)];
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [&] { return s.filled || error_; });
  if (!s.filled) std::rethrow_exception(error_);
  consumed_ = s.after;
  return {s.x, s.y, s.digest};
}

void BatchPrefetcher::release(cudaStream_t stream) {
  Slot& s = slots_[size_t(head_)];
  CUDA_CHECK(cudaEventRecord(s.copied, stream));
  {
    std::lock_guard<std::mutex> g(mu_);
    s.filled = false;
  }
  cv_.notify_all();
  head_ = (head_ + 1) % int(slots_.size());
}
