// Work maps for multi-tensor kernels (the multi_tensor_apply idea, with the map in device memory so a
// launch can cover any number of tensors). Built once on the host per optimizer, uploaded once.
//
//  - Chunk: a contiguous run of one tensor's elements; elementwise passes (AdamW, Muon, grad norm).
//  - Tile:  a block of rows x cols of one batch slice of a tensor's last-two-dims view; passes that
//           reduce along rows and columns (Adafactor's factored second moment).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/param_table.h"

// What one optimizer steps of tensor `tensor`: elements [begin, end). In the sharded data-parallel step a
// rank may own part of an element-wise tensor (core/shard_plan.h); everywhere else parts are whole.
struct Part {
  int tensor;
  int64_t begin, end;  // end < 0: to the tensor's numel
  bool operator==(const Part& o) const { return tensor == o.tensor && begin == o.begin && end == o.end; }
};

// The tensors (or parts of them) an optimizer steps. Made from table indices, every part is whole; empty
// means every tensor of the table.
struct Owned {
  std::vector<Part> parts;
  // The tensors the shard plan cuts between two ranks, on every rank, held or not: an optimizer that sums a
  // cut tensor's statistics over its two ranks (LoCore) makes the same cross-rank calls on every rank.
  std::vector<int> cut;
  Owned() = default;
  Owned(const std::vector<int>& tensors);  // NOLINT(google-explicit-constructor): whole tensors
  explicit Owned(std::vector<Part> p) : parts(std::move(p)) {}
  bool empty() const { return parts.empty(); }
};

// The parts of `owned` checked (in range, each tensor once, begin < end <= numel), with their ends
// filled in, sorted by tensor; empty = every tensor of the table, whole.
std::vector<Part> owned_parts(const ParamTable& t, const Owned& owned);
std::vector<int> part_tensors(const std::vector<Part>& parts);
bool all_whole(const ParamTable& t, const std::vector<Part>& parts);

struct Chunk {
  int64_t p_begin;  // first element in the arena
  int64_t s_begin;  // first element in the optimizer's state buffers
  int32_t n;        // elements
  int32_t tensor;   // table index
};

// Compact state layout for a subset of tensors: offsets aligned like the arena's; -1 for tensors not in
// the subset. Returns the total length.
int64_t plan_state_offsets(const ParamTable& t, const std::vector<int>& subset, std::vector<int64_t>* offsets);

// Chunks of at most chunk_elems (a multiple of 4) over the subset, in table order.
std::vector<Chunk> plan_chunks(const ParamTable& t, const std::vector<int>& subset,
                               const std::vector<int64_t>& state_offsets, int chunk_elems);
// Chunks over parts (owned_parts), each part's state compact and aligned as plan_state_offsets lays it
// out; *state_elems gets the state's length. A part's chunks start at its first element, so where it begins
// at a multiple of chunk_elems they are the whole tensor's chunks.
std::vector<Chunk> plan_part_chunks(const ParamTable& t, const std::vector<Part>& parts, int chunk_elems,
                                    int64_t* state_elems);
// The chunks of every tensor of the table at arena offsets, those outside `owned` with n = 0: one partition
// on every rank of a sharded step, so that each rank's partial sums (zero where it owns nothing) add up
// across ranks to the whole table's, chunk by chunk and in the same order as on one GPU. A part must
// begin and end on chunk boundaries (or the tensor's end).
std::vector<Chunk> plan_table_chunks(const ParamTable& t, const Owned& owned, int chunk_elems);

struct Tile {
  int32_t slot;    // index into the optimizer's own per-tensor table
  int32_t b;       // batch slice
  int32_t tr, tc;  // tile row / column index within the slice
  int32_t r0, nr;  // rows [r0, r0+nr)
  int32_t c0, nc;  // cols [c0, c0+nc)
};

struct TileGrid {
  int32_t row_tiles = 0, col_tiles = 0, rows_per_tile = 0, cols_per_tile = 0;
};

// How a (rows x cols) slice is cut: at most max_cols columns a tile, and enough rows that a tile holds
// about target_elems elements.
TileGrid plan_tile_grid(int64_t rows, int64_t cols, int max_cols, int64_t target_elems);
// Appends the tiles of every batch slice of one tensor.
void append_tiles(std::vector<Tile>* out, int slot, int64_t batch, int64_t rows, int64_t cols, const TileGrid& g);

std::vector<int> all_tensors(const ParamTable& t);
