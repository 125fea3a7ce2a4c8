// One NCCL communicator over the training processes (train/process_group.h): the transport of
// data-parallel training. Rank 0 makes NCCL's unique id and, with more than one process, publishes it
// through id_file; the other ranks read it there. With one process no file is involved, and an
// all-reduce leaves the data as it was, so that world size 1 through this path equals the single-GPU
// trainer bit for bit.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "train/process_group.h"

// Makes GPU `local_rank` this process's device, before anything makes a context on another one; UserError
// when the machine has no such GPU.
void select_gpu(int local_rank);

class NcclComm {
 public:
  // The caller has selected the process's GPU (cudaSetDevice(local_rank)). UserError when the id cannot be
  // shared or NCCL cannot join the group.
  NcclComm(const ProcessGroup& g, const std::string& id_file, double timeout_s = 300.0);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  void all_reduce_sum(float* data, size_t n, cudaStream_t s);  // in place, enqueued on s

 private:
  int rank_, world_;
  ncclComm_t comm_ = nullptr;
};
