#include "core/chunks.h"

#include <algorithm>

#include "common/error.h"

std::vector<int> all_tensors(const ParamTable& t) {
  std::vector<int> v(size_t(t.size()));
  for (int i = 0; i < t.size(); i++) v[size_t(i)] = i;
  return v;
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

std::vector<Chunk> plan_table_chunks(const ParamTable& t, const std::vector<int>& owned, int chunk_elems) {
  std::vector<int64_t> at;
  for (const auto& ti : t.tensors()) at.push_back(ti.offset);
  std::vector<Chunk> c = plan_chunks(t, all_tensors(t), at, chunk_elems);
  std::vector<char> mine(size_t(t.size()), owned.empty());  // owned empty: every tensor
  for (int i : owned) mine[size_t(i)] = 1;
  for (Chunk& k : c)
    if (!mine[size_t(k.tensor)]) k.n = 0;
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
