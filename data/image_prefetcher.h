// Runs an ImageLoader on a CPU thread a few batches ahead, into pinned host memory, so that the GPU
// never waits on decoding and the copies to it are asynchronous (data/prefetcher's scheme for images).
#pragma once
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/image_loader.h"

class ImagePrefetcher {
 public:
  // The loader must not be used by anyone else while the prefetcher lives.
  explicit ImagePrefetcher(ImageLoader& loader, int depth = 3);
  ~ImagePrefetcher();
  ImagePrefetcher(const ImagePrefetcher&) = delete;
  ImagePrefetcher& operator=(const ImagePrefetcher&) = delete;

  struct Batch {  // pinned; soft_targets null when the loader makes none
    const uint8_t* pixels;
    const int32_t* labels;
    const float* soft_targets;
    const ImageMix* mix;
    int real;         // how many samples are real (ImageLoader::next); 0: an evaluation pass is over
    uint64_t digest;  // of its images with their labels (common/digest.h)
  };
  Batch next();                  // waits for the next batch; rethrows the loader's error
  void release(cudaStream_t s);  // once the copies out of next()'s batch are enqueued on s
  ImageLoader::Position position() const { return consumed_; }  // after the last batch next() returned

 private:
  struct Slot {
    uint8_t* pixels = nullptr;
    int32_t* labels = nullptr;
    float* soft = nullptr;
    ImageMix* mix = nullptr;
    cudaEvent_t copied = nullptr;
    ImageLoader::Position after;
    int real = 0;
    uint64_t digest = 0;
    bool filled = false;
  };
  void run();
  void free_slots();
  ImageLoader& loader_;
  std::vector<Slot> slots_;
  int head_ = 0;
  ImageLoader::Position consumed_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, done_ = false;  // done: an evaluation pass is over
  std::exception_ptr error_;
  std::thread thread_;
};
