#include "core/shard_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

namespace {
int64_t align(int64_t n) {
  return (n + ParamTable::kAlignElems - 1) / ParamTable::kAlignElems * ParamTable::kAlignElems;
}

// One piece's tensors laid back to back (each in its slot), with their costs spread over their elements.
struct PieceGeometry {
  const ParamTable& t;
  ParamTable::Piece pc;
  std::function<double(const TensorInfo&)> cost;
  std::vector<int64_t> unit;  // per tensor of the piece: its cut unit (0 where the piece is not cut)

  int64_t rel(int i) const {  // where tensor i starts within the piece
    int64_t r = 0;
    for (int j = pc.first; j < i; j++) r += shard_slot_elems(t[j]);
    return r;
  }
  int64_t span() const { return rel(pc.first + pc.count); }
  double cost_below(int64_t p) const {  // of the elements before p
    double c = 0;
    for (int i = pc.first; i < pc.first + pc.count; i++) {
      const int64_t n = std::clamp<int64_t>(p - rel(i), 0, t[i].numel);
      c += cost(t[i]) * double(n) / double(t[i].numel);
    }
    return c;
  }
  // The place to cut (a tensor boundary inside the piece, or a multiple of its unit inside a tensor) whose
  // cost below is closest to `level`; 0 when none beats leaving the whole piece to the next rank.
  int64_t best_cut(double level) const {
    int64_t best = 0;
    double gap = std::fabs(level);
    auto consider = [&](int64_t p) {
      const double g = std::fabs(cost_below(p) - level);
      if (g < gap) best = p, gap = g;
    };
    for (int i = pc.first; i < pc.first + pc.count; i++) {
      if (i > pc.first) consider(rel(i));
      const int64_t u = unit[size_t(i - pc.first)];
      for (int64_t e = u; u > 0 && e < t[i].numel; e += u) consider(rel(i) + e);
    }
    return best;
  }
};

// Pieces, longest first (ties: table order), each to the least loaded rank (ties: the lowest): within 4/3
// of the best possible balance, and deterministic, so every rank computes the same plan.
std::vector<int> place(const std::vector<double>& c, std::vector<double>* load) {
  std::vector<size_t> by_cost(c.size());
  std::iota(by_cost.begin(), by_cost.end(), size_t(0));
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return c[a] > c[b]; });
  std::vector<int> rank_of(c.size(), 0);
  for (size_t k : by_cost) {
    const int r = int(std::min_element(load->begin(), load->end()) - load->begin());
    rank_of[k] = r;
    (*load)[size_t(r)] += c[k];
  }
  return rank_of;
}

// The costliest piece that may be cut; c.size() if none.
size_t costliest_cuttable(const std::vector<double>& c, const std::vector<bool>& cuttable) {
  size_t best = c.size();
  for (size_t k = 0; k < c.size(); k++)
    if (cuttable[k] && (best == c.size() || c[k] > c[best])) best = k;
  return best;
}
}  // namespace

Owned ShardPlan::owned(int rank) const {
  Owned o;
  for (int i = 0; i < int(owner.size()); i++) {
    const int64_t c = cut[size_t(i)];
    if (owner[size_t(i)] == rank) o.parts.push_back({i, 0, c > 0 ? c : -1});
    if (c > 0 && owner[size_t(i)] + 1 == rank) o.parts.push_back({i, c, -1});
    if (c > 0) o.cut.push_back(i);
  }
  return o;
}

bool ShardPlan::any_cut() const {
  return std::any_of(cut.begin(), cut.end(), [](int64_t c) { return c > 0; });
}

int64_t shard_slot_elems(const TensorInfo& t) { return align(std::max(t.numel, t.reserve)); }

namespace {
struct Cut {
  size_t piece;
  int64_t at;  // elements into the piece; 0: no cut
};

// Ranks for the pieces, and the cut: the piece `split` (c.size(): none) is placed as two halves, whose
// ranks are then numbered one after the other, and cut where their two loads come out closest.
std::vector<int> assign(const std::vector<PieceGeometry>& geo, const std::vector<double>& c, size_t split, int world,
                        Cut* cut) {
  const size_t n = c.size();
  std::vector<double> item = c, bin_load(size_t(world), 0.0);
  if (split < n) {
    item[split] = c[split] / 2;
    item.push_back(c[split] / 2);
  }
  const std::vector<int> bin = place(item, &bin_load);
  const int a = split < n ? bin[split] : -1, b = split < n ? bin.back() : -1;
  std::vector<int> order;  // bins in rank order: b right after a
  for (int r = 0; r < world; r++)
    if (r != b || a == b) order.push_back(r);
  if (a != b) order.insert(std::find(order.begin(), order.end(), a) + 1, b);
  std::vector<int> rank_of_bin(static_cast<size_t>(world));
  for (int r = 0; r < world; r++) rank_of_bin[size_t(order[size_t(r)])] = r;
  std::vector<int> rank_of(n);
  for (size_t k = 0; k < n; k++) rank_of[k] = rank_of_bin[size_t(bin[k])];
  *cut = {0, 0};
  if (a == b) return rank_of;
  // Rank a's part is x of the piece's cost, b's the rest: their loads are equal where
  // (load_a - c/2) + x = (load_b - c/2) + (c - x).
  const int64_t at = geo[split].best_cut((bin_load[size_t(b)] - bin_load[size_t(a)] + c[split]) / 2);
  if (at == 0)
    rank_of[split] = rank_of_bin[size_t(b)];  // all of it on the second rank, whole
  else
    *cut = {split, at};
  return rank_of;
}

std::vector<double> loads(const std::vector<PieceGeometry>& geo, const std::vector<double>& c,
                          const std::vector<int>& rank_of, const Cut& cut, int world) {
  std::vector<double> l(size_t(world), 0.0);
  for (size_t k = 0; k < c.size(); k++) {
    const double below = cut.at > 0 && k == cut.piece ? geo[k].cost_below(cut.at) : c[k];
    l[size_t(rank_of[k])] += below;
    if (below < c[k]) l[size_t(rank_of[k] + 1)] += c[k] - below;
  }
  return l;
}

double most(const std::vector<double>& l) { return *std::max_element(l.begin(), l.end()); }

// The whole pieces' plan, or the one that cuts the costliest piece that may be cut where that makes the
// busiest rank's load at least 1% lighter: a cut only where a large tensor bounds a rank's share.
std::vector<int> choose(const std::vector<PieceGeometry>& geo, const std::vector<double>& c,
                        const std::vector<bool>& cuttable, int world, Cut* cut) {
  std::vector<int> rank_of = assign(geo, c, c.size(), world, cut);
  const size_t split = costliest_cuttable(c, cuttable);
  if (world == 1 || split == c.size()) return rank_of;
  Cut cut2;
  std::vector<int> rank_of2 = assign(geo, c, split, world, &cut2);
  if (most(loads(geo, c, rank_of2, cut2, world)) < 0.99 * most(loads(geo, c, rank_of, *cut, world))) {
    *cut = cut2;
    return rank_of2;
  }
  return rank_of;
}
}  // namespace

