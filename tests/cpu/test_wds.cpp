#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "data/tar_writer.h"
#include "data/wds_samples.h"
#include "data/wds_stream.h"
#include "tests/test_util.h"

namespace {
using Members = std::vector<std::pair<std::string, std::string>>;  // name, data

void write_tar(const std::string& path, const Members& members) {
  TarWriter w(path);
  for (const auto& m : members) w.add(m.first, m.second);
  w.commit();
}

// The image bytes of a sample in the synthetic shards: its key, so a sample can be told by its image.
Members sample(const std::string& key, int label, const std::string& ext = "jpg") {
  return {{key + "." + ext, "img:" + key}, {key + ".cls", std::to_string(label)}, {key + ".json", "{}"}};
}

std::vector<WdsSample> read_samples(const std::string& path, int classes = 10) {
  WdsSampleReader r(path, classes);
  std::vector<WdsSample> out;
  for (WdsSample s; r.next(s);) out.push_back(s);
  return out;
}

// `shards` shards of `per` samples each (keys s<shard>_<i>, labels i % 10) under d; returns their paths.
std::vector<std::string> make_shards(const std::string& d, int shards, int per) {
  std::vector<std::string> paths;
  for (int k = 0; k < shards; k++) {
    Members m;
    for (int i = 0; i < per; i++) {
      const Members s = sample("s" + std::to_string(k) + "_" + std::to_string(i), i % 10);
      m.insert(m.end(), s.begin(), s.end());
    }
    char name[64];
    std::snprintf(name, sizeof name, "/train-%04d.tar", k);
    paths.push_back(d + name);
    write_tar(paths.back(), m);
  }
  return paths;
}

std::vector<std::string> keys(WdsStream& s, int n) {
  std::vector<std::string> out;
  for (WdsSample x; int(out.size()) < n && s.next(x);) {
    EXPECT_EQ(std::string(x.image.begin(), x.image.end()), "img:" + x.key);
    out.push_back(x.key);
  }
  return out;
}

WdsStreamOptions train_options(uint64_t seed, int64_t buffer = 5) {
  WdsStreamOptions o;
  o.num_classes = 10;
  o.shuffle_shards = true;
  o.shuffle_buffer = buffer;
  o.seed = seed;
  return o;
}
}  // namespace

TEST(WdsSamples, KeysAndExtensions) {
  std::string key, ext;
  split_wds_name("a/b/n0142.foo.jpg", &key, &ext);
  EXPECT_EQ(key, "a/b/n0142");
  EXPECT_EQ(ext, "foo.jpg");
  split_wds_name("dir.v2/x.JPEG", &key, &ext);  // dots in folders are not extensions
  EXPECT_EQ(key, "dir.v2/x");
  EXPECT_EQ(ext, "JPEG");
  split_wds_name("noext", &key, &ext);
  EXPECT_EQ(key, "noext");
  EXPECT_EQ(ext, "");
}

TEST(WdsSamples, GroupsConsecutiveMembers) {
  const std::string d = make_temp_dir(), f = d + "/a.tar";
  Members m = sample("train/n01440764_1", 3);
  m.push_back({"train/n01440764_2.JPEG", "img2"});  // upper case, .cls first, whitespace around the label
  m.insert(m.begin() + 3, {"train/n01440764_2.cls", " \t42\r\n"});
  m.push_back({"x.png", "img3"});
  m.push_back({"x.cls", "0"});
  m.push_back({"x.txt", "ignored"});
  m.push_back({"x.foo.jpg", "ignored: the whole extension counts"});
  m.push_back({"x", "no extension: ignored"});
  write_tar(f, m);
  const auto s = read_samples(f, 100);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].key, "train/n01440764_1");
  EXPECT_EQ(s[0].label, 3);
  EXPECT_EQ(s[0].image_ext, "jpg");
  EXPECT_EQ(std::string(s[0].image.begin(), s[0].image.end()), "img:train/n01440764_1");
  EXPECT_EQ(s[0].shard, f);
  EXPECT_EQ(s[1].key, "train/n01440764_2");
  EXPECT_EQ(s[1].label, 42);
  EXPECT_EQ(s[1].image_ext, "jpeg");
  EXPECT_EQ(std::string(s[1].image.begin(), s[1].image.end()), "img2");
  EXPECT_EQ(s[2].key, "x");
  EXPECT_EQ(s[2].image_ext, "png");
  // Each sample's offset reopens the shard at that sample.
  for (const auto& x : s) {
    WdsSampleReader r(f, 100, x.offset);
    WdsSample y;
    ASSERT_TRUE(r.next(y));
    EXPECT_EQ(y.key, x.key);
    EXPECT_EQ(y.image, x.image);
  }
}

