#include "data/token_shards.h"

#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>

#include "common/error.h"

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  int32_t header[256] = {0};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = int32_t(tokens.size());
  if (tokens.size() > size_t(INT32_MAX)) user_error("a shard holds at most 2^31-1 tokens; '", path, "' would hold ", tokens.size(), ".");
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) user_error("cannot write '", tmp, "'; check that the folder exists and is writable.");
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1 &&
            std::fwrite(tokens.data(), 2, tokens.size(), f) == tokens.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    user_error("writing '", path, "' failed (disk full?).");
  }
}

namespace {
// Validates the header against the file size; returns the token count and leaves `f` after the header.
int64_t shard_tokens(std::ifstream& f, const std::string& path) {
  if (!f) user_error("cannot open token shard '", path, "'.");
  f.seekg(0, std::ios::end);
  const int64_t size = int64_t(f.tellg());
  f.seekg(0);
  int32_t header[256];
  if (size < int64_t(sizeof header) || !f.read(reinterpret_cast<char*>(header), sizeof header))
    user_error("token shard '", path, "' is shorter than its 1024-byte header; it is not an llm.c shard.");
  if (header[0] != kShardMagic)
    user_error("token shard '", path, "' has magic ", header[0], " instead of ", kShardMagic, "; it is not a GPT-2 llm.c shard.");
  if (header[1] != kShardVersion)
    user_error("token shard '", path, "' has version ", header[1], " but only version 1 (uint16 tokens) is supported.");
  const int64_t n = header[2];
  if (n < 0 || size != int64_t(sizeof header) + 2 * n)
    user_error("token shard '", path, "' is ", size, " bytes but its header promises ", n, " tokens (", 1024 + 2 * n,
               " bytes); the file is truncated or corrupt.");
  return n;
}
}  // namespace

std::vector<uint16_t> read_token_shard(const std::string& path, int vocab) {
  std::ifstream f(path, std::ios::binary);
  const int64_t n = shard_tokens(f, path);
  std::vector<uint16_t> t(static_cast<size_t>(n));
  if (n && !f.read(reinterpret_cast<char*>(t.data()), std::streamsize(2 * n))) user_error("cannot read token shard '", path, "'.");
  for (int64_t i = 0; i < n; i++)
    if (t[size_t(i)] >= vocab)
      user_error("token shard '", path, "' has token ", t[size_t(i)], " at position ", i, ", outside the vocabulary of ", vocab, ".");
  return t;
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g;
  std::vector<std::string> out;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; i++) out.push_back(g.gl_pathv[i]);
  globfree(&g);
  if (out.empty()) user_error("no files match '", pattern, "'; prepare data first (see the README).");
  std::sort(out.begin(), out.end());
  return out;
}

TokenLoader::TokenLoader(std::vector<std::string> files, int B, int T, int rank, int world, int vocab, bool shuffle,
                         uint64_t seed)
    : files_(std::move(files)), B_(B), T_(T), rank_(rank), world_(world), vocab_(vocab), shuffle_(shuffle), seed_(seed) {
  if (B < 1 || T < 1 || world < 1 || rank < 0 || rank >= world) user_error("bad loader geometry B=", B, " T=", T, ".");
  if (files_.empty()) user_error("the token loader needs at least one shard.");
  const int64_t per = int64_t(world) * B * T;
  for (const auto& f : files_) {  // every header checked now; tokens when a shard is loaded
    std::ifstream in(f, std::ios::binary);
    const int64_t ntok = shard_tokens(in, f);
    const int64_t s = ntok > 0 ? (ntok - 1) / per : 0;
    if (s < 1)
      user_error("token shard '", f, "' has ", std::max<int64_t>(ntok, 0), " tokens, fewer than one batch needs (",
                 per + 1, " for B=", B, ", T=", T, ", ", world, " process(es)); use a smaller batch or longer shards.");
    samples_.push_back(s);
    total_samples_ += s;
  }
  seek(Position{});
}

void TokenLoader::order_epoch(int64_t epoch) {
  shard_order_.resize(files_.size());
  std::iota(shard_order_.begin(), shard_order_.end(), 0);
  if (shuffle_) {
    std::mt19937_64 rng(seed_ * 1000003 + uint64_t(epoch));  // same on every rank: ranks read the same shard
    std::shuffle(shard_order_.begin(), shard_order_.end(), rng);
  }
}

void TokenLoader::load(int64_t shard) {
  const int64_t file = shard_order_[size_t(shard)];
  if (file != loaded_) {
    tokens_ = read_token_shard(files_[size_t(file)], vocab_);
    loaded_ = file;
  }
  sample_order_.resize(size_t(samples_[size_t(file)]));
  std::iota(sample_order_.begin(), sample_order_.end(), 0);
  if (shuffle_) {
    std::mt19937_64 rng(seed_ * 7919 + uint64_t(pos_.epoch) * 131 + uint64_t(shard));
    std::shuffle(sample_order_.begin(), sample_order_.end(), rng);
  }
}

void TokenLoader::seek(const Position& p) {
  pos_ = p;
  order_epoch(p.epoch);
  if (p.shard < 0 || p.shard >= int64_t(files_.size())) user_error("the data position in the checkpoint is outside this dataset.");
  load(p.shard);
  if (p.sample < 0 || p.sample > int64_t(sample_order_.size())) user_error("the data position in the checkpoint is outside this dataset.");
}

void TokenLoader::next(int32_t* inputs, int32_t* targets) {
  if (pos_.sample >= int64_t(sample_order_.size())) {  // next shard, or next epoch
    pos_.sample = 0;
    if (++pos_.shard >= int64_t(files_.size())) {
      pos_.shard = 0;
      order_epoch(++pos_.epoch);
    }
    load(pos_.shard);
  }
  const int64_t s = sample_order_[size_t(pos_.sample++)];
  const int64_t n = int64_t(B_) * T_;
  const uint16_t* src = tokens_.data() + s * world_ * n + rank_ * n;
  for (int64_t i = 0; i < n; i++) {
    inputs[i] = src[i];
    targets[i] = src[i + 1];
  }
}
