// One training step on the GPU: `accum` micro-batches whose gradients accumulate in the arena (their
// mean loss kept on the device), global grad-norm clipping, and one optimizer step over the tensors it
// owns. With CUDA graphs, the micro-batches and the optimizer are each captured once - at the second
// step, after an eager one did the lazy set-ups - and replayed; a capture needs fixed host buffers, so
// each step's batches are then staged through pinned memory. Only the step's loss and grad norm come
// back to the host, after everything is enqueued.
//
// With overlap, the optimizer (a GroupedOptimizer over the model's hook groups, block_table.h) steps each
// block's tensors on a second, high-priority stream as soon as backward has made their gradients final
// (the model's block hook, on the last micro-batch), while backward goes on through the blocks below;
// the step ends when both streams have. Same kernels on the same data as without overlap, so the same
// bits; it needs clipping off (a global clip needs every gradient before any tensor moves).
//
// With a communicator (data parallel, all-reduce mode) the same hook sums each block's gradients over
// the processes on the second stream while backward goes on, then (with overlap) steps them; the loss
// gradient is scaled by 1 / world, the step's loss is averaged, and the norm is taken of the summed
// gradients, so every process steps the same. World size 1 changes no bit.
//
// With a shard plan as well (sharded mode, core/shard_plan.h: the arena laid out rank by rank, the
// optimizer over this rank's tensors, given the communicator as its CrossRank) the hook reduces each of
// the block's tensors onto the rank that owns it instead - together a reduce-scatter into each rank's
// range - the norm is of the whole table (per-chunk sums added across ranks), each rank steps its own
// tensors, and the refreshed bf16 copy (the fp32 weights without one) is all-gathered; the fp32 weights of
// other ranks' tensors only for a checkpoint (DataParallel::gather_params).
//
// A token table tied to the head (GPT-2) is summed in two parts (Model::sum_embedding_in_parts): the
// head's part during backward, the lookup's from every process's sums per token (copy sums) or gathered
// positions, so that no sum of the whole table is left after backward. With STEP_TRACE=1,
// train/step_trace.h's timeline goes to stderr; with bf16_sums, gradients cross in bf16.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/cuda_graph.h"
#include "common/device_buffer.h"
#include "core/shard_plan.h"
#include "models/model.h"
#include "optim/grad_clip.h"
#include "optim/grouped_optimizer.h"
#include "optim/optimizer.h"
#include "train/nccl_comm.h"
#include "train/peer_sum.h"
#include "train/step_trace.h"

// Where a step's micro-batches come from: next() returns one (on the host, its fields sized as the model's
// batch_shape says); release(s) is called once the copies out of it are enqueued on s.
struct BatchSource {
  std::function<Batch()> next;
  std::function<void(cudaStream_t)> release;
};

class StepRunner {
 public:
  // comm: null for one process; then hook_groups (models/block_table.h) says which tensors each hook call
  // makes final. plan: the sharded mode's (null: all-reduce mode).
  // bf16_sums: gradients go through NCCL in bf16 (--grad-comm bf16); copy_sums: the copy engines move them
  // (--grad-sum auto or copy, train/peer_sum.h). mlp_groups: with copy sums, block l's MLP tensors
  // (block_mlp_list), summed apart at the model's MLP hook where the model calls one (Model::set_mlp_hook;
  // see kSplitTokens).
  StepRunner(Model& model, Optimizer& opt, GradClipper& clipper, bool clip, int accum, bool cuda_graph,
             bool overlap = false, NcclComm* comm = nullptr, const std::vector<std::vector<int>>& hook_groups = {},
             const ShardPlan* plan = nullptr, bool bf16_sums = false, bool copy_sums = false,
             const std::vector<std::vector<int>>& mlp_groups = {});
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  struct Result {
    float loss, grad_norm;  // the step's mean training loss and global gradient norm (before clipping)
    float ms, opt_ms;       // the whole step, and its clipping + optimizer part (0 with overlap: in backward)
    uint64_t digest;        // the sum of its micro-batches' digests: this process's data (common/digest.h)
  };
  Result run(const BatchSource& batches);  // waits for the step to finish

 private:
  void enqueue_grads(const BatchSource* batches);  // null: from the staged copies
  void enqueue_optimizer();
  void block_ready(int block, cudaStream_t s);  // overlap or comm: the block hook
  void mlp_ready(int block, cudaStream_t s);    // comm with mlp_ranges_: the MLP hook
  void finish_side_work();                      // overlap or comm: after the last micro-batch
  void stage(const BatchSource& batches);
  Batch staged(int micro) const;  // micro-batch `micro`'s fields in the staging buffer
  void free_resources();

