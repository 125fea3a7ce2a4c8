// Reads training batches on a CPU thread into pinned host memory a few batches ahead, so the GPU
// never waits on the loader and the host-to-device copies are asynchronous (no per-micro-batch
// synchronisation). A slot is refilled only after the GPU has finished copying out of it.
#pragma once
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/token_shards.h"

class BatchPrefetcher {
 public:
  // Batches of B sequences of T tokens. The loader must not be used by anyone else while the prefetcher lives.
  BatchPrefetcher(TokenLoader& loader, int B, int T, int depth = 3);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  struct Batch {
    const int32_t *x, *y;  // pinned, B * T each
    uint64_t digest;       // of its sequences with their targets (common/digest.h)
  };
  Batch next();  // waits for the next batch; rethrows the loader's error (e.g. a malformed shard)
  // Call once the copies out of the batch from next() are enqueued on s: the slot is free after them.
  void release(cudaStream_t s);
  // The loader's position just after the last batch next() returned (what a checkpoint stores).
  TokenLoader::Position position() const { return consumed_; }

 private:
  struct Slot {
    int32_t *x = nullptr, *y = nullptr;
    cudaEvent_t copied = nullptr;
    TokenLoader::Position after;
    uint64_t digest = 0;
    bool filled = false;
  };
  void run();
  TokenLoader& loader_;
  int B_, T_;
  int64_t n_;
  std::vector<Slot> slots_;
  int head_ = 0;  // next slot to hand out
  TokenLoader::Position consumed_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};
