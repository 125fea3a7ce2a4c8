// How N data-parallel ranks share the optimizer step in the sharded mode (reduce-scatter, step, all-gather).
// The ranks' ranges are laid out back to back, rank 0's first, each padded to one common length, so that
// each rank's summed gradients and refreshed weights are one range of the arena; the tensors a kernel
// reads as one piece (ParamTable::pieces: separate q, k, v) stay back to back.
//
// Pieces go to ranks by their cost (the optimizer's), longest first, each to the least loaded rank. One
// piece may be cut between two ranks: the costliest that the optimizer can step in parts (any tensor under
// AdamW; the AdamW side paths of Muon and CELO2; the matrices of the learned optimizers on LoCore, which sum
// their statistics over the two ranks), where that makes the busiest rank's load at least 1% lighter. It is placed as
// two halves; the two ranks that get them are numbered one after the other, and the cut falls where their loads come
// out closest: its first part ends the one's range, the rest begins the next one's, so it stays one run of the arena.
// Whole, such a tensor bounded its rank's share (GPT-2 124M's tied token table is 31% of the parameters: at 4 ranks its
// owner stepped 31% instead of 25%). The cut is at a multiple of the tensor's cut unit (the optimizer's), or between
// two tensors of the piece. Only one piece is cut, once: a tensor larger than two ranks' shares (124M's table at 7 or
// more ranks) still makes its ranks the busiest.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/chunks.h"
#include "core/param_table.h"

struct ShardPlan {
  // The cut unit of the element-wise steps: a multiple of every chunk length of those steps and of the
  // grad-norm partition (core/chunks.h), so each chunk lies in one part and a cut changes no bits. Every
  // cut unit is a multiple of it.
  static constexpr int64_t kCutElems = 16384;

  int world = 1;
  std::vector<int> owner;       // per table index: the rank that steps its first element
  std::vector<int64_t> cut;     // per table index: 0, or the element from which rank owner + 1 steps it
  std::vector<int> order;       // table indices in layout order (by the rank of their first element)
  std::vector<int64_t> offset;  // per table index: first element in the rank-ordered layout
  std::vector<int64_t> used;    // per rank: elements its parts occupy (before the common padding)
  std::vector<double> load;     // per rank: the cost of its parts
  int64_t shard_elems = 0;      // every rank's range length (the longest, aligned); the layout is world x this

  Owned owned(int rank) const;  // this rank's parts, in table order
  bool any_cut() const;
  int64_t begin(int rank) const { return int64_t(rank) * shard_elems; }
  int64_t total_elems() const { return int64_t(world) * shard_elems; }
};

// `table` laid out as the plan says (ParamTable::set_layout): the arena of every rank in the sharded mode.
ParamTable sharded_table(const ParamTable& table, const ShardPlan& plan);

// Elements a tensor occupies in a layout: its numel or reserve, aligned to ParamTable::kAlignElems.
int64_t shard_slot_elems(const TensorInfo& t);

// The plan for `world` ranks; cost(t) >= 0 is the work of stepping tensor t (optim/step_cost.h's
// shard_step_cost), proportional to its elements where cut_unit(t) > 0. cut_unit(t) (optim/step_cost.h's
// shard_cut_unit): 0 where the optimizer needs t whole, else the elements (a multiple of kCutElems) at
// whose multiples two ranks may step its parts to the same bits as the whole (null: nothing is cut).
ShardPlan plan_shards(const ParamTable& table, int world, const std::function<double(const TensorInfo&)>& cost,
                      const std::function<int64_t(const TensorInfo&)>& cut_unit = nullptr);
