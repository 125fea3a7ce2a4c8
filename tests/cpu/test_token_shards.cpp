#include <cstdio>

#include "data/token_shards.h"
#include "tests/test_util.h"

namespace {
std::vector<uint16_t> ramp(int n, int start = 0, int mod = 50000) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) v[size_t(i)] = uint16_t((start + i) % mod);
  return v;
}
}  // namespace

TEST(TokenShards, RoundTripAndLlmcLayout) {
  const std::string d = make_temp_dir(), f = d + "/x_val_000000.bin";
  write_token_shard(f, ramp(1000));
  const std::string bytes = read_file(f);
  ASSERT_EQ(bytes.size(), 1024u + 2000u);
  // Header bytes as data.md A4 shows them for a GPT-2 shard: 20240520, version 1, then the count.
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x88\xd8\x34\x01\x01\x00\x00\x00", 8));
  EXPECT_EQ(read_token_shard(f, 50257), ramp(1000));
  EXPECT_EQ(glob_files(d + "/x_*.bin"), std::vector<std::string>{f});
  expect_user_error([&] { glob_files(d + "/nothing_*.bin"); }, "no files match");
}

TEST(TokenShards, MalformedShardsAreRejectedWithNameAndReason) {
  const std::string d = make_temp_dir(), f = d + "/s.bin";
  write_token_shard(f, ramp(100));
  const std::string good = read_file(f);
  std::string bad = good;
  bad[0] = 0;
  write_file(f, bad);
  expect_user_error([&] { read_token_shard(f, 50257); }, "has magic");
  bad = good;
  bad[4] = 7;
  write_file(f, bad);
  expect_user_error([&] { read_token_shard(f, 50257); }, "version 7");
  write_file(f, good.substr(0, good.size() - 3));
  expect_user_error([&] { read_token_shard(f, 50257); }, "truncated or corrupt");
  write_file(f, good.substr(0, 100));
  expect_user_error([&] { read_token_shard(f, 50257); }, "shorter than its 1024-byte header");
  write_token_shard(f, {1, 2, 60000, 3});
  expect_user_error([&] { read_token_shard(f, 50257); }, "token 60000 at position 2");
  expect_user_error([&] { read_token_shard(d + "/none.bin", 50257); }, "cannot open token shard");
}

TEST(TokenLoader, SequentialBatchesFollowLlmc) {
  const std::string d = make_temp_dir();
  write_token_shard(d + "/a.bin", ramp(101));  // (101 - 1) / (2 * 5) = 10 samples of B=2, T=5
  TokenLoader L({d + "/a.bin"}, 2, 5, 0, 1, 50257, false, 0);
  EXPECT_EQ(L.samples_per_epoch(), 10);
  std::vector<int32_t> x(10), y(10);
  for (int s = 0; s < 10; s++) {
    L.next(x.data(), y.data());
    for (int i = 0; i < 10; i++) {
      ASSERT_EQ(x[size_t(i)], s * 10 + i);
      ASSERT_EQ(y[size_t(i)], s * 10 + i + 1);  // targets are the next tokens
    }
  }
  L.next(x.data(), y.data());  // wraps to a new epoch
  EXPECT_EQ(x[0], 0);
  EXPECT_EQ(L.position().epoch, 1);
}

TEST(TokenLoader, RanksReadDisjointSlices) {
  const std::string d = make_temp_dir();
  write_token_shard(d + "/a.bin", ramp(2 * 3 * 4 * 5 + 1));
  TokenLoader r0({d + "/a.bin"}, 3, 4, 0, 2, 50257, false, 0), r1({d + "/a.bin"}, 3, 4, 1, 2, 50257, false, 0);
  std::vector<int32_t> x0(12), y0(12), x1(12), y1(12);
  for (int s = 0; s < 5; s++) {
    r0.next(x0.data(), y0.data());
    r1.next(x1.data(), y1.data());
    EXPECT_EQ(x0[0], s * 24);
    EXPECT_EQ(x1[0], s * 24 + 12);
  }
}

TEST(TokenLoader, ShuffleIsDeterministicAndResumable) {
  const std::string d = make_temp_dir();
  for (int k = 0; k < 3; k++) write_token_shard(d + "/s" + std::to_string(k) + ".bin", ramp(4 * 8 * 7 + 1, 1000 * k));
  auto files = glob_files(d + "/s*.bin");
  auto run = [&](uint64_t seed, int n) {
    TokenLoader L(files, 4, 8, 0, 1, 50257, true, seed);
    std::vector<int32_t> firsts, x(32), y(32);
    for (int i = 0; i < n; i++) L.next(x.data(), y.data()), firsts.push_back(x[0]);
    return firsts;
  };
  auto a = run(5, 50), b = run(5, 50), c = run(6, 50);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<int32_t> sorted(a.begin(), a.begin() + 21);  // one epoch = 21 samples, each exactly once
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  // Resume: record the position after 30 batches, seek a fresh loader there, continue identically.
  TokenLoader L(files, 4, 8, 0, 1, 50257, true, 5);
  std::vector<int32_t> x(32), y(32);
  for (int i = 0; i < 30; i++) L.next(x.data(), y.data());
  TokenLoader M(files, 4, 8, 0, 1, 50257, true, 5);
  M.seek(L.position());
  for (int i = 30; i < 50; i++) {
    M.next(x.data(), y.data());
    EXPECT_EQ(x[0], a[size_t(i)]) << i;
  }
}

