#include "data/token_shards.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "common/atomic_file.h"
#include "common/error.h"

// The header, 256 little-endian int32: {kShardMagic, kShardVersion, token count, 0, ...}; then the tokens,
// uint16 each.
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  int32_t header[256] = {0};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = int32_t(tokens.size());
  if (tokens.size() > size_t(INT32_MAX))
    user_error("a shard holds at most 2^31-1 tokens; '", path, "' would hold ", tokens.size(), ".");
  AtomicFile f(path, size_t(1) << 20);
  f.write(header, sizeof header);
  f.write(tokens.data(), 2 * tokens.size());
  f.commit();
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
    user_error("token shard '", path, "' has magic ", header[0], " instead of ", kShardMagic,
               "; it is not a GPT-2 llm.c shard.");
  if (header[1] != kShardVersion)
    user_error("token shard '", path, "' has version ", header[1], " but only version 1 (uint16 tokens) is supported.");
  const int64_t n = header[2];
  if (n < 0 || size != int64_t(sizeof header) + 2 * n)
    user_error("token shard '", path, "' is ", size, " bytes but its header promises ", n, " tokens (", 1024 + 2 * n,
               " bytes); the file is truncated or corrupt.");
  return n;
}

// UserError naming the first token >= vocab among t[0, n), which sit at position `first` of the shard.
void check_vocab(const uint16_t* t, int64_t n, int64_t first, const std::string& path, int vocab) {
  for (int64_t i = 0; i < n; i++)
    if (t[i] >= vocab)
      user_error("token shard '", path, "' has token ", t[i], " at position ", first + i,
                 ", outside the vocabulary of ", vocab, ".");
}

// The loader checks this many tokens at each end of every shard when it is made. A shard written for
// another vocabulary has out-of-range ids throughout, so its ends show it: 256 KB read per shard. All
// tokens would mean reading the whole dataset at every start and resume (FineWeb-10B: 20 GB, tens of
// seconds to minutes), so the rest are checked when a shard is loaded (read_token_shard).
constexpr int64_t kCheckedEndTokens = 65536;

// Checks tokens [from, from + n) of the shard open in `f`.
void check_token_range(std::ifstream& f, const std::string& path, int64_t from, int64_t n, int vocab) {
  if (n <= 0) return;
  std::vector<uint16_t> t(static_cast<size_t>(n));
  f.seekg(1024 + 2 * from);
  if (!f.read(reinterpret_cast<char*>(t.data()), std::streamsize(2 * n)))
    user_error("cannot read token shard '", path, "'.");
  check_vocab(t.data(), n, from, path, vocab);
}
}  // namespace

std::vector<uint16_t> read_token_shard(const std::string& path, int vocab) {
  std::ifstream f(path, std::ios::binary);
  const int64_t n = shard_tokens(f, path);
  std::vector<uint16_t> t(static_cast<size_t>(n));
  if (n && !f.read(reinterpret_cast<char*>(t.data()), std::streamsize(2 * n)))
    user_error("cannot read token shard '", path, "'.");
  check_vocab(t.data(), n, 0, path, vocab);
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
  for (const auto& f : out) {  // a folder would be read as an empty file (tokenize) or a short shard
    struct stat st;
    if (stat(f.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      user_error("'", f, "' is a folder, not a file; give a pattern that matches files, such as '", f, "/*'.");
  }
  return out;
}

TokenLoader::TokenLoader(std::vector<std::string> files, int B, int T, int rank, int world, int vocab, bool shuffle,
                         uint64_t seed)
    : files_(std::move(files)),
      B_(B),
      T_(T),
      rank_(rank),
      world_(world),
      vocab_(vocab),
      shuffle_(shuffle),
      seed_(seed) {
  if (B < 1 || T < 1 || world < 1 || rank < 0 || rank >= world) user_error("bad loader geometry B=", B, " T=", T, ".");
  if (files_.empty()) user_error("the token loader needs at least one shard.");
  const int64_t per = int64_t(world) * B * T;
  for (const auto& f : files_) {  // every shard's header, size and ends checked now; the rest when it is loaded
    std::ifstream in(f, std::ios::binary);
    const int64_t ntok = shard_tokens(in, f);
    const int64_t s = ntok > 0 ? (ntok - 1) / per : 0;
    if (s < 1)
      user_error("token shard '", f, "' has ", std::max<int64_t>(ntok, 0), " tokens, fewer than one batch needs (",
                 per + 1, " for B=", B, ", T=", T, ", ", world, " process(es)); use a smaller batch or longer shards.");
    const int64_t head = std::min(ntok, kCheckedEndTokens), tail = std::max(head, ntok - kCheckedEndTokens);
    check_token_range(in, f, 0, head, vocab);
    check_token_range(in, f, tail, ntok - tail, vocab);
    tokens_per_file_.push_back(ntok);
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
    std::vector<uint16_t> t = read_token_shard(files_[size_t(file)], vocab_);
    // The sample count came from the size checked at construction; a shard rewritten since (a new
    // dataset prepared under a running job) would be read past its end.
    if (int64_t(t.size()) != tokens_per_file_[size_t(file)])
      user_error("token shard '", files_[size_t(file)], "' changed since the run started (",
                 tokens_per_file_[size_t(file)], " tokens then, ", t.size(), " now); restore it or restart the run.");
    tokens_ = std::move(t);
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
  // The epoch counts epochs served (at most one per batch): never negative, never near 2^63, where a
  // corrupt checkpoint's value would overflow the counter in next() (signed: undefined behaviour).
  if (p.epoch < 0 || p.epoch > (int64_t(1) << 62))
    user_error("the data position in the checkpoint has an impossible epoch (", p.epoch,
               "); the checkpoint is corrupt.");
  pos_ = p;
  order_epoch(p.epoch);
  if (p.shard < 0 || p.shard >= int64_t(files_.size()))
    user_error("the data position in the checkpoint is outside this dataset.");
  load(p.shard);
  if (p.sample < 0 || p.sample > int64_t(sample_order_.size()))
    user_error("the data position in the checkpoint is outside this dataset.");
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