TEST(WdsSamples, RepeatedKeyLaterIsANewSample) {
  const std::string d = make_temp_dir(), f = d + "/a.tar";
  Members m = sample("a", 1);
  for (const auto& x : sample("b", 2)) m.push_back(x);
  for (const auto& x : sample("a", 3)) m.push_back(x);
  write_tar(f, m);
  const auto s = read_samples(f);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].key, "a");
  EXPECT_EQ(s[2].key, "a");
  EXPECT_EQ(s[2].label, 3);
}

TEST(WdsSamples, BadSamplesNameTheShardAndKey) {
  const std::string d = make_temp_dir(), f = d + "/bad.tar";
  auto expect = [&](const Members& m, const std::string& needle, int classes = 10) {
    write_tar(f, m);
    expect_user_error([&] { read_samples(f, classes); }, needle);
  };
  const std::string at = "shard '" + f + "': sample ";
  expect({{"k.jpg", "i"}, {"k.json", "{}"}}, at + "'k' has no .cls member");
  expect({{"k.cls", "1"}, {"k.webp", "i"}}, at + "'k' has no image member (.jpg, .jpeg or .png)");
  expect({{"k.jpg", "i"}, {"k.PNG", "j"}, {"k.cls", "1"}}, at + "'k' has two images (.jpg and .png)");
  expect({{"k.jpg", "i"}, {"k.cls", "1"}, {"k.cls", "2"}}, at + "'k' has two .cls members");
  for (const std::string label : {"abc", "-1", "", " ", "1 2", "+3", "0x1", "12345678901"})
    expect({{"k.jpg", "i"}, {"k.cls", label}}, at + "'k' has a .cls member");
  expect({{"k.jpg", "i"}, {"k.cls", "\x01\x02"}}, at + "'k' has a .cls member '?\?' that is not a class index");
  expect({{"k.jpg", "i"}, {"k.cls", "10"}}, at + "'k' has class 10 but the dataset has 10 classes (0 to 9)");
  expect({{"k.jpg", "i"}, {"k.cls", " 1000 "}}, "has class 1000 but the dataset has 1000 classes (0 to 999)", 1000);
  expect({{"d/.jpg", "i"}}, "shard '" + f + "': member 'd/.jpg' (header at byte 0) has no key before its extension");
  expect({{"ok.jpg", "i"}, {"ok.cls", "1"}, {"next.jpg", "i"}}, at + "'next' has no .cls member");
}

TEST(WdsShards, BracePatterns) {
  EXPECT_EQ(expand_braces("d/x-{0000..0003}.tar"),
            (std::vector<std::string>{"d/x-0000.tar", "d/x-0001.tar", "d/x-0002.tar", "d/x-0003.tar"}));
  EXPECT_EQ(expand_braces("{8..11}"), (std::vector<std::string>{"8", "9", "10", "11"}));
  EXPECT_EQ(expand_braces("{train,val}-{0..1}"), (std::vector<std::string>{"train-0", "train-1", "val-0", "val-1"}));
  EXPECT_EQ(expand_braces("{09..10}"), (std::vector<std::string>{"09", "10"}));
  EXPECT_EQ(expand_braces("plain.tar"), std::vector<std::string>{"plain.tar"});
  expect_user_error([] { expand_braces("x-{0..3.tar"); }, "the braces in shard pattern 'x-{0..3.tar' do not pair up");
  expect_user_error([] { expand_braces("x-}{"); }, "do not pair up");
  expect_user_error([] { expand_braces("{{0..1}}"); }, "nested braces are not supported");
  expect_user_error([] { expand_braces("x-{5..2}"); }, "counts down; write {2..5}");
  expect_user_error([] { expand_braces("x-{a..z}"); }, "must be two numbers, such as {0000..1023}");
  expect_user_error([] { expand_braces("x-{0}"); }, "is neither a range such as {0000..1023} nor a list");
  expect_user_error([] { expand_braces("{0..999}{0..999}{0..9}"); }, "names more than 1000000 shards");
}

