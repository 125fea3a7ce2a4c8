// One NCCL communicator over the training processes (train/process_group.h): the transport of
// data-parallel training. Rank 0 makes NCCL's unique id and, with more than one process, publishes it
// through id_file; the other ranks read it there, and rank 0 removes it once all have joined. With one
// process no file is involved, and an all-reduce leaves the data as it was, so that world size 1 through
// this path equals the single-GPU trainer bit for bit. It is also the sharded optimizer step's CrossRank
// (optim/cross_rank.h).
//
// A process that dies (the OOM killer, a GPU fault, kill -9) must not leave the others spinning in their
// collectives forever: NCCL's kernels wait on a peer that will never write. So the communicator is made
// non-blocking (joining can time out), and a watchdog thread asks NCCL for asynchronous errors and
// watches the steps: when no step has finished on every process for timeout_s (beat() marks one), or
// NCCL reports an error, it says so in one sentence, aborts the communicator (which ends the waiting
// kernels) and ends the process with status 4. The last checkpoint is intact: checkpoints are written
// whole or not at all, and the watchdog holds off while this process writes one (set_local_work).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "optim/cross_rank.h"
#include "train/process_group.h"

// Makes GPU `local_rank` this process's device, before anything makes a context on another one; UserError
// when the machine has no such GPU.
void select_gpu(int local_rank);

class NcclComm : public CrossRank {
 public:
  // The caller has selected the process's GPU (cudaSetDevice(local_rank)). UserError when the id cannot be
  // shared or the processes do not all join within timeout_s. timeout_s is also the watchdog's: the
  // longest time between two steps that every process finished. 0: wait forever, no watchdog.
  NcclComm(const ProcessGroup& g, const std::string& id_file, double timeout_s = kDefaultTimeout);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  static constexpr double kDefaultTimeout = 300;  // seconds; --nccl-timeout

  // Every process has finished a step: the host has waited for a collective result that needs all of them.
  void beat();
  // While on, this process works alone (writes its checkpoint file): the watchdog does not end it then, so
  // that no half-written file is left; the clock restarts when it turns off.
  void set_local_work(bool on);

  int rank() const { return rank_; }
  int world() const { return world_; }
  // Each enqueued on s, in place.
  void sum(float* data, size_t n, cudaStream_t s) override;  // the all-reduce of the gradients, loss, flags
  void sum(double* data, size_t n, cudaStream_t s) override;
  void max(float* data, size_t n, cudaStream_t s) override;
  void sum(uint64_t* data, size_t n, cudaStream_t s);       // mod 2^64: the step's flags and data digests
  void sum(__nv_bfloat16* data, size_t n, cudaStream_t s);  // --grad-comm bf16
  // The sum over the processes lands in `root`'s data only (the others' is left as it was).
  void reduce_sum(float* data, size_t n, int root, cudaStream_t s);
  void reduce_sum(__nv_bfloat16* data, size_t n, int root, cudaStream_t s);
  // data holds world ranges of n elements; each process's own range (rank r's at data + r n) goes to all.
  void all_gather(float* data, size_t n, cudaStream_t s);
  void all_gather(__nv_bfloat16* data, size_t n, cudaStream_t s);
  // `bytes` of each process's `mine`, rank by rank, into `all` (world x bytes).
  void all_gather_bytes(const void* mine, void* all, size_t bytes, cudaStream_t s);
  // Calls between these two run as one NCCL group (one launch for many small ones).
  void group_begin();
  void group_end();

 private:
  void check(ncclResult_t r, const char* what);  // waits out ncclInProgress (a non-blocking communicator's)
  void wait_ready(const char* what);
  void fail();   // marks the communicator failed; aborts it at once while no watchdog reads it
  void watch();  // the watchdog thread's loop
  [[noreturn]] void give_up(const std::string& why);

  int rank_, world_;
  double timeout_s_;
  ncclComm_t comm_ = nullptr;
  bool failed_ = false;  // NCCL failed or timed out: the destructor aborts instead of waiting
  std::atomic<int64_t> last_beat_ns_{0};
  std::atomic<bool> local_work_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  bool closing_ = false;  // under mu_: the destructor stops the watchdog
  std::thread watchdog_;
};
