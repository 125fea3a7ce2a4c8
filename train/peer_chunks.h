// How --grad-sum copy cuts the runs it sums (train/peer_sum.h), host-only so the CPU suite can walk it.
// A run of an all-reduce is cut into pieces of at most world x most elements, and each piece into world
// chunks, one per rank: rank q sums chunk q and the others copy it from there. Chunks are a multiple of
// 4 elements long (the last takes what is left, and may be empty), so that a piece that starts at a 16-byte
// boundary gives every chunk one too, for the add kernel's float4 path. A reduce onto one root is cut into
// pieces of at most `most`: the root pulls each piece from every other rank into a scratch slot of `most`.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

struct PeerSpan {
  int64_t begin, n;  // arena elements
};

// [begin, begin + n) as consecutive pieces of at most `most` elements (none when n is 0).
inline std::vector<PeerSpan> peer_pieces(int64_t begin, int64_t n, int64_t most) {
  std::vector<PeerSpan> v;
  for (int64_t at = 0; at < n; at += most) v.push_back({begin + at, std::min(most, n - at)});
  return v;
}

// Rank q's chunk of a piece (q < world).
inline PeerSpan peer_chunk(PeerSpan piece, int q, int world) {
  const int64_t each = ((piece.n + world - 1) / world + 3) / 4 * 4;
  const int64_t b = std::min(piece.n, int64_t(q) * each);
  return {piece.begin + b, std::min(piece.n, b + each) - b};
}
