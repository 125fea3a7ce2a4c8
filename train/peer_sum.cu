#include <cuda.h>
#include <cudaTypedefs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/cuda_check.h"
#include "common/error.h"
#include "kernels/add_arrays.h"
#include "train/nccl_comm.h"
#include "train/peer_sum.h"

namespace {
// The driver's stream memory operations (no libcuda link: through the runtime's entry-point query). A
// barrier made of them waits in the stream's front end and takes no SM: a spinning kernel holds one, and a
// matmul whose tiles filled every SM in one wave then needs a second wave.
struct MemOps {
  PFN_cuStreamWriteValue32_v8000 write = nullptr;
  PFN_cuStreamWaitValue32_v8000 wait = nullptr;
};

const MemOps& mem_ops() {
  static const MemOps ops = [] {
    MemOps m;
    cudaDriverEntryPointQueryResult found;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", reinterpret_cast<void**>(&m.write), 12000,
                                                cudaEnableDefault, &found));
    CHECK(found == cudaDriverEntryPointSuccess);
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", reinterpret_cast<void**>(&m.wait), 12000,
                                                cudaEnableDefault, &found));
    CHECK(found == cudaDriverEntryPointSuccess);
    return m;
  }();
  return ops;
}

#define DRIVER_CHECK(call)                                                                                        \
  do {                                                                                                            \
    const CUresult r_ = (call);                                                                                   \
    if (r_ != CUDA_SUCCESS) throw CudaError(str_cat(__FILE__, ":", __LINE__, ": " #call ": CUresult ", int(r_))); \
  } while (0)

struct Shared {  // what each process tells the others
  cudaIpcMemHandle_t grads, flags;
};

template <class T>
T* open_peer(const cudaIpcMemHandle_t& h, int rank, int q) {
  void* p = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();
    user_error("--grad-sum copy: rank ", rank, " cannot map rank ", q, "'s GPU memory (", cudaGetErrorString(e),
               "); the processes must run on GPUs of one machine that reach each other directly (NVLink or PCIe "
               "peer access). Use --grad-sum nccl.");
  }
  return static_cast<T*>(p);
}
}  // namespace

PeerSum::PeerSum(int rank, int world, const Exchange& exchange, float* grads, int64_t most)
    : rank_(rank), world_(world), most_(most), grads_(grads) {
  CHECK(world >= 1 && world <= kMaxWorld && rank >= 0 && rank < world && most > 0 && most % 4 == 0);
  flags_.alloc(size_t(world) * kSlots, "--grad-sum copy flags");
  flags_.zero();
  scratch_.alloc(size_t(world - 1) * size_t(most), "--grad-sum copy scratch");
  CUDA_CHECK(cudaDeviceSynchronize());  // the flags are zero before any other process can write them
  Shared mine{};
  CUDA_CHECK(cudaIpcGetMemHandle(&mine.grads, grads));
  CUDA_CHECK(cudaIpcGetMemHandle(&mine.flags, flags_.get()));
  std::vector<Shared> all(static_cast<size_t>(world));
  exchange(&mine, all.data(), sizeof(Shared));
  for (int q = 0; q < world; q++) {
    peer_grads_[q] = q == rank ? grads : open_peer<float>(all[size_t(q)].grads, rank, q);
    peer_flags_[q] = q == rank ? flags_.get() : open_peer<int>(all[size_t(q)].flags, rank, q);
  }
  CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  for (int q = 0; q < world; q++) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy_[q], cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&copied_[q], cudaEventDisableTiming));
  }
}

PeerSum::~PeerSum() {  // no checks: nothing may throw from here
  for (int q = 0; q < world_; q++) {
    if (q == rank_) continue;
    if (peer_grads_[q]) cudaIpcCloseMemHandle(peer_grads_[q]);
    if (peer_flags_[q]) cudaIpcCloseMemHandle(peer_flags_[q]);
    if (peer_shared_[q]) cudaIpcCloseMemHandle(peer_shared_[q]);
  }
  for (int q = 0; q < world_; q++) {
    if (copy_[q]) cudaStreamDestroy(copy_[q]);
    if (copied_[q]) cudaEventDestroy(copied_[q]);
  }
  if (forked_) cudaEventDestroy(forked_);
}

