#include "core/shard_plan.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace {
constexpr double kBandwidth = 3.0e12;  // bytes/s: the H100's measured copy rate
constexpr double kNsRate = 5.0e14;     // FLOP/s: our batched bf16 Newton-Schulz GEMMs on the H100
constexpr int kNsSteps = 5;

// Newton-Schulz FLOPs of `batch` m x n matrices (m <= n): A = X X^T, B = b A + c A A, X' = a X + B X.
double ns_flops(int64_t rows, int64_t cols, int64_t batch) {
  const double m = double(std::min(rows, cols)), n = double(std::max(rows, cols));
  return double(batch) * kNsSteps * (4 * m * m * n + 2 * m * m * m);
}

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
  // Longest first (ties: table order), each to the least loaded rank (ties: the lowest): within 4/3 of
  // the best possible balance, and deterministic, so every rank computes the same plan.
  std::vector<double> c(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) {
    c[size_t(i)] = cost(table[i]);
    CHECK(c[size_t(i)] >= 0);
  }
  std::vector<int> by_cost(static_cast<size_t>(n));
  std::iota(by_cost.begin(), by_cost.end(), 0);
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](int a, int b) { return c[size_t(a)] > c[size_t(b)]; });
  for (int i : by_cost) {
    const int r = int(std::min_element(p.load.begin(), p.load.end()) - p.load.begin());
    p.owner[size_t(i)] = r;
    p.load[size_t(r)] += c[size_t(i)];
  }
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

double shard_step_cost(const std::string& optimizer, const TensorInfo& t) {
  const bool matrix = t.ndim() >= 2;
  double bytes = 28, flops = 0;  // AdamW, and the AdamW side paths of Muon and CELO2
  if (optimizer == "adafactor") {
    bytes = matrix ? 24 : 40;
  } else if (optimizer == "muon") {
    if (t.resolved_owner() == Owner::Muon) flops = ns_flops(t.mat_rows(), t.mat_cols(), 1);
  } else if (optimizer == "velo" || optimizer == "small_fc_lopt" || optimizer == "elo") {
    bytes = matrix ? 72 : 100;
  } else if (optimizer == "celo2" || optimizer == "elo_celo2") {
    if (matrix && t.role == Role::Hidden) {
      bytes = 86;
      flops = ns_flops(t.rows(), t.cols(), t.batch());
    }
  } else if (optimizer != "adamw") {
    user_error("no step cost is known for optimizer '", optimizer, "'.");
  }
  return bytes * double(t.numel) / kBandwidth + flops / kNsRate;
}
