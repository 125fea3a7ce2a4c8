// One optimizer stepped in groups of tensors: an instance of the named optimizer for each group, over
// that group's tensors (the owned subsets of optimizer.h). A group can then step as soon as its own
// gradients are final - the training step's --overlap starts each transformer block's step during
// backward, while backward goes on through the blocks below it.
//
// Only an optimizer whose step of a tensor reads nothing of any other tensor can be split so
// (optim/groupable.h): then every tensor moves exactly as in the whole-set step, bit for bit, whatever the groups
// and whatever order they step in. VeLO (its LSTM reads every tensor's statistics), ELO with its global
// clip, and Muon and CELO2 (Newton-Schulz batched over every matrix of a shape) cannot.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/groupable.h"
#include "optim/optimizer.h"

class GroupedOptimizer : public Optimizer {
 public:
  // groups: table indices, each tensor of the table in exactly one group (checked).
  GroupedOptimizer(const std::string& name, const OptimOptions& opts, Arena& arena,
                   const std::vector<std::vector<int>>& groups);

  std::string name() const override { return parts_.front()->name(); }
  int groups() const override { return int(parts_.size()); }
  int64_t steps_done() const override { return parts_.front()->steps_done(); }
  void step(const StepInfo& info, cudaStream_t stream) override;  // every group, in order
  // Group g only. A training step calls this once for every group (in any order, on any streams), each
  // after the group's gradients are final and after the previous step's group g.
  void step_group(int g, const StepInfo& info, cudaStream_t stream) { parts_[size_t(g)]->step(info, stream); }
  void params_changed() override {
    for (auto& p : parts_) p->params_changed();
  }

 protected:
  // Each group's counter and state, named "g<k>.<name>"; the base counter stays 0 (the groups count).
  std::vector<StateBuffer> state_buffers() const override;

 private:
  std::vector<std::unique_ptr<Optimizer>> parts_;
};
