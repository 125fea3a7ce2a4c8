// Fuzz target: tar archives and WebDataset samples (data/tar_reader.cpp, data/wds_samples.cpp,
// data/wds_stream.cpp). The first 4 bytes choose the class count, the shuffle buffer, where to record a
// resume position and the seed; the rest is a shard. It is read member by member from memory (sizes,
// names and offsets must be sane), grouped into samples (labels below the class count, each sample found
// again at its offset), and as a file by a shuffled stream whose continuation from a recorded position
// must equal the uninterrupted one. Seeds: settings + archives written by TarWriter (make_seeds.cpp).
#include <memory>

#include "data/wds_stream.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr size_t kSettings = 4;

void read_members(const uint8_t* data, size_t size) {
  TarReader r(data, size, "fuzz.tar");
  TarMember m;
  std::vector<uint8_t> d;
  int64_t last = -1;
  while (r.next(m, d)) {
    FUZZ_EXPECT(m.offset > last && m.offset % 512 == 0 && m.offset < r.offset());
    FUZZ_EXPECT(m.size >= 0 && m.size <= TarReader::kMaxMemberBytes && d.size() == size_t(m.size));
    FUZZ_EXPECT(m.name.size() <= TarReader::kMaxNameBytes);
    last = m.offset;
  }
  FUZZ_EXPECT(r.offset() <= int64_t(size));
}

void read_samples(const uint8_t* data, size_t size, int classes) {
  WdsSampleReader r(std::make_unique<TarReader>(data, size, "fuzz.tar"), classes);
  WdsSample s;
  for (int n = 0; n < 64 && r.next(s); n++) {
    FUZZ_EXPECT(s.label >= 0 && s.label < classes && !s.key.empty());
    FUZZ_EXPECT(s.image_ext == "jpg" || s.image_ext == "jpeg" || s.image_ext == "png");
    WdsSampleReader again(std::make_unique<TarReader>(data, size, "fuzz.tar", s.offset), classes);
    WdsSample t;
    FUZZ_EXPECT(again.next(t) && t.key == s.key && t.label == s.label && t.image == s.image);
  }
}

std::vector<std::string> keys(WdsStream& s, int n) {
  std::vector<std::string> out;
  WdsSample x;
  while (int(out.size()) < n && s.next(x)) out.push_back(x.key);
  return out;
}

// Two passes of a shuffled stream over the shard, twice; the second resumes at sample `at` of the first.
void stream_resume(const std::string& path, int classes, int64_t buffer, int at, uint64_t seed) {
  WdsStreamOptions o;
  o.num_classes = classes;
  o.shuffle_shards = true;
  o.shuffle_buffer = buffer;
  o.seed = seed;
  WdsStream a({path, path}, o);
  keys(a, at);
  const WdsPosition p = a.position();
  const std::vector<std::string> after = keys(a, 40);
  try {  // what the first stream read, the resumed one reads too: a refusal here is a finding
    WdsStream b({path, path}, o);
    b.seek(WdsPosition::from_ints(p.to_ints()));
    FUZZ_EXPECT(keys(b, 40) == after);
  } catch (const UserError& e) {
    std::fprintf(stderr, "the resumed stream refused what the first one read: %s\n", e.what());
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kSettings) return 0;
  static const int class_counts[4] = {10, 1, 1000, 3};
  const int classes = class_counts[data[0] % 4];
  const int64_t buffer = data[1] % 8;
  const int at = data[2] % 32;
  const uint8_t* shard = data + kSettings;
  const size_t n = size - kSettings;
  try {
    read_members(shard, n);
  } catch (const UserError&) {
  }
  try {
    read_samples(shard, n, classes);
  } catch (const UserError&) {
  }
  try {
    stream_resume(fuzz_file("fuzz.tar", shard, n), classes, buffer, at, data[3]);
  } catch (const UserError&) {
  }
  return 0;
}