ShardPlan plan_shards(const ParamTable& table, int world, const std::function<double(const TensorInfo&)>& cost,
                      const std::function<int64_t(const TensorInfo&)>& cut_unit) {
  if (world < 1) user_error("the number of ranks must be at least 1 (got ", world, ").");
  const std::vector<ParamTable::Piece> pieces = table.pieces();
  std::vector<PieceGeometry> geo;
  std::vector<double> c(pieces.size(), 0.0);
  std::vector<bool> cuttable(pieces.size(), false);
  for (size_t k = 0; k < pieces.size(); k++) {
    PieceGeometry g{table, pieces[k], cost, {}};
    bool all = bool(cut_unit);
    for (int i = pieces[k].first; i < pieces[k].first + pieces[k].count; i++) {
      const double ci = cost(table[i]);
      CHECK(ci >= 0);
      c[k] += ci;
      g.unit.push_back(cut_unit ? cut_unit(table[i]) : 0);
      CHECK(g.unit.back() % ShardPlan::kCutElems == 0);
      all = all && g.unit.back() > 0;
    }
    cuttable[k] = all;
    if (!all) std::fill(g.unit.begin(), g.unit.end(), 0);
    geo.push_back(g);
  }
  Cut cut;
  const std::vector<int> rank_of = choose(geo, c, cuttable, world, &cut);
  const int cut_rank = cut.at > 0 ? rank_of[cut.piece] : -1;  // the piece continues on cut_rank + 1

  // Each rank's range: the rest of the piece cut at the end of the previous rank's, its whole pieces in
  // table order, the padding, and the first part of the piece it cuts, which ends the range.
  ShardPlan p;
  p.world = world;
  p.load = loads(geo, c, rank_of, cut, world);
  p.used.assign(size_t(world), 0);
  std::vector<int64_t> start(pieces.size(), 0);  // whole pieces: where they start in their rank's range
  if (cut_rank >= 0) {
    p.used[size_t(cut_rank)] += cut.at;
    p.used[size_t(cut_rank + 1)] += geo[cut.piece].span() - cut.at;
  }
  for (size_t k = 0; k < pieces.size(); k++)
    if (!(cut_rank >= 0 && k == cut.piece)) {
      const size_t r = size_t(rank_of[k]);
      start[k] = p.used[r] - (int(r) == cut_rank ? cut.at : 0);
      p.used[r] += geo[k].span();
    }
  p.shard_elems = align(std::max<int64_t>(1, *std::max_element(p.used.begin(), p.used.end())));
  const int n = table.size();
  p.owner.assign(size_t(n), 0);
  p.cut.assign(size_t(n), 0);
  p.offset.assign(size_t(n), 0);
  for (size_t k = 0; k < pieces.size(); k++) {
    const int r = rank_of[k];
    const int64_t at = int(r) == cut_rank && k == cut.piece ? cut.at : 0;
    const int64_t base = at > 0 ? p.begin(r + 1) - at : p.begin(r) + start[k];
    for (int i = pieces[k].first; i < pieces[k].first + pieces[k].count; i++) {
      const int64_t rel = geo[k].rel(i);
      p.offset[size_t(i)] = base + rel;
      p.owner[size_t(i)] = at > 0 && rel >= at ? r + 1 : r;  // wholly past the cut: the next rank's
      if (at > rel && at < rel + table[i].numel) p.cut[size_t(i)] = at - rel;
    }
  }
  p.order.resize(size_t(n));
  std::iota(p.order.begin(), p.order.end(), 0);
  std::stable_sort(p.order.begin(), p.order.end(),
                   [&](int a, int b) { return p.offset[size_t(a)] < p.offset[size_t(b)]; });
  return p;
}

ParamTable sharded_table(const ParamTable& table, const ShardPlan& plan) {
  CHECK(int(plan.offset.size()) == table.size());
  ParamTable t = table;
  t.set_layout(plan.offset, plan.total_elems());
  return t;
}