// Barrier `slot`: write 1 into row `rank` of every other rank's flags (after this stream's earlier work,
// with a memory fence: the gradients the others' copies read are written), wait until every other rank has
// written 1 into ours, and set ours back to 0 for the next step. No rank writes this slot again before the
// step's last NCCL collective, which follows the reset on every rank (train/peer_sum.h).
void PeerSum::barrier(cudaStream_t s) {
  CHECK(slot_ < kSlots);  // barriers in one step
  const int slot = slot_++;
  const MemOps& ops = mem_ops();
  auto at = [](int* p) { return CUdeviceptr(reinterpret_cast<uintptr_t>(p)); };
  for (int q = 0; q < world_; q++)
    if (q != rank_)
      DRIVER_CHECK(
          ops.write(CUstream(s), at(peer_flags_[q] + rank_ * kSlots + slot), 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  for (int q = 0; q < world_; q++) {
    if (q == rank_) continue;
    int* mine = flags_.get() + q * kSlots + slot;
    DRIVER_CHECK(ops.wait(CUstream(s), at(mine), 1, CU_STREAM_WAIT_VALUE_EQ));
    DRIVER_CHECK(ops.write(CUstream(s), at(mine), 0, CU_STREAM_WRITE_VALUE_DEFAULT));
  }
}

std::vector<void*> PeerSum::share(size_t bytes, const Exchange& exchange) {
  CHECK(!shared_.get() && bytes > 0);
  shared_.alloc(bytes, "--grad-sum copy shared buffer");
  cudaIpcMemHandle_t mine{};
  CUDA_CHECK(cudaIpcGetMemHandle(&mine, shared_.get()));
  std::vector<cudaIpcMemHandle_t> all(static_cast<size_t>(world_));
  exchange(&mine, all.data(), sizeof mine);
  std::vector<void*> p(static_cast<size_t>(world_));
  for (int q = 0; q < world_; q++) {
    if (q != rank_) peer_shared_[q] = open_peer<void>(all[size_t(q)], rank_, q);
    p[size_t(q)] = q == rank_ ? static_cast<void*>(shared_.get()) : peer_shared_[q];
  }
  return p;
}

void PeerSum::fork(cudaStream_t s) {
  CUDA_CHECK(cudaEventRecord(forked_, s));
  for (int q = 0; q < world_; q++)
    if (q != rank_) CUDA_CHECK(cudaStreamWaitEvent(copy_[q], forked_, 0));
}

void PeerSum::join(cudaStream_t s) {
  for (int q = 0; q < world_; q++)
    if (q != rank_) {
      CUDA_CHECK(cudaEventRecord(copied_[q], copy_[q]));
      CUDA_CHECK(cudaStreamWaitEvent(s, copied_[q], 0));
    }
}

// Scratch slot k holds the k-th other rank's copy (rank order, this rank skipped).
void PeerSum::pull_to_scratch(PeerSpan span, cudaStream_t s) {
  if (span.n == 0) return;
  fork(s);
  for (int q = 0, k = 0; q < world_; q++) {
    if (q == rank_) continue;
    CUDA_CHECK(cudaMemcpyAsync(scratch_.get() + size_t(k++) * size_t(most_), peer_grads_[q] + span.begin,
                               size_t(span.n) * 4, cudaMemcpyDeviceToDevice, copy_[q]));
  }
  join(s);
}

void PeerSum::add_scratch(PeerSpan span, cudaStream_t s) {
  if (span.n == 0) return;
  AddInputs in{};
  for (int q = 0, k = 0; q < world_; q++)
    in.at[q] = q == rank_ ? grads_ + span.begin : scratch_.get() + size_t(k++) * size_t(most_);
  add_arrays(grads_ + span.begin, in, world_, size_t(span.n), s);
}

// Every other rank's summed chunk of the piece, from that rank into the same place here.
void PeerSum::pull_chunks(PeerSpan piece, cudaStream_t s) {
  fork(s);
  for (int q = 0; q < world_; q++) {
    const PeerSpan c = peer_chunk(piece, q, world_);
    if (q == rank_ || c.n == 0) continue;
    CUDA_CHECK(cudaMemcpyAsync(grads_ + c.begin, peer_grads_[q] + c.begin, size_t(c.n) * 4, cudaMemcpyDeviceToDevice,
                               copy_[q]));
  }
  join(s);
}

void PeerSum::sum(const std::vector<Run>& runs, cudaStream_t s) {
  if (world_ == 1) return;
  barrier(s);  // every rank's gradients of these runs are final
  bool shared = false;
  for (const Run& r : runs) {
    if (r.root < 0) {
      shared = true;
      for (const PeerSpan& p : peer_pieces(r.begin, r.n, most_ * world_)) {
        const PeerSpan mine = peer_chunk(p, rank_, world_);
        pull_to_scratch(mine, s);
        add_scratch(mine, s);
      }
    } else if (r.root == rank_) {
      for (const PeerSpan& p : peer_pieces(r.begin, r.n, most_)) {
        pull_to_scratch(p, s);
        add_scratch(p, s);
      }
    }
  }
  if (!shared) return;
  barrier(s);  // every chunk is summed where it is summed
  for (const Run& r : runs)
    if (r.root < 0)
      for (const PeerSpan& p : peer_pieces(r.begin, r.n, most_ * world_)) pull_chunks(p, s);
}

bool PeerSum::reachable(int rank, int world, const Exchange& exchange) {
  struct Probe {
    char host[64];
    cudaIpcMemHandle_t handle;
  };
  DeviceBuffer<int> probe(64, "--grad-sum probe");
  Probe mine{};
  gethostname(mine.host, sizeof mine.host - 1);
  CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, probe.get()));
  std::vector<Probe> all(static_cast<size_t>(world));
  exchange(&mine, all.data(), sizeof(Probe));
  char ok = 1;
  for (int q = 0; q < world && ok; q++) {
    if (q == rank) continue;
    void* p = nullptr;
    if (std::strncmp(mine.host, all[size_t(q)].host, sizeof mine.host) != 0)
      ok = 0;  // another machine: its handles mean nothing here
    else if (cudaIpcOpenMemHandle(&p, all[size_t(q)].handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess)
      cudaIpcCloseMemHandle(p);
    else
      ok = (cudaGetLastError(), 0);
  }
  // Also the barrier that keeps every probe allocated until all have tried it.
  std::vector<char> oks(static_cast<size_t>(world));
  exchange(&ok, oks.data(), 1);
  return std::all_of(oks.begin(), oks.end(), [](char c) { return c == 1; });
}

PeerSum::Exchange nccl_exchange(NcclComm& comm) {
  return [&comm](const void* mine, void* all, size_t bytes) {
    const size_t w = size_t(comm.world());
    DeviceBuffer<char> d((w + 1) * bytes, "exchanged bytes");
    d.upload(static_cast<const char*>(mine), bytes, w * bytes);
    comm.all_gather_bytes(d.get() + w * bytes, d.get(), bytes, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<char> got = d.download(w * bytes);
    std::memcpy(all, got.data(), w * bytes);
  };
}
