// The optimizer interface that every optimizer implements (eight -o names, six classes).
//
// step() enqueues work on a stream and never synchronises with the host: the update counter, the LR
// schedule, bias corrections and the clip scale are all read or computed on the device, so a whole
// training step can be captured in a CUDA graph and replayed. State lives in device buffers laid out
// against the arena's table; save/load go through section files (common/sections.h).
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "common/sections.h"
#include "core/arena.h"
#include "core/chunks.h"
#include "optim/cross_rank.h"
#include "optim/options.h"

struct StepInfo {
  const float* d_loss = nullptr;        // this step's training loss, on the device (VeLO reads it)
  const float* d_grad_scale = nullptr;  // gradients are multiplied by *d_grad_scale (clipping); null = 1
};

// Every optimizer steps the tensors it owns: all of them (the default), or a subset - a rank's shard
// when the step is split across GPUs. It keeps state for those tensors only and leaves the others alone.
// AdamW, the AdamW side paths of Muon, CELO2 and ELO_CELO2, and VeLO, small_fc_lopt and ELO may own part of
// a tensor (core/chunks.h's Part: the shard plan cuts a tensor between two ranks where shard_cut_unit allows;
// the learned optimizers sum its statistics over the ranks); the others need whole tensors.
// Given a CrossRank (optim/cross_rank.h), the owned tensors are this rank's share of a sharded
// data-parallel step: what a step computes over all tensors (a global norm, VeLO's pooling) is then
// combined across the ranks.
class GradClipper;

class Optimizer {
 public:
  Optimizer(Arena& arena, const OptimOptions& opts, const Owned& owned, CrossRank* cross = nullptr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;
  virtual void step(const StepInfo& info, cudaStream_t stream) = 0;
  // Call after anything but step() wrote parameters this optimizer owns (load_state calls it): the next step
  // of VeLO, fast small_fc_lopt / ELO and CELO2 then reads them instead of using the sums of p^2 its last step
  // took as it wrote them.
  virtual void params_changed() {}
  virtual size_t state_bytes() const;  // device bytes of optimizer state (saved buffers)
  // Groups of tensors that step as one optimizer each (GroupedOptimizer); 1 for a whole-set optimizer.
  virtual int groups() const { return 1; }
  // The trainer's clip taken into the optimizer's first pass, which reads the gradients anyway: true when
  // the optimizer has set `clipper` up for it (GradClipper::take) and from now on runs it inside step(),
  // where info.d_grad_scale is then valid; the caller no longer runs it. Before the first step, once.
  virtual bool take_clip(GradClipper* clipper) {
    (void)clipper;
    return false;
  }
  // Sections "optim.*"; load checks optimizer name, model fingerprint and every size before it
  // overwrites anything, so a refused file leaves the optimizer as it was.
  void save_state(SectionWriter& w) const;
  void load_state(const SectionReader& r);
  virtual int64_t steps_done() const;  // synchronous; for logging and tests, not for the step itself

  const OptimOptions& options() const { return opts_; }
  const std::vector<int>& owned() const { return owned_; }   // table indices, ascending
  const std::vector<Part>& parts() const { return parts_; }  // the same, with the elements of each
  Arena& arena() const { return arena_; }

  struct StateBuffer {
    std::string name;
    void* ptr;
    size_t bytes;
  };
  // What save_state writes after the name and the tensors: the step counter, then state_buffers().
  std::vector<StateBuffer> saved_buffers() const;

 protected:
  virtual std::vector<StateBuffer> state_buffers() const = 0;

  Arena& arena_;
  OptimOptions opts_;
  // Checks that each of `tensors` (ascending) that this optimizer owns is owned whole: those it computes over.
  void require_whole(const std::vector<int>& tensors) const;
  // Whether this optimizer steps the whole table or a rank's share of it (a sharded step), so that its
  // passes see every gradient the trainer's clip sums (take_clip), not a group's subset.
  bool steps_table() const { return cross_ || int(owned_.size()) == arena_.table().size(); }

  std::vector<int> owned_;
  std::vector<Part> parts_;
  std::vector<int> cut_;          // Owned::cut: the plan's cut tensors, held here or not
  DeviceBuffer<int64_t> d_step_;  // updates applied so far; advanced on the device by each step
  CrossRank* cross_ = nullptr;    // the sharded step's other ranks; null: the owned tensors are all there is
};

// adamw | adafactor | muon | small_fc_lopt | velo | celo2 | elo | elo_celo2 over the tensors `owned` (table indices;
// empty = all), as one rank's share of a sharded step when `cross` is given. Validates the name and the
// hyperparameters first (UserError).
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const OptimOptions& opts, Arena& arena,
                                          const Owned& owned = {}, CrossRank* cross = nullptr);
// The tensors of `owned`, checked (in range, no repeats) and sorted; empty = every tensor of the table.
std::vector<int> owned_tensors(const ParamTable& t, const Owned& owned);
