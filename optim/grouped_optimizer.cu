#include "optim/grouped_optimizer.h"

GroupedOptimizer::GroupedOptimizer(const std::string& name, const OptimOptions& opts, Arena& arena,
                                   const std::vector<std::vector<int>>& groups)
    : Optimizer(arena, opts, {}) {
  const std::string why = why_not_groupable(name, opts);
  if (!why.empty()) user_error(name, " cannot step block by block (--overlap): ", why, ".");
  std::vector<int> seen(size_t(arena.table().size()), 0);
  for (const auto& g : groups) {
    CHECK(!g.empty());
    for (int t : g) {
      CHECK(t >= 0 && t < arena.table().size());
      seen[size_t(t)]++;
    }
  }
  for (int n : seen) CHECK(n == 1);  // every tensor in exactly one group
  for (const auto& g : groups) parts_.push_back(make_optimizer(name, opts, arena, g));
}

void GroupedOptimizer::step(const StepInfo& info, cudaStream_t stream) {
  for (auto& p : parts_) p->step(info, stream);
}

std::vector<Optimizer::StateBuffer> GroupedOptimizer::state_buffers() const {
  std::vector<StateBuffer> out;
  for (size_t k = 0; k < parts_.size(); k++)
    for (StateBuffer b : parts_[k]->saved_buffers()) {
      b.name = "g" + std::to_string(k) + "." + b.name;
      out.push_back(b);
    }
  return out;
}