  Model& model_;
  Optimizer& opt_;
  GradClipper& clipper_;
  GroupedOptimizer* grouped_ = nullptr;  // overlap only
  NcclComm* comm_ = nullptr;
  // Arena elements [begin, begin + n) and the rank that owns them (sharded mode), or -1: every rank.
  using Range = PeerSum::Run;
  std::vector<std::vector<Range>> ranges_;      // comm: each hook group's gradients as contiguous runs
  std::vector<std::vector<Range>> mlp_ranges_;  // comm with the MLP hook: each block's MLP runs (not in ranges_)
  std::vector<Range> early_;                    // comm: the tied table's head part, summed early
  std::vector<Range> runs(const std::vector<int>& tensors) const;
  void plan_sums(Model& model, const std::vector<std::vector<int>>& hook_groups,
                 const std::vector<std::vector<int>>& mlp_groups, bool bf16_sums, bool copy_sums);
  void sum(const std::vector<Range>& rs);
  void sum_nccl(const std::vector<Range>& rs, cudaStream_t side);
  void sum_early(cudaStream_t s);                                          // Model::EmbeddingSum's early
  void gather(const void* mine, void* all, size_t bytes, cudaStream_t s);  // and its gather
  void lookup_barrier(cudaStream_t s);                                     // or its barrier
  void wait_early_side(cudaStream_t s);
  void fork_side(cudaStream_t s);
  const ShardPlan* plan_ = nullptr;
  bool clip_, graphs_;
  bool clip_taken_ = false;  // Optimizer::take_clip
  int accum_;
  BatchShape shape_;
  size_t micro_bytes_ = 0;  // one staged micro-batch: its fields and the mix draw
  bool soft_ = false;       // the batches carry soft targets (seen in the eager step before a capture)
  int steps_run_ = 0;
  uint64_t digest_ = 0;  // of the step's micro-batches so far
  // The legacy default stream, or with graphs, overlap or comm a blocking stream of its own; side_: the
  // second stream of overlap's steps and comm's sums, non-blocking, of the highest priority.
  cudaStream_t stream_ = nullptr, side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr, gathered_ = nullptr;
  CudaGraph graph_grads_, graph_opt_;
  char* staged_ = nullptr;  // pinned: accum micro-batches
  float* host_ = nullptr;   // pinned: loss, norm
  cudaEvent_t ev_[4] = {};  // step start, optimizer start, optimizer end, step end
  DeviceBuffer<float> loss_;
  DeviceBuffer<__nv_bfloat16> grads16_;  // bf16_sums: the gradients' bf16 copy that NCCL sums
  std::unique_ptr<StepTrace> trace_;     // comm, eager: STEP_TRACE=1's timeline (train/step_trace.h)
  std::unique_ptr<PeerSum> peer_;        // copy_sums: the sums the copy engines move
  // copy_sums: the tied table's early sum, on early_side_; null when a micro-batch has at most
  // kEarlyNcclTokens tokens, and then NCCL sums it there instead. A short backward cannot hide the copy
  // engines' sums: at GPT-2 124M's 4 x 1024 they need 4.9 ms in a 5.4 ms backward, and NCCL's kernels take
  // the table off them (step 11.77 -> 11.36 ms on 4 H100s); at 16 x 1024, and 355M's 8 x 1024, NCCL's
  // kernels cost backward more than they save (+0.1 and +0.2 ms).
  static constexpr int64_t kEarlyNcclTokens = 4096;
  // With copy sums, each block's MLP part is summed at the model's MLP hook when a micro-batch has more
  // tokens than this: on 4 H100s at GPT-2 355M, 8 x 1024, block 0's sum then ended 0.15 ms after backward
  // instead of 0.35 (step 45.48 / 45.51 -> 45.29 / 45.21 ms), while at 124M's 4 x 1024, where the copy
  // engines' sums cannot keep up with backward anyway, twice the barriers made the step longer (11.25 ->
  // 11.52 ms).
  static constexpr int64_t kSplitTokens = 4096;
  std::unique_ptr<PeerSum> peer_early_;
  cudaStream_t early_side_ = nullptr;  // copy_sums: the early sum and the gathers, beside side_
  bool early_used_ = false;            // this step put work on early_side_ (a captured stream must join)
};
