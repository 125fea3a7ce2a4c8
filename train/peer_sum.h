// Gradient sums over the processes that move the data with the GPUs' copy engines (--grad-sum auto on one
// machine, or copy; train/data_parallel decides).
// NCCL's sums are kernels that hold 16 to 32 SMs while they run beside backward, and a matmul whose
// tiles filled the SMs in one wave then needs two: backward ran 27% slower per block on 4 H100s
// (docs/data_parallel.md, "Where the communication time goes"). Here every process maps the others'
// gradient arenas (CUDA IPC) and pulls what it needs over NVLink with cudaMemcpyAsync, which the copy
// engines carry out; the barriers are stream memory operations (no SM), and the only kernel is an add over a
// rank's share of the run.
//
// All-reduce of a run (train/peer_chunks.h): rank r pulls chunk r from every other rank, adds the world
// copies in rank order into its own (one order for every element, computed once), then pulls chunk q from
// rank q. Reduce onto a root: the root pulls the run from the others and adds. A barrier (each rank writes
// a flag into every other rank's memory, then waits for theirs) says when all gradients of the call are
// final, and a second when every chunk is summed.
//
// The copies read other processes' gradients, which must not change until they are read: each step ends
// with an NCCL collective on the same stream after the sums (the loss's), which no process finishes before
// every process has reached it, so no process zeroes its gradients for the next step while another still
// reads them. The GPUs must reach each other directly (one machine, NVLink or PCIe peer access).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "common/device_buffer.h"
#include "train/peer_chunks.h"

class NcclComm;

class PeerSum {
 public:
  // `bytes` of each process's `mine`, rank by rank, into `all` (host memory): how the processes swap
  // their IPC handles.
  using Exchange = std::function<void(const void* mine, void* all, size_t bytes)>;
  static constexpr int kMaxWorld = 8;
  static constexpr int kSlots = 512;                   // barriers per step
  static constexpr int64_t kPiece = int64_t(4) << 20;  // elements per chunk: (world - 1) x 16 MiB of scratch

  // Collective: every process calls it once, in the same order. grads: the start of this process's
  // cudaMalloc allocation of gradients (IPC maps whole allocations); most: elements per chunk. UserError
  // when the GPUs cannot map each other's memory.
  PeerSum(int rank, int world, const Exchange& exchange, float* grads, int64_t most = kPiece);
  ~PeerSum();
  PeerSum(const PeerSum&) = delete;
  PeerSum& operator=(const PeerSum&) = delete;

  struct Run {
    int64_t begin, n;  // gradient elements
    int root;          // the rank that gets the sum, or -1: every rank
  };
  // Host side: a step begins; its barriers take the slots from 0 again (the same on every process, as
  // the same calls follow; a captured step replays the slots it was captured with).
  void begin_step() { slot_ = 0; }
  // Collective, every process gets the same answer: whether every process can map every other's GPU
  // memory (one machine, by host name, and CUDA IPC with peer access between the GPUs).
  static bool reachable(int rank, int world, const Exchange& exchange);
  // Enqueued on s after the gradients of `runs` are final on s: the sums, in place. Every process calls it
  // with the same runs in the same order.
  void sum(const std::vector<Run>& runs, cudaStream_t s);
  // Collective, once: a buffer of `bytes` on this GPU that every process maps; returns every process's,
  // rank by rank, as mapped here (this process's own at [rank]). What reads another's must come before the
  // step's last NCCL collective on every process, as the sums' copies do (above).
  std::vector<void*> share(size_t bytes, const Exchange& exchange);
  // Enqueued on s: waits until every process has enqueued its matching call and the work before it on its
  // stream is done. Every process calls it in the same order among its sums and other barriers.
  void barrier(cudaStream_t s);

 private:
  // Each other rank's `span` of gradients into this rank's scratch slot (rank order, its own skipped) or,
  // with to_grads, into the same span of its own gradients; from rank `from` (-1: every other rank, the
  // same span of each; else the span of `from` alone) on the side streams, s waiting for them.
  void pull_to_scratch(PeerSpan span, cudaStream_t s);
  void pull_chunks(PeerSpan piece, cudaStream_t s);
  void fork(cudaStream_t s);
  void join(cudaStream_t s);
  void add_scratch(PeerSpan span, cudaStream_t s);

  int rank_, world_;
  int64_t most_;
  int slot_ = 0;
  float* grads_;
  float* peer_grads_[kMaxWorld] = {};  // mapped (rank_'s own: grads_)
  DeviceBuffer<char> shared_;          // share()'s
  void* peer_shared_[kMaxWorld] = {};  // mapped (rank_'s own: shared_)
  int* peer_flags_[kMaxWorld] = {};    // each rank's flags, mapped: row w written by rank w
  DeviceBuffer<int> flags_;            // world x kSlots
  DeviceBuffer<float> scratch_;        // (world - 1) x most
  cudaStream_t copy_[kMaxWorld] = {};  // one per other rank: their copies run at once
  cudaEvent_t forked_ = nullptr, copied_[kMaxWorld] = {};
};

// An Exchange through the communicator (an all-gather of the bytes; waits for it).
PeerSum::Exchange nccl_exchange(NcclComm& comm);
