#include "data/wds_stream.h"

#include <sys/stat.h>

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "data/token_shards.h"

namespace {
constexpr size_t kMaxPatternShards = 1000000;

// splitmix64 (Vigna): a counter through an avalanching mix; its output is fixed by these lines alone.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t next_random(uint64_t& state) {
  const uint64_t r = mix64(state);
  state += 0x9e3779b97f4a7c15ull;
  return r;
}
// Uniform in [0, n) by a 128-bit multiply (bias below n / 2^64: none that a shuffle could show).
uint64_t random_below(uint64_t& state, uint64_t n) { return uint64_t((unsigned __int128)next_random(state) * n >> 64); }
// The seed of one purpose (1: shard order, 2: the buffer) in one epoch of one rank.
uint64_t stream_seed(uint64_t seed, int64_t epoch, int rank, int purpose) {
  return mix64(mix64(mix64(seed) ^ uint64_t(epoch)) ^ (uint64_t(rank) << 8 | uint64_t(purpose)));
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The alternatives of one brace group's inside: a range a..b or a list a,b,c.
std::vector<std::string> brace_alternatives(const std::string& in, const std::string& pattern) {
  const size_t dots = in.find("..");
  if (dots != std::string::npos) {
    const std::string a = in.substr(0, dots), b = in.substr(dots + 2);
    if (!all_digits(a) || !all_digits(b))
      user_error("the range {", in, "} in shard pattern '", pattern, "' must be two numbers, such as {0000..1023}.");
    const long lo = std::stol(a), hi = std::stol(b);
    if (lo > hi)
      user_error("the range {", in, "} in shard pattern '", pattern, "' counts down; write {", b, "..", a, "}.");
    if (size_t(hi - lo) >= kMaxPatternShards)
      user_error("the range {", in, "} in shard pattern '", pattern, "' names more than ", kMaxPatternShards,
                 " shards.");
    const bool pad = (a.size() > 1 && a[0] == '0') || (b.size() > 1 && b[0] == '0');
    const size_t width = pad ? std::max(a.size(), b.size()) : 0;
    std::vector<std::string> out;
    for (long i = lo; i <= hi; i++) {
      std::string s = std::to_string(i);
      out.push_back(std::string(width > s.size() ? width - s.size() : 0, '0') + s);
    }
    return out;
  }
  if (in.find(',') == std::string::npos)
    user_error("'{", in, "}' in shard pattern '", pattern,
               "' is neither a range such as {0000..1023} nor a list such as {train,val}.");
  std::vector<std::string> out;
  for (size_t i = 0;;) {
    const size_t comma = in.find(',', i);
    out.push_back(in.substr(i, comma - i));
    if (comma == std::string::npos) return out;
    i = comma + 1;
  }
}

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  const size_t open = pattern.find('{'), close = pattern.find('}');
  if (open == std::string::npos && close == std::string::npos) return {pattern};
  const size_t next_open = open == std::string::npos ? open : pattern.find('{', open + 1);
  if (open == std::string::npos || close == std::string::npos || close < open || next_open < close)
    user_error("the braces in shard pattern '", pattern, "' do not pair up (nested braces are not supported).");
  const std::string head = pattern.substr(0, open);
  const std::vector<std::string> alts = brace_alternatives(pattern.substr(open + 1, close - open - 1), pattern);
  const std::vector<std::string> tails = expand_braces(pattern.substr(close + 1));
  if (alts.size() * tails.size() > kMaxPatternShards)
    user_error("shard pattern '", pattern, "' names more than ", kMaxPatternShards, " shards.");
  std::vector<std::string> out;
  for (const auto& a : alts)
    for (const auto& t : tails) out.push_back(head + a + t);
  return out;
}

std::vector<std::string> list_shards(const std::string& pattern) {
  std::vector<std::string> out;
  for (const auto& part : expand_braces(pattern)) {
    if (part.find_first_of("*?[") != std::string::npos) {
      for (auto& f : glob_files(part)) out.push_back(std::move(f));
    } else if (is_file(part)) {
      out.push_back(part);
    } else {
      user_error("shard '", part, "' (from the pattern '", pattern,
                 "') does not exist or is not a file; check the path, or prepare the data first (see the README).");
    }
  }
  return out;
}

