#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/cuda_check.h"
#include "common/error.h"
#include "train/nccl_comm.h"

namespace {
void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    user_error("NCCL failed in ", what, ": ", ncclGetErrorString(r),
               " (NCCL_DEBUG=WARN tells more; check that every process was launched with the same world size).");
}
}  // namespace

void select_gpu(int local_rank) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || local_rank >= n)
    user_error("this process's local rank is ", local_rank, " but the machine shows ", n, n == 1 ? " GPU" : " GPUs",
               "; launch at most one process per GPU on each machine.");
  CUDA_CHECK(cudaSetDevice(local_rank));
}

NcclComm::NcclComm(const ProcessGroup& g, const std::string& id_file, double timeout_s)
    : rank_(g.rank), world_(g.world) {
  ncclUniqueId id;
  if (rank_ == 0) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (world_ > 1) {
      if (id_file.empty()) user_error("several processes need an NCCL id file that all of them can read.");
      publish_unique_id(id_file, std::vector<char>(id.internal, id.internal + sizeof id.internal), g);
    }
  } else {
    const std::vector<char> got = wait_for_unique_id(id_file, sizeof id.internal, timeout_s, g);
    std::copy(got.begin(), got.end(), id.internal);
  }
  nccl_check(ncclCommInitRank(&comm_, world_, id, rank_), "ncclCommInitRank");
  // Every process has joined, so every one has read the id: remove the file, so that a later run given
  // the same path cannot read this run's id.
  if (rank_ == 0 && world_ > 1) std::remove(id_file.c_str());
}

NcclComm::~NcclComm() {
  if (comm_) ncclCommDestroy(comm_);  // no checks: nothing may throw from here
}

void NcclComm::sum(float* data, size_t n, cudaStream_t s) {
  nccl_check(ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::sum(double* data, size_t n, cudaStream_t s) {
  nccl_check(ncclAllReduce(data, data, n, ncclDouble, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::sum(uint64_t* data, size_t n, cudaStream_t s) {
  nccl_check(ncclAllReduce(data, data, n, ncclUint64, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::max(float* data, size_t n, cudaStream_t s) {
  nccl_check(ncclAllReduce(data, data, n, ncclFloat, ncclMax, comm_, s), "ncclAllReduce");
}

void NcclComm::sum(__nv_bfloat16* data, size_t n, cudaStream_t s) {
  nccl_check(ncclAllReduce(data, data, n, ncclBfloat16, ncclSum, comm_, s), "ncclAllReduce");
}

void NcclComm::reduce_sum(float* data, size_t n, int root, cudaStream_t s) {
  nccl_check(ncclReduce(data, data, n, ncclFloat, ncclSum, root, comm_, s), "ncclReduce");
}

void NcclComm::reduce_sum(__nv_bfloat16* data, size_t n, int root, cudaStream_t s) {
  nccl_check(ncclReduce(data, data, n, ncclBfloat16, ncclSum, root, comm_, s), "ncclReduce");
}

void NcclComm::all_gather(float* data, size_t n, cudaStream_t s) {
  nccl_check(ncclAllGather(data + size_t(rank_) * n, data, n, ncclFloat, comm_, s), "ncclAllGather");
}

void NcclComm::all_gather(__nv_bfloat16* data, size_t n, cudaStream_t s) {
  nccl_check(ncclAllGather(data + size_t(rank_) * n, data, n, ncclBfloat16, comm_, s), "ncclAllGather");
}

void NcclComm::all_gather_bytes(const void* mine, void* all, size_t bytes, cudaStream_t s) {
  nccl_check(ncclAllGather(mine, all, bytes, ncclUint8, comm_, s), "ncclAllGather");
}

void NcclComm::group_begin() { nccl_check(ncclGroupStart(), "ncclGroupStart"); }
void NcclComm::group_end() { nccl_check(ncclGroupEnd(), "ncclGroupEnd"); }
