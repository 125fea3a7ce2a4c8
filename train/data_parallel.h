// Data parallel training, as both trainers set it up (README, "Data parallel"): one process per GPU,
// NCCL between them, in one of two modes.
//  - all-reduce: every rank holds every tensor's optimizer state and steps every tensor (the baseline
//    of the PyLO paper's Table 3);
//  - sharded (--shard 1): a shard plan (core/shard_plan.h) gives each rank tensors, balanced by their
//    step cost for this optimizer (an element-wise tensor may be cut between two ranks); the arena is
//    laid out rank by rank; gradients are reduced onto
//    their owners during backward, each rank steps its tensors (the optimizer's owned subset, with the
//    communicator as its CrossRank) and the bf16 copy of the weights is all-gathered (the fp32 weights
//    for checkpoints only). Optimizer state lives on its owner only.
// In either mode the GPUs' copy engines move the gradients where every process can map the others' memory
// (--grad-sum auto or copy, train/peer_sum.h), else NCCL; NCCL can send them in bf16 (--grad-comm bf16).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/shard_plan.h"
#include "train/checkpoint.h"
#include "train/nccl_comm.h"
#include "train/process_group.h"
#include "train/train_flags.h"

class DataParallel {
 public:
  // This process among the others: the group the caller read from the environment (process_group_from_env,
  // once per run), kept here alone. rank() and world() hold from here on; the rest after set_up.
  explicit DataParallel(const ProcessGroup& g) : group_(g) {}
  // The mode of the flags over the model's table (the shard plan), before any GPU work; UserError on a
  // combination that cannot run.
  void set_up(const TrainFlags& f, const OptimOptions& o, const ParamTable& table);
  // Picks this process's GPU and joins the others (before anything makes a context); from here on rank 0
  // alone prints. Nothing to do unless on().
  void connect(const std::string& id_file);

  bool on() const { return on_; }  // through NCCL: several processes, or --nccl / --shard as one
  bool sharded() const { return sharded_; }
  bool bf16_sums() const { return bf16_sums_; }  // --grad-comm bf16
  bool copy_sums() const { return copy_sums_; }  // the copy engines sum (--grad-sum, train/peer_sum.h)
  int rank() const { return group_.rank; }
  int world() const { return group_.world; }
  const ProcessGroup& group() const { return group_; }
  NcclComm* comm() const { return comm_.get(); }
  const ShardPlan* plan() const { return sharded_ ? &plan_ : nullptr; }
  CrossRank* cross() const { return sharded_ ? comm_.get() : nullptr; }  // a sharded step's other ranks

  ParamTable layout(const ParamTable& t) const;  // the arena's table: laid out by the plan when sharded
  Owned owned() const;                           // the tensors (or parts) this rank steps (empty: all)
  DpRecord record() const;                       // what checkpoints record of the set-up
  // Resuming from `main` (rank 0's file; `state` read from it): UserError unless it was written with this
  // set-up. Ranks > 0 open their own file, take its data position into `state` and return it (the sharded
  // mode's optimizer state is there); rank 0 returns null.
  std::unique_ptr<SectionReader> check_resume(const SectionReader& main, const ParamTable& table,
                                              TrainState* state) const;
  std::string describe() const;  // one line for the header
  // Sharded with a bf16 copy, each step gathers only the copy (train/step_runner.h): this collective
  // gathers the fp32 weights too, for a checkpoint. Nothing to do otherwise.
  void gather_params(Arena& arena);

  // Collective (every process calls it after each step; waits for the answer): whether any process's
  // stop flag is set, and the sum of the processes' data digests, the digest of the whole step's data
  // (common/digest.h). One process: its own.
  struct StepEnd {
    bool stop;
    uint64_t digest;
  };
  StepEnd step_end(bool stop, uint64_t digest);
  void barrier() { step_end(false, 0); }

 private:
  void choose_grad_sum();

  ProcessGroup group_;
  std::string grad_sum_ = "auto";
  bool on_ = false, sharded_ = false, bf16_sums_ = false, copy_sums_ = false;
  double timeout_s_ = NcclComm::kDefaultTimeout;  // --nccl-timeout
  ShardPlan plan_;
  std::unique_ptr<NcclComm> comm_;
  DeviceBuffer<uint64_t> flags_;  // step_end's stop flag and digest
};