TEST(WdsShards, MissingShardsAndRankSplit) {
  const std::string d = make_temp_dir();
  const auto paths = make_shards(d, 5, 1);
  EXPECT_EQ(list_shards(d + "/train-{0000..0004}.tar"), paths);
  EXPECT_EQ(list_shards(d + "/train-*.tar"), paths);
  EXPECT_EQ(list_shards(paths[2]), std::vector<std::string>{paths[2]});
  expect_user_error(
      [&] { list_shards(d + "/train-{0000..0005}.tar"); },
      "shard '" + d + "/train-0005.tar' (from the pattern '" + d + "/train-{0000..0005}.tar') does not exist");
  expect_user_error([&] { list_shards(d + "/val-*.tar"); }, "no files match");
  EXPECT_EQ(rank_shards(paths, 0, 2), (std::vector<std::string>{paths[0], paths[2], paths[4]}));
  EXPECT_EQ(rank_shards(paths, 1, 2), (std::vector<std::string>{paths[1], paths[3]}));
  EXPECT_EQ(rank_shards(paths, 4, 5), std::vector<std::string>{paths[4]});
  expect_user_error([&] { rank_shards(paths, 5, 6); },
                    "process 5 of 6 gets no shard: there are only 5 shard(s); use at most 5 processes");
  expect_user_error([&] { rank_shards(paths, 2, 2); }, "is not a valid rank");
}

TEST(WdsStream, InOrderWithoutShuffling) {
  const std::string d = make_temp_dir();
  WdsStreamOptions o;
  o.num_classes = 10;
  WdsStream s(make_shards(d, 3, 2), o);
  EXPECT_EQ(keys(s, 8), (std::vector<std::string>{"s0_0", "s0_1", "s1_0", "s1_1", "s2_0", "s2_1", "s0_0", "s0_1"}));
  EXPECT_EQ(s.epoch(), 1);
}

TEST(WdsStream, SinglePassReadsEverySampleOnce) {
  const std::string d = make_temp_dir();
  const auto paths = make_shards(d, 4, 3);
  WdsStreamOptions o;
  o.num_classes = 10;
  o.single_pass = true;
  WdsStream s(paths, o);
  const auto got = keys(s, 1000);
  ASSERT_EQ(got.size(), 12u);
  EXPECT_EQ(got.front(), "s0_0");
  EXPECT_EQ(got.back(), "s3_2");
  WdsSample x;
  EXPECT_FALSE(s.next(x));
  EXPECT_FALSE(s.next(x));
  // Two processes: disjoint halves that together are every sample.
  o.world = 2;
  o.rank = 1;
  WdsStream r1(paths, o);
  EXPECT_EQ(keys(r1, 1000), (std::vector<std::string>{"s1_0", "s1_1", "s1_2", "s3_0", "s3_1", "s3_2"}));
}

TEST(WdsStream, ShuffleIsDeterministicPerSeedAndNewEachEpoch) {
  const std::string d = make_temp_dir();
  const auto paths = make_shards(d, 4, 7);  // 28 samples an epoch
  auto run = [&](uint64_t seed, int n) {
    WdsStream s(paths, train_options(seed));
    return keys(s, n);
  };
  const auto a = run(1, 84), b = run(1, 84), c = run(2, 84);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<std::vector<std::string>> epochs;
  for (int e = 0; e < 3; e++) epochs.emplace_back(a.begin() + 28 * e, a.begin() + 28 * (e + 1));
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  std::vector<std::string> all;
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 7; i++) all.push_back("s" + std::to_string(k) + "_" + std::to_string(i));
  std::sort(all.begin(), all.end());
  for (auto e : epochs) {  // each epoch serves every sample exactly once
    std::sort(e.begin(), e.end());
    EXPECT_EQ(e, all);
  }
  // The buffer mixes samples within shards, not only the shard order.
  bool mixed = false;
  for (size_t i = 1; i < a.size(); i++) mixed |= a[i].substr(0, 2) == a[i - 1].substr(0, 2) && a[i] < a[i - 1];
  EXPECT_TRUE(mixed);
}

// Resuming from a position recorded at any point (mid-shard, mid-buffer, at epoch ends) continues exactly
// as the uninterrupted stream does, also through the checkpoint's integer form.
TEST(WdsStream, ResumeFromAnyPositionContinuesIdentically) {
  const std::string d = make_temp_dir();
  const auto paths = make_shards(d, 3, 5);  // 15 samples an epoch
  for (int64_t buffer : {0, 4, 40}) {
    WdsStreamOptions o = train_options(9, buffer);
    WdsStream a(paths, o);
    std::vector<WdsPosition> at;
    std::vector<std::string> seq;
    WdsSample x;
    for (int i = 0; i < 50; i++) {
      at.push_back(a.position());
      ASSERT_TRUE(a.next(x));
      seq.push_back(x.key);
    }
    for (int k : {0, 1, 3, 7, 14, 15, 16, 29, 33}) {
      WdsStream b(paths, o);
      b.seek(WdsPosition::from_ints(at[size_t(k)].to_ints()));
      EXPECT_EQ(b.position(), at[size_t(k)]) << "buffer " << buffer << " at " << k;
      EXPECT_EQ(keys(b, 50 - k), std::vector<std::string>(seq.begin() + k, seq.end()))
          << "buffer " << buffer << " at " << k;
    }
    if (buffer == 4) {
      EXPECT_EQ(at[7].buffer.size(), 3u);  // between calls: all but the sample just served
    }
  }
}

