#include "common/cuda_check.h"
#include "common/digest.h"
#include "data/image_prefetcher.h"

ImagePrefetcher::ImagePrefetcher(ImageLoader& loader, int depth)
    : loader_(loader), slots_(size_t(depth)), consumed_(loader.position()) {
  const ImageLoaderOptions& o = loader.options();
  const size_t B = size_t(o.batch);
  try {
    for (Slot& s : slots_) {
      CUDA_CHECK(cudaMallocHost(&s.pixels, B * size_t(o.size) * size_t(o.size) * size_t(o.channels)));
      CUDA_CHECK(cudaMallocHost(&s.labels, B * sizeof(int32_t)));
      CUDA_CHECK(cudaMallocHost(&s.soft, B * size_t(o.classes) * sizeof(float)));
      CUDA_CHECK(cudaMallocHost(&s.mix, sizeof(ImageMix)));
      CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    }
  } catch (...) {
    free_slots();
    throw;
  }
  thread_ = std::thread([this, device = current_device()] {
    cudaSetDevice(device);  // this process's GPU, not GPU 0 (common/cuda_check.h)
    run();
  });
}

void ImagePrefetcher::free_slots() {
  for (Slot& s : slots_) {
    if (s.copied) {
      cudaEventSynchronize(s.copied);
      cudaEventDestroy(s.copied);
    }
    cudaFreeHost(s.pixels);
    cudaFreeHost(s.labels);
    cudaFreeHost(s.soft);
    cudaFreeHost(s.mix);
    s = Slot();
  }
}

ImagePrefetcher::~ImagePrefetcher() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  free_slots();
}

void ImagePrefetcher::run() {
  for (size_t i = 0;; i = (i + 1) % slots_.size()) {
    Slot& s = slots_[i];
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return stop_ || !s.filled; });
      if (stop_) return;
    }
    int real = 0;
    try {
      CUDA_CHECK(cudaEventSynchronize(s.copied));  // the GPU is done reading this slot
      real = loader_.next({s.pixels, s.labels, s.soft, s.mix});
      const ImageLoaderOptions& o = loader_.options();
      s.digest = digest_samples(s.pixels, size_t(o.size) * size_t(o.size) * size_t(o.channels), s.labels,
                                sizeof(int32_t), real);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> g(mu_);
    s.after = loader_.position();
    s.real = real;
    s.filled = true;
    cv_.notify_all();
    if (real == 0) return;  // an evaluation pass is over: nothing more to read
  }
}

ImagePrefetcher::Batch ImagePrefetcher::next() {
  Slot& s = slots_[size_t(head_)];
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [&] { return s.filled || error_; });
  if (!s.filled) std::rethrow_exception(error_);
  consumed_ = s.after;
  return {s.pixels, s.labels, loader_.soft_targets() ? s.soft : nullptr, s.mix, s.real, s.digest};
}

void ImagePrefetcher::release(cudaStream_t stream) {
  Slot& s = slots_[size_t(head_)];
  CUDA_CHECK(cudaEventRecord(s.copied, stream));
  {
    std::lock_guard<std::mutex> g(mu_);
    s.filled = false;
  }
  cv_.notify_all();
  head_ = (head_ + 1) % int(slots_.size());
}
