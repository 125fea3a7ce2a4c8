// llm.c token shards (data.md B1): a 1024-byte header of 256 little-endian int32 {20240520, 1, N, 0...}
// followed by N uint16 GPT-2 tokens; shard 0 of a dataset is validation by convention.
//
// TokenLoader serves (B, T) batches like llm.c's loader: sample s of a shard is the B*T+1 tokens starting
// at s*P*B*T + rank*B*T (P processes), inputs = the first B*T, targets = shifted by one. Every shard's
// header (magic, version), size and the tokens at its two ends are checked when the loader is made, every
// token < vocab when a shard is loaded; a bad shard is rejected with the file name and the reason. With
// shuffling, shard order and sample order are permuted per epoch by a seeded generator, so a run (and a
// resumed run) sees exactly the same batches.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

constexpr int32_t kShardMagic = 20240520, kShardVersion = 1;

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);  // atomic, fsynced
// Reads and validates a whole shard; UserError names the file and what is wrong.
std::vector<uint16_t> read_token_shard(const std::string& path, int vocab);
// Sorted files matching a glob pattern; UserError when none match or one of them is a folder.
std::vector<std::string> glob_files(const std::string& pattern);

// ShardWriter (data/shard_writer.h) writes a whole dataset's shards for tokenize.

class TokenLoader {
 public:
  struct Position {
    int64_t epoch = 0, shard = 0, sample = 0;  // next sample to serve
  };
  // Checks every shard's header and size, and the tokens at both ends of each (see the .cpp), so a bad
  // shard is refused here, before training starts; the rest of a shard's tokens when it is loaded.
  TokenLoader(std::vector<std::string> files, int B, int T, int rank, int world, int vocab, bool shuffle,
              uint64_t seed);
  // Fills inputs and targets (B*T each) with the next batch; wraps to a new epoch at the end.
  void next(int32_t* inputs, int32_t* targets);
  Position position() const { return pos_; }
  void seek(const Position& p);  // resume: the batch after seek equals the batch after `p` was recorded
  int64_t samples_per_epoch() const { return total_samples_; }

 private:
  void load(int64_t shard);  // the shard at position `shard` of this epoch's order
  void order_epoch(int64_t epoch);
  std::vector<std::string> files_;
  std::vector<int64_t> tokens_per_file_, samples_;  // as validated by the constructor
  int B_, T_, rank_, world_, vocab_;
  bool shuffle_;
  uint64_t seed_;
  int64_t total_samples_ = 0;
  Position pos_;
  std::vector<int64_t> shard_order_, sample_order_;
  int64_t loaded_ = -1;  // file index in memory
  std::vector<uint16_t> tokens_;
};