TEST(WdsStream, BadPositionsAreRefused) {
  const std::string d = make_temp_dir();
  const auto paths = make_shards(d, 2, 3);
  WdsStream a(paths, train_options(1, 4));
  WdsSample x;
  a.next(x);
  const WdsPosition good = a.position();
  WdsStream b(paths, train_options(1, 4));
  WdsPosition p = good;
  p.shards = 3;
  expect_user_error([&] { b.seek(p); }, "recorded for 3 shard(s) per process, but this process has 2");
  p = good;
  p.epoch = -1;
  expect_user_error([&] { b.seek(p); }, "impossible for this stream (epoch -1");
  p = good;
  p.offset += 100;
  expect_user_error([&] { b.seek(p); }, "no header can start there");
  p = good;
  p.buffer[0].offset = 512;  // inside a member's data: not a header
  expect_user_error([&] { b.seek(p); }, "has a checksum field that is not an octal number");
  p = good;
  p.buffer[0].shard = 7;
  expect_user_error([&] { b.seek(p); }, "names shard 7 of 2");
  WdsStream small(paths, train_options(1, 2));
  expect_user_error([&] { small.seek(good); }, "3 buffered samples for a buffer of 2");
  std::vector<int64_t> v = good.to_ints();
  v.pop_back();
  expect_user_error([&] { WdsPosition::from_ints(v); }, "the data position in the checkpoint is malformed");
  expect_user_error([&] { WdsPosition::from_ints({}); }, "is malformed");
}

TEST(WdsStream, ShardsWithoutSamplesAreAClearError) {
  const std::string d = make_temp_dir();
  write_tar(d + "/empty-0.tar", {});
  write_tar(d + "/empty-1.tar", {});
  WdsStreamOptions o;
  o.num_classes = 10;
  WdsStream s(list_shards(d + "/empty-{0..1}.tar"), o);
  WdsSample x;
  expect_user_error([&] { s.next(x); },
                    "the 2 shard(s) of this process (the first is '" + d + "/empty-0.tar') hold no samples");
}

// train_vit's check before any GPU work: the first sample of every shard and its size, each flaw refused
// with a sentence that names the shard.
TEST(WdsShards, CheckShardStartsFindsBadShardsAtOnce) {
  const std::string d = make_temp_dir();
  const std::vector<std::string> good = make_shards(d, 2, 3);
  check_shard_starts(good, 10);
  const std::string whole = read_file(good[0]);
  auto expect = [&](const std::string& name, const std::string& bytes, const std::string& needle, int classes = 10) {
    write_file(d + "/" + name, bytes);
    std::vector<std::string> shards = good;
    shards.push_back(d + "/" + name);
    expect_user_error([&] { check_shard_starts(shards, classes); }, needle);
  };
  expect("empty.tar", "", "shard '" + d + "/empty.tar' holds no samples");
  write_tar(d + "/no_members.tar", {});
  expect("no_members.tar", read_file(d + "/no_members.tar"), "holds no samples");
  expect("garbage.tar", std::string(2048, 'x'), "tar archive '" + d + "/garbage.tar'");
  expect("cut_in_first.tar", whole.substr(0, 700), "cut_in_first.tar");
  expect("cut_later.tar", whole.substr(0, whole.size() - 1000),
         "is " + std::to_string(whole.size() - 1000) + " bytes, not a whole number of 512-byte tar blocks");
  write_tar(d + "/big_label.tar", sample("k", 5000));
  expect("big_label.tar", read_file(d + "/big_label.tar"), "sample 'k' has class 5000 but the dataset has 10 classes");
  write_tar(d + "/negative.tar", {{"k.jpg", "img"}, {"k.cls", "-1"}});
  expect("negative.tar", read_file(d + "/negative.tar"), "has a .cls member '-1' that is not a class index");
}