std::vector<std::string> rank_shards(const std::vector<std::string>& shards, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) user_error("process ", rank, " of ", world, " is not a valid rank.");
  std::vector<std::string> out;
  for (size_t i = size_t(rank); i < shards.size(); i += size_t(world)) out.push_back(shards[i]);
  if (out.empty())
    user_error("process ", rank, " of ", world, " gets no shard: there are only ", shards.size(),
               " shard(s); use at most ", shards.size(), " processes, or split the data into more shards.");
  return out;
}

void check_shard_starts(const std::vector<std::string>& shards, int num_classes) {
  WdsSample first;
  for (const auto& path : shards) {
    WdsSampleReader reader(path, num_classes, 0, size_t(64) << 10);  // the first sample only: a small buffer
    if (!reader.next(first))
      user_error("shard '", path, "' holds no samples; remove it from the pattern, or prepare the data again.");
    struct stat st;
    // Tar archives are whole 512-byte blocks, so a file of another size ends inside a member: the
    // reader would refuse it when it got there, maybe hours into the run.
    if (stat(path.c_str(), &st) == 0 && st.st_size % 512 != 0)
      user_error("shard '", path, "' is ", int64_t(st.st_size),
                 " bytes, not a whole number of 512-byte tar blocks: it is truncated; copy or prepare it again.");
  }
}

// ---------------------------------------------------------------------------------------------- position

namespace {
constexpr int64_t kPositionVersion = 1, kPositionFixed = 8;  // version, shards, epoch, order, offset, read, rng, n
}

std::vector<int64_t> WdsPosition::to_ints() const {
  std::vector<int64_t> v = {kPositionVersion, shards, epoch, order, offset, read, int64_t(rng), int64_t(buffer.size())};
  for (const Ref& r : buffer) {
    v.push_back(r.shard);
    v.push_back(r.offset);
  }
  return v;
}

WdsPosition WdsPosition::from_ints(const std::vector<int64_t>& v) {
  if (v.size() < size_t(kPositionFixed) || v[0] != kPositionVersion || v[7] < 0 ||
      uint64_t(v[7]) != (v.size() - size_t(kPositionFixed)) / 2 || v.size() % 2 != 0)
    user_error("the data position in the checkpoint is malformed (", v.size(),
               " values); the checkpoint is corrupt or from another program.");
  WdsPosition p;
  p.shards = v[1];
  p.epoch = v[2];
  p.order = v[3];
  p.offset = v[4];
  p.read = v[5];
  p.rng = uint64_t(v[6]);
  for (size_t i = size_t(kPositionFixed); i < v.size(); i += 2) p.buffer.push_back({v[i], v[i + 1]});
  return p;
}

bool WdsPosition::operator==(const WdsPosition& o) const { return to_ints() == o.to_ints(); }

// ---------------------------------------------------------------------------------------------- stream

WdsStream::WdsStream(const std::vector<std::string>& all_shards, const WdsStreamOptions& options)
    : files_(rank_shards(all_shards, options.rank, options.world)), o_(options) {
  if (o_.num_classes < 1) user_error("the number of classes must be at least 1 (got ", o_.num_classes, ").");
  if (o_.shuffle_buffer < 0 || o_.shuffle_buffer > (int64_t(1) << 24))
    user_error("the shuffle buffer must hold 0 to ", int64_t(1) << 24, " samples (got ", o_.shuffle_buffer, ").");
  start_epoch(0);
}

WdsStream::~WdsStream() = default;

void WdsStream::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  order_.resize(files_.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (o_.shuffle_shards) {  // Fisher-Yates
    uint64_t s = stream_seed(o_.seed, epoch, o_.rank, 1);
    for (size_t i = order_.size() - 1; i > 0; i--) std::swap(order_[i], order_[random_below(s, i + 1)]);
  }
  rng_ = stream_seed(o_.seed, epoch, o_.rank, 2);
  order_index_ = 0;
  start_offset_ = 0;
  read_ = 0;
  reader_.reset();
  buffer_.clear();
}

bool WdsStream::read_sample(Slot& slot) {
  while (order_index_ < int64_t(order_.size())) {
    const int64_t shard = order_[size_t(order_index_)];
    if (!reader_) reader_ = std::make_unique<WdsSampleReader>(files_[size_t(shard)], o_.num_classes, start_offset_);
    if (reader_->next(slot.sample)) {
      slot.shard = shard;
      read_++;
      return true;
    }
    reader_.reset();
    order_index_++;
    start_offset_ = 0;
  }
  return false;
}