// Fuzzing (issue 12, tests/fuzz/fuzz_token_shards.cpp): a checkpoint's loader position with epoch
// 2^63-1 was accepted, and the epoch counter overflowed (UBSan) when that epoch ended.
TEST(TokenLoader, ImpossibleEpochFromACheckpointIsRefused) {
  const std::string d = make_temp_dir();
  write_token_shard(d + "/a.bin", ramp(11));  // 10 samples of B=1, T=1
  TokenLoader L({d + "/a.bin"}, 1, 1, 0, 1, 50257, false, 0);
  expect_user_error([&] { L.seek({INT64_MAX, 0, 0}); }, "impossible epoch (9223372036854775807)");
  expect_user_error([&] { L.seek({INT64_MAX - 5, 0, 0}); }, "impossible epoch");
  expect_user_error([&] { L.seek({-1, 0, 0}); }, "impossible epoch (-1)");
  L.seek({int64_t(1) << 62, 0, 8});
  int32_t x, y;
  for (int i = 0; i < 20; i++) L.next(&x, &y);  // through the next epoch, into the one after
  EXPECT_EQ(L.position().epoch, (int64_t(1) << 62) + 2);
}

TEST(TokenLoader, TooSmallShardIsAClearError) {
  const std::string d = make_temp_dir();
  write_token_shard(d + "/tiny.bin", ramp(10));
  expect_user_error([&] { TokenLoader({d + "/tiny.bin"}, 4, 64, 0, 1, 50257, false, 0); },
                    "fewer than one batch needs");
}

// Security review (issue 12): a shard that changed size after the loader validated it was read past
// the end of its buffer (the sample count was the old one).
TEST(TokenLoader, ShardThatChangedSizeIsAClearError) {
  const std::string d = make_temp_dir();
  write_token_shard(d + "/a.bin", ramp(101));
  write_token_shard(d + "/b.bin", ramp(101));
  TokenLoader L({d + "/a.bin", d + "/b.bin"}, 2, 5, 0, 1, 50257, false, 0);
  std::vector<int32_t> x(10), y(10);
  for (int s = 0; s < 10; s++) L.next(x.data(), y.data());  // all of a.bin
  write_token_shard(d + "/b.bin", ramp(21));                // still a valid shard, but 2 samples instead of 10
  expect_user_error([&] { L.next(x.data(), y.data()); }, "token shard '" + d + "/b.bin' changed since");
}

// Every shard's header, size and (a sample of its) tokens are checked when the loader is made, so a bad
// second shard stops the run before training starts instead of when it is reached.
TEST(TokenLoader, BadLaterShardIsFoundAtConstruction) {
  const std::string d = make_temp_dir();
  write_token_shard(d + "/a.bin", ramp(101));
  std::vector<uint16_t> bad = ramp(101);
  bad[5] = 60000;
  write_token_shard(d + "/b.bin", bad);
  expect_user_error(
      [&] {
        TokenLoader({d + "/a.bin", d + "/b.bin"}, 2, 5, 0, 1, 50257, false, 0);
      },
      "token shard '" + d + "/b.bin' has token 60000 at position 5");
  bad = ramp(200000);  // the end of a long shard is checked too
  bad[199990] = 50257;
  write_token_shard(d + "/b.bin", bad);
  expect_user_error(
      [&] {
        TokenLoader({d + "/a.bin", d + "/b.bin"}, 2, 5, 0, 1, 50257, false, 0);
      },
      "has token 50257 at position 199990");
  write_file(d + "/b.bin", read_file(d + "/a.bin").substr(0, 1100));  // truncated
  expect_user_error(
      [&] {
        TokenLoader({d + "/a.bin", d + "/b.bin"}, 2, 5, 0, 1, 50257, false, 0);
      },
      "token shard '" + d + "/b.bin' is 1100 bytes");
}

TEST(TokenShards, GlobMatchingAFolderIsAClearError) {
  const std::string d = make_temp_dir();
  expect_user_error([&] { glob_files(d); }, "'" + d + "' is a folder");
  write_token_shard(d + "/a.bin", ramp(10));
  EXPECT_EQ(glob_files(d + "/*.bin"), std::vector<std::string>{d + "/a.bin"});
}
