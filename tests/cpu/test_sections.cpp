#include <cstdio>
#include <filesystem>

#include "common/crc32.h"
#include "common/sections.h"
#include "tests/test_util.h"

TEST(Crc32, KnownValues) {
  EXPECT_EQ(crc32_update(0, "123456789", 9), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(crc32_update(0, "", 0), 0u);
  std::string s = "The quick brown fox jumps over the lazy dog";
  uint32_t whole = crc32_update(0, s.data(), s.size());
  uint32_t parts = crc32_update(crc32_update(0, s.data(), 10), s.data() + 10, s.size() - 10);
  EXPECT_EQ(whole, parts);
  EXPECT_EQ(whole, 0x414FA339u);
}

class SectionsTest : public ::testing::Test {
 protected:
  std::string dir = make_temp_dir();
  std::string path = dir + "/state.bin";
  void write_sample() {
    SectionWriter w(path);
    w.put_string("name", "adamw");
    w.put_i64("step", 42);
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); i++) v[i] = float(i) * 0.5f;
    w.begin("big", v.size() * sizeof(float));
    w.write(v.data(), 400 * sizeof(float));  // written in two pieces
    w.write(v.data() + 400, 600 * sizeof(float));
    w.end();
    w.commit();
  }
};

TEST_F(SectionsTest, RoundTrip) {
  write_sample();
  SectionReader r(path);
  EXPECT_EQ(r.get_string("name"), "adamw");
  EXPECT_EQ(r.get_i64("step"), 42);
  auto v = r.get_vector<float>("big");
  ASSERT_EQ(v.size(), 1000u);
  EXPECT_EQ(v[999], 499.5f);
  EXPECT_FALSE(r.has("missing"));
  expect_user_error([&] { r.get_i64("missing"); }, "missing");
  expect_user_error(
      [&] {
        int64_t x;
        r.read("name", &x, 8);
      },
      "bytes but 8 were expected");
}

TEST_F(SectionsTest, TruncatedFileIsRefused) {
  write_sample();
  std::string data = read_file(path);
  for (size_t cut : {size_t(3), size_t(20), data.size() / 2, data.size() - 1}) {
    write_file(path, data.substr(0, cut));
    expect_user_error([&] { SectionReader r(path); }, "truncated");
  }
}

TEST_F(SectionsTest, FlippedByteFailsChecksum) {
  write_sample();
  std::string data = read_file(path);
  data[data.size() / 2] ^= 0x10;  // inside the "big" section's data
  write_file(path, data);
  expect_user_error([&] { SectionReader r(path); }, "checksum");
}

TEST_F(SectionsTest, BadMagicAndMissingFile) {
  write_file(path, "this is not a checkpoint at all, just text");
  expect_user_error([&] { SectionReader r(path); }, "bad magic");
  expect_user_error([&] { SectionReader r(dir + "/nope.bin"); }, "cannot open");
}

TEST_F(SectionsTest, UncommittedWriteLeavesOldFileIntact) {
  write_sample();
  std::string before = read_file(path);
  {
    SectionWriter w(path);  // e.g. a crash before commit
    w.put_i64("step", 7);
  }
  EXPECT_EQ(read_file(path), before);
  EXPECT_EQ(dir_names(dir), std::vector<std::string>{"state.bin"}) << "temporary file left behind";
  SectionReader r(path);
  EXPECT_EQ(r.get_i64("step"), 42);
}

TEST_F(SectionsTest, UnwritableFolderIsAClearError) {
  expect_user_error([&] { SectionWriter w(dir + "/no/such/dir/x.bin"); }, "cannot write");
}

// Security review (issue 12): every refused open used to leak its FILE* (the constructor threw after
// fopen, so the destructor never ran): 2,000 refused files, 2,000 open descriptors.
TEST_F(SectionsTest, RefusedFilesLeakNoDescriptors) {
  auto open_fds = [] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) (void)e, n++;
    return n;
  };
  write_sample();
  const std::string good = read_file(path);
  write_file(dir + "/magic.bin", "this is not a checkpoint at all, just text");
  write_file(dir + "/cut.bin", good.substr(0, good.size() / 2));
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  write_file(dir + "/crc.bin", flipped);
  const int before = open_fds();
  for (int k = 0; k < 200; k++)
    for (const char* f : {"/magic.bin", "/cut.bin", "/crc.bin"})
      expect_user_error([&] { SectionReader r(dir + f); }, dir + f);
  EXPECT_EQ(open_fds(), before);
}

// Test folders (make_temp_dir) and the programs' scratch folders are TempDirs: removed with their contents.
TEST(TempDirTest, RemovedWithContentsAtScopeExit) {
  std::string path;
  {
    TempDir t("temp_dir_test_", testing::TempDir());
    path = t.path();
    EXPECT_EQ(path.rfind(testing::TempDir() + "temp_dir_test_", 0), 0u) << path;
    std::filesystem::create_directories(path + "/sub/deeper");
    write_file(path + "/sub/deeper/x.bin", std::string(1000, 'x'));
    ASSERT_EQ(read_file(path + "/sub/deeper/x.bin").size(), 1000u);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  expect_user_error([] { TempDir t("x_", testing::TempDir() + "no/such/folder"); }, "cannot create a temporary folder");
}
