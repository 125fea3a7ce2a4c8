// The sample stream of WebDataset shards for training and evaluation (data.md B2: tar shards whose
// consecutive members <key>.jpg, <key>.cls, ... make one sample).
//
// Shards: a pattern with brace ranges or lists, as the datasets name them
// (`dir/imagenet1k-train-{0000..1023}.tar`, `dir/{train,extra}-{00..09}.tar`), or a glob (`dir/*.tar`).
// Process `rank` of `world` reads the shards whose index in that list is rank mod world.
//
// Order: each epoch reads this rank's shards once, in an order shuffled by the seed and the epoch (or in
// list order), through a shuffle buffer of N samples: the buffer is filled to N, a random one of them is
// served and its place refilled. An epoch drains its buffer before the next begins, so every epoch serves
// each sample exactly once. N = 0 (no buffer) serves the samples in shard order. The generator is
// splitmix64 (below), so a seed gives the same order with every compiler and library.
//
// Exact resume: position() records the epoch, the shard being read and the byte offset of its next
// sample, the generator state, and where each buffered sample lies (shard, offset). seek() reopens the
// shard there and reads the buffered samples back from their shards, so a stream that seeks to a position
// serves exactly what the recorded stream served after it. Each rank records its own position.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/wds_samples.h"

// Expands brace ranges ({0000..1023}: zero-padded when either end is) and lists ({a,b}); no file access.
std::vector<std::string> expand_braces(const std::string& pattern);
// The shard files of a pattern: braces expanded, then each part globbed if it has * ? or [; UserError when
// a named shard does not exist or nothing matches.
std::vector<std::string> list_shards(const std::string& pattern);
// Reads the first sample of every shard (its tar headers, image and class below num_classes) and checks
// that each file is whole 512-byte tar blocks, so that an empty, garbage or truncated shard, or one of
// another dataset, is refused before a run starts (UserError naming the shard). One sample per shard: a
// flaw further inside a shard is still found only when the stream reaches it.
void check_shard_starts(const std::vector<std::string>& shards, int num_classes);
// The shards of process `rank` of `world`: those at index i with i % world == rank. UserError if none.
std::vector<std::string> rank_shards(const std::vector<std::string>& shards, int rank, int world);

struct WdsStreamOptions {
  int num_classes = 0;
  int rank = 0, world = 1;
  bool shuffle_shards = false;  // a new shard order each epoch
  int64_t shuffle_buffer = 0;   // samples held for shuffling; 0: none
  uint64_t seed = 0;
  bool single_pass = false;  // evaluation: one epoch, then next() returns false
};

struct WdsPosition {
  struct Ref {
    int64_t shard = 0;   // index into the rank's shard list
    int64_t offset = 0;  // the sample's WdsSample::offset
    bool operator==(const Ref& o) const { return shard == o.shard && offset == o.offset; }
  };
  int64_t shards = 0;  // this rank's shard count, to refuse a position from another dataset or world size
  int64_t epoch = 0;
  int64_t order = 0;        // index in the epoch's shard order of the shard being read; `shards`: all read
  int64_t offset = 0;       // where its next sample begins
  int64_t read = 0;         // samples read from the shards this epoch
  uint64_t rng = 0;         // the shuffle buffer's generator state
  std::vector<Ref> buffer;  // the buffered samples, in buffer order

  // For a checkpoint section: a flat list of integers, and back (UserError for a malformed list).
  std::vector<int64_t> to_ints() const;
  static WdsPosition from_ints(const std::vector<int64_t>& v);
  bool operator==(const WdsPosition& o) const;
};

class WdsStream {
 public:
  WdsStream(const std::vector<std::string>& all_shards, const WdsStreamOptions& options);
  ~WdsStream();
  // The next sample. False only in single-pass mode, once the epoch is over.
  bool next(WdsSample& s);
  WdsPosition position() const;
  // Continues from a recorded position (same shards, options and world size); UserError if it cannot be.
  void seek(const WdsPosition& p);
  const std::vector<std::string>& shards() const { return files_; }  // this rank's
  int64_t epoch() const { return epoch_; }

 private:
  struct Slot {
    WdsSample sample;
    int64_t shard;
  };
  void start_epoch(int64_t epoch);
  bool read_sample(Slot& slot);  // from the shards, in this epoch's order; false when all are read
  void reload_buffer(const std::vector<WdsPosition::Ref>& refs);

  std::vector<std::string> files_;
  WdsStreamOptions o_;
  std::vector<int64_t> order_;  // this epoch's shard order (indices into files_)
  int64_t epoch_ = 0, order_index_ = 0, start_offset_ = 0, read_ = 0;
  uint64_t rng_ = 0;
  std::unique_ptr<WdsSampleReader> reader_;  // on files_[order_[order_index_]], opened at start_offset_
  std::vector<Slot> buffer_;
  bool finished_ = false;  // single pass over
};
