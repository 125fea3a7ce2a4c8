// One NCCL communicator over the training processes (train/process_group.h): the transport of
// data-parallel training. Rank 0 makes NCCL's unique id and, with more than one process, publishes it
// through id_file; the other ranks read it there, and rank 0 removes it once all have joined. With one
// process no file is involved, and an all-reduce leaves the data as it was, so that world size 1 through
// this path equals the single-GPU trainer bit for bit. It is also the sharded optimizer step's CrossRank
// (optim/cross_rank.h).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "optim/cross_rank.h"
#include "train/process_group.h"

// Makes GPU `local_rank` this process's device, before anything makes a context on another one; UserError
// when the machine has no such GPU.
void select_gpu(int local_rank);

class NcclComm : public CrossRank {
 public:
  // The caller has selected the process's GPU (cudaSetDevice(local_rank)). UserError when the id cannot be
  // shared or NCCL cannot join the group.
  NcclComm(const ProcessGroup& g, const std::string& id_file, double timeout_s = 300.0);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

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
  int rank_, world_;
  ncclComm_t comm_ = nullptr;
};
