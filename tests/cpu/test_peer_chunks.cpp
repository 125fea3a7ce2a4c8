// --grad-sum copy's cuts (train/peer_chunks.h): every element of a run lies in exactly one piece and one
// rank's chunk, in order; no chunk is longer than the scratch slot the root or the summing rank pulls it
// into; chunks start at multiples of 4 elements from their piece (the add kernel's float4 path).
#include <gtest/gtest.h>

#include "train/peer_chunks.h"

namespace {
void check_cover(int64_t begin, int64_t n, int world, int64_t most) {
  SCOPED_TRACE("begin " + std::to_string(begin) + " n " + std::to_string(n) + " world " + std::to_string(world) +
               " most " + std::to_string(most));
  int64_t at = begin;
  for (const PeerSpan& p : peer_pieces(begin, n, most * world)) {
    ASSERT_EQ(p.begin, at);
    ASSERT_GT(p.n, 0);
    ASSERT_LE(p.n, most * world);
    for (int q = 0; q < world; q++) {
      const PeerSpan c = peer_chunk(p, q, world);
      ASSERT_EQ(c.begin, at) << "rank " << q;
      ASSERT_GE(c.n, 0);
      ASSERT_LE(c.n, most) << "rank " << q;
      if (c.n > 0) {
        ASSERT_EQ((c.begin - p.begin) % 4, 0) << "rank " << q;
      }
      at += c.n;
    }
    ASSERT_EQ(at, p.begin + p.n);
  }
  ASSERT_EQ(at, begin + n);
  at = begin;
  for (const PeerSpan& p : peer_pieces(begin, n, most)) {  // a reduce onto a root
    ASSERT_EQ(p.begin, at);
    ASSERT_LE(p.n, most);
    at += p.n;
  }
  ASSERT_EQ(at, begin + n);
}
}  // namespace

TEST(PeerChunks, EveryElementOnceInOrderWithinTheScratch) {
  for (int world = 1; world <= 8; world++)
    for (int64_t most : {4, 8, 1024})
      for (int64_t n = 0; n <= 200; n++) check_cover(n % 7, n, world, most);
  for (int world = 2; world <= 8; world++) check_cover(38597376 + 3, 38597376 + 5, world, int64_t(4) << 20);
}

TEST(PeerChunks, SmallRunsGoToTheFirstRanks) {  // 6 elements over 4 ranks: 4 and 2, the last two empty
  const PeerSpan p{10, 6};
  EXPECT_EQ(peer_chunk(p, 0, 4).n, 4);
  EXPECT_EQ(peer_chunk(p, 1, 4).n, 2);
  EXPECT_EQ(peer_chunk(p, 1, 4).begin, 14);
  EXPECT_EQ(peer_chunk(p, 2, 4).n, 0);
  EXPECT_EQ(peer_chunk(p, 3, 4).n, 0);
}
