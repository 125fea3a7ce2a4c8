// How N data-parallel ranks share the optimizer step in the sharded mode (reduce-scatter, step, all-gather):
// every tensor is owned by exactly one rank, whole (Adafactor's factored statistics, Newton-Schulz and the
// learned optimizers' per-tensor features need whole tensors), and the tensors a kernel reads as one piece
// (ParamTable::pieces: separate q, k, v) by one rank, back to back. The ranks' tensors are laid out back to
// back, rank 0's first, each rank's range padded to one common length, so that each rank's summed
// gradients and refreshed weights are one range of the arena. Pieces go to ranks by their cost (longest
// first, each to the least loaded rank), so the ranks' step times are balanced; within a rank the table
// order is kept.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/param_table.h"

struct ShardPlan {
  int world = 1;
  std::vector<int> owner;       // per table index: the rank that steps it
  std::vector<int> order;       // table indices in layout order: rank 0's, then rank 1's, ...
  std::vector<int64_t> offset;  // per table index: first element in the rank-ordered layout
  std::vector<int64_t> used;    // per rank: elements its tensors occupy (before the common padding)
  std::vector<double> load;     // per rank: the sum of its tensors' costs
  int64_t shard_elems = 0;      // every rank's range length (the longest, aligned); the layout is world x this

  std::vector<int> owned(int rank) const;  // table indices, in table order
  int64_t begin(int rank) const { return int64_t(rank) * shard_elems; }
  int64_t total_elems() const { return int64_t(world) * shard_elems; }
};

// `table` laid out as the plan says (ParamTable::set_layout): the arena of every rank in the sharded mode.
ParamTable sharded_table(const ParamTable& table, const ShardPlan& plan);

// Elements a tensor occupies in a layout: its numel or reserve, aligned to ParamTable::kAlignElems.
int64_t shard_slot_elems(const TensorInfo& t);

// The plan for `world` ranks; cost(t) >= 0 is the work of stepping tensor t (optim/step_cost.h's
// shard_step_cost).
ShardPlan plan_shards(const ParamTable& table, int world, const std::function<double(const TensorInfo&)>& cost);
