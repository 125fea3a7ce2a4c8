#include "core/chunks.h"

#include <algorithm>

#include "common/error.h"

std::vector<int> all_tensors(const ParamTable& t) {
  std::vector<int> v(size_t(t.size()));
  for (int i = 0; i < t.size(); i++) v[size_t(i)] = i;
  return v;
}

Owned::Owned(const std::vector<int>& tensors) {
  for (int i : tensors) parts.push_back({i, 0, -1});
}

std::vector<Part> owned_parts(const ParamTable& t, const Owned& owned) {
  std::vector<Part> v = owned.parts;
  if (v.empty())
    for (int i = 0; i < t.size(); i++) v.push_back({i, 0, -1});
  std::sort(v.begin(), v.end(), [](const Part& a, const Part& b) { return a.tensor < b.tensor; });
  for (size_t k = 0; k < v.size(); k++) {
    Part& p = v[k];
    CHECK(p.tensor >= 0 && p.tensor < t.size() && (k == 0 || p.tensor != v[k - 1].tensor));
    if (p.end < 0) p.end = t[p.tensor].numel;
    CHECK(p.begin >= 0 && p.begin < p.end && p.end <= t[p.tensor].numel);
  }
  return v;
}

std::vector<int> part_tensors(const std::vector<Part>& parts) {
  std::vector<int> v;
  for (const Part& p : parts) v.push_back(p.tensor);
  return v;
}

bool all_whole(const ParamTable& t, const std::vector<Part>& parts) {
  for (const Part& p : parts)
    if (p.begin != 0 || (p.end >= 0 && p.end != t[p.tensor].numel)) return false;
  return true;
}

int64_t plan_state_offsets(const ParamTable& t, const std::vector<int>& subset, std::vector<int64_t>* offsets) {
  offsets->assign(size_t(t.size()), -1);
  int64_t total = 0;
  for (int i : subset) {
    (*offsets)[size_t(i)] = total;
    // rounded up as the arena's offsets are, so each tensor's state starts 128-byte aligned
    total += (t[i].numel + ParamTable::kAlignElems - 1) / ParamTable::kAlignElems * ParamTable::kAlignElems;
  }
  return total;
}

std::vector<Chunk> plan_chunks(const ParamTable& t, const std::vector<int>& subset,
                               const std::vector<int64_t>& state_offsets, int chunk_elems) {
  CHECK(chunk_elems > 0 && chunk_elems % 4 == 0);
  std::vector<Chunk> out;
  for (int i : subset) {
    const auto& ti = t[i];
    for (int64_t s = 0; s < ti.numel; s += chunk_elems)
      out.push_back(
          {ti.offset + s, state_offsets[size_t(i)] + s, int32_t(std::min<int64_t>(chunk_elems, ti.numel - s)), i});
  }
  return out;
}

std::vector<Chunk> plan_part_chunks(const ParamTable& t, const std::vector<Part>& parts, int chunk_elems,
                                    int64_t* state_elems) {
  CHECK(chunk_elems > 0 && chunk_elems % 4 == 0);
  std::vector<Chunk> out;
  int64_t s_at = 0;
  for (const Part& p : parts) {
    const int64_t end = p.end < 0 ? t[p.tensor].numel : p.end;
    for (int64_t e = p.begin; e < end; e += chunk_elems)
      out.push_back(
          {t[p.tensor].offset + e, s_at + e - p.begin, int32_t(std::min<int64_t>(chunk_elems, end - e)), p.tensor});
    s_at += (end - p.begin + ParamTable::kAlignElems - 1) / ParamTable::kAlignElems * ParamTable::kAlignElems;
  }
  *state_elems = s_at;
  return out;
}

std::vector<Chunk> plan_table_chunks(const ParamTable& t, const Owned& owned, int chunk_elems) {
  std::vector<int64_t> at;
  for (const auto& ti : t.tensors()) at.push_back(ti.offset);
  std::vector<Chunk> c = plan_chunks(t, all_tensors(t), at, chunk_elems);
  std::vector<std::pair<int64_t, int64_t>> mine(size_t(t.size()), {0, 0});  // per tensor: the owned elements
  for (const Part& p : owned_parts(t, owned)) {
    CHECK(p.begin % chunk_elems == 0 && (p.end % chunk_elems == 0 || p.end == t[p.tensor].numel));
    mine[size_t(p.tensor)] = {p.begin, p.end};
  }
  for (Chunk& k : c) {
    const int64_t e = k.p_begin - t[k.tensor].offset;
    if (e < mine[size_t(k.tensor)].first || e >= mine[size_t(k.tensor)].second) k.n = 0;
  }
  return c;
}

TileGrid plan_tile_grid(int64_t rows, int64_t cols, int max_cols, int64_t target_elems) {
  CHECK(rows > 0 && cols > 0 && rows < (1ll << 31) && cols < (1ll << 31));
  TileGrid g;
  g.cols_per_tile = int32_t(std::min<int64_t>(cols, max_cols));
  g.col_tiles = int32_t((cols + g.cols_per_tile - 1) / g.cols_per_tile);
  g.rows_per_tile = int32_t(std::clamp<int64_t>(target_elems / g.cols_per_tile, 1, rows));
  g.row_tiles = int32_t((rows + g.rows_per_tile - 1) / g.rows_per_tile);
  return g;
}

// Tiles in (slice, tile row, tile column) order; the last row and column of tiles may be short.
void append_tiles(std::vector<Tile>* out, int slot, int64_t batch, int64_t rows, int64_t cols, const TileGrid& g) {
  for (int64_t b = 0; b < batch; b++)
    for (int tr = 0; tr < g.row_tiles; tr++)
      for (int tc = 0; tc < g.col_tiles; tc++) {
        int r0 = tr * g.rows_per_tile, c0 = tc * g.cols_per_tile;
        out->push_back({slot, int32_t(b), tr, tc, r0, int32_t(std::min<int64_t>(g.rows_per_tile, rows - r0)), c0,
                        int32_t(std::min<int64_t>(g.cols_per_tile, cols - c0))});
      }
}