bool WdsStream::next(WdsSample& s) {
  if (finished_) return false;
  const size_t capacity = size_t(std::max<int64_t>(o_.shuffle_buffer, 1));
  for (;;) {
    while (buffer_.size() < capacity) {
      Slot slot;
      if (!read_sample(slot)) break;
      buffer_.push_back(std::move(slot));
    }
    if (!buffer_.empty()) break;
    if (read_ == 0)
      user_error("the ", files_.size(), " shard(s) of this process (the first is '", files_[0],
                 "') hold no samples; check the shard pattern.");
    if (o_.single_pass) {
      finished_ = true;
      return false;
    }
    start_epoch(epoch_ + 1);
  }
  const size_t j = buffer_.size() == 1 ? 0 : size_t(random_below(rng_, buffer_.size()));
  s = std::move(buffer_[j].sample);
  if (j + 1 != buffer_.size()) buffer_[j] = std::move(buffer_.back());
  buffer_.pop_back();
  return true;
}

WdsPosition WdsStream::position() const {
  WdsPosition p;
  p.shards = int64_t(files_.size());
  p.epoch = epoch_;
  p.order = order_index_;
  p.offset = reader_ ? reader_->offset() : start_offset_;
  p.read = read_;
  p.rng = rng_;
  for (const Slot& slot : buffer_) p.buffer.push_back({slot.shard, slot.sample.offset});
  return p;
}

void WdsStream::seek(const WdsPosition& p) {
  if (p.shards != int64_t(files_.size()))
    user_error("the data position was recorded for ", p.shards, " shard(s) per process, but this process has ",
               files_.size(), "; resume with the same shards and number of processes.");
  const int64_t capacity = std::max<int64_t>(o_.shuffle_buffer, 1);
  if (p.epoch < 0 || p.epoch > (int64_t(1) << 62) || p.order < 0 || p.order > p.shards || p.read < 0 ||
      int64_t(p.buffer.size()) > capacity)
    user_error("the data position in the checkpoint is impossible for this stream (epoch ", p.epoch, ", shard ",
               p.order, " of ", p.shards, ", ", p.buffer.size(), " buffered samples for a buffer of ", capacity,
               "); the checkpoint is corrupt or was written with another shuffle buffer.");
  for (const auto& r : p.buffer)
    if (r.shard < 0 || r.shard >= p.shards)
      user_error("the data position in the checkpoint names shard ", r.shard, " of ", p.shards,
                 "; the checkpoint is corrupt.");
  start_epoch(p.epoch);
  order_index_ = p.order;
  start_offset_ = p.offset;
  read_ = p.read;
  rng_ = p.rng;
  finished_ = false;
  if (order_index_ < int64_t(order_.size()))  // opened now, so that a bad offset is refused now
    reader_ =
        std::make_unique<WdsSampleReader>(files_[size_t(order_[size_t(order_index_)])], o_.num_classes, start_offset_);
  reload_buffer(p.buffer);
}

// Reads each buffered sample back from its shard, one reader per shard, in file order.
void WdsStream::reload_buffer(const std::vector<WdsPosition::Ref>& refs) {
  std::vector<size_t> idx(refs.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return refs[a].shard != refs[b].shard ? refs[a].shard < refs[b].shard : refs[a].offset < refs[b].offset;
  });
  buffer_.resize(refs.size());
  std::unique_ptr<WdsSampleReader> r;
  int64_t open = -1;
  for (size_t i : idx) {
    const WdsPosition::Ref& ref = refs[i];
    if (ref.shard != open) {  // a small stdio buffer: each sample is one seek and one read
      r = std::make_unique<WdsSampleReader>(files_[size_t(ref.shard)], o_.num_classes, ref.offset, size_t(64) << 10);
      open = ref.shard;
    } else {
      r->seek(ref.offset);
    }
    if (!r->next(buffer_[i].sample))
      user_error("the data position in the checkpoint names a sample at byte ", ref.offset, " of shard '",
                 files_[size_t(ref.shard)],
                 "', but the shard ends there; it changed since the checkpoint was written.");
    buffer_[i].shard = ref.shard;
  }
}
