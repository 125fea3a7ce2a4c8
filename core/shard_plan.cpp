#include "core/shard_plan.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace {
int64_t align(int64_t n) {
  return (n + ParamTable::kAlignElems - 1) / ParamTable::kAlignElems * ParamTable::kAlignElems;
}
}  // namespace

std::vector<int> ShardPlan::owned(int rank) const {
  std::vector<int> v;
  for (int i = 0; i < int(owner.size()); i++)
    if (owner[size_t(i)] == rank) v.push_back(i);
  return v;
}

int64_t shard_slot_elems(const TensorInfo& t) { return align(std::max(t.numel, t.reserve)); }

ShardPlan plan_shards(const ParamTable& table, int world, const std::function<double(const TensorInfo&)>& cost) {
  if (world < 1) user_error("the number of ranks must be at least 1 (got ", world, ").");
  const int n = table.size();
  ShardPlan p;
  p.world = world;
  p.owner.assign(size_t(n), 0);
  p.offset.assign(size_t(n), 0);
  p.used.assign(size_t(world), 0);
  p.load.assign(size_t(world), 0.0);
  // Whole pieces go to ranks (separate q, k, v together: the block reads them as one matrix), longest
  // first (ties: table order), each to the least loaded rank (ties: the lowest): within 4/3 of the best
  // possible balance, and deterministic, so every rank computes the same plan.
  const std::vector<ParamTable::Piece> pieces = table.pieces();
  std::vector<double> c(pieces.size(), 0.0);
  for (size_t k = 0; k < pieces.size(); k++)
    for (int i = pieces[k].first; i < pieces[k].first + pieces[k].count; i++) {
      const double ci = cost(table[i]);
      CHECK(ci >= 0);
      c[k] += ci;
    }
  std::vector<size_t> by_cost(pieces.size());
  std::iota(by_cost.begin(), by_cost.end(), size_t(0));
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return c[a] > c[b]; });
  for (size_t k : by_cost) {
    const int r = int(std::min_element(p.load.begin(), p.load.end()) - p.load.begin());
    for (int i = pieces[k].first; i < pieces[k].first + pieces[k].count; i++) p.owner[size_t(i)] = r;
    p.load[size_t(r)] += c[k];
  }
  // Within a rank the table order is kept, so a piece's tensors stay back to back (each fills its slot).
  for (int r = 0; r < world; r++)
    for (int i : p.owned(r)) {
      p.order.push_back(i);
      p.offset[size_t(i)] = p.used[size_t(r)];  // relative to the rank's range until the length is known
      p.used[size_t(r)] += shard_slot_elems(table[i]);
    }
  p.shard_elems = align(std::max<int64_t>(1, *std::max_element(p.used.begin(), p.used.end())));
  for (int i = 0; i < n; i++) p.offset[size_t(i)] += p.begin(p.owner[size_t(i)]);
  return p;
}

ParamTable sharded_table(const ParamTable& table, const ShardPlan& plan) {
  CHECK(int(plan.offset.size()) == table.size());
  ParamTable t = table;
  t.set_layout(plan.offset, plan.total_elems());
  return t;
}
