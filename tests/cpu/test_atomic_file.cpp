// The atomic writer (common/atomic_file): a symlink planted where the temporary file used to go, or at the
// target, is never followed; writers of one path at the same time (threads and processes) all succeed and
// the path always holds one complete file; the permissions asked for; nothing left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/atomic_file.h"
#include "tests/test_util.h"

namespace {
void publish(const std::string& path, const std::string& text, mode_t mode = 0666) {
  AtomicFile f(path, 0, mode);
  f.write(text.data(), text.size());
  f.commit();
}

// A file that tells whether it is whole: its writer's tag repeated, then the tag's count.
std::string content(int writer, int i) {
  const std::string tag = str_cat("<", writer, ":", i, ">");
  std::string s;
  for (int k = 0; k < 200 + (writer * 37 + i) % 300; k++) s += tag;
  return s + "#" + std::to_string(s.size());
}
bool whole(const std::string& s) {
  const size_t hash = s.rfind('#');
  return hash != std::string::npos && std::to_string(hash) == s.substr(hash + 1);
}
}  // namespace

TEST(AtomicFile, NeverFollowsASymlinkPlantedAtTheOldTemporaryName) {
  const std::string d = make_temp_dir(), path = d + "/ckpt.bin", victim = d + "/victim";
  write_file(victim, "precious");
  ASSERT_EQ(symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  publish(path, "new checkpoint");
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_EQ(read_file(path), "new checkpoint");
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the path became a link";
}

TEST(AtomicFile, ReplacesASymlinkAtTheTargetWithoutWritingThroughIt) {
  const std::string d = make_temp_dir(), path = d + "/ckpt.bin", victim = d + "/victim";
  write_file(victim, "precious");
  ASSERT_EQ(symlink(victim.c_str(), path.c_str()), 0);
  publish(path, "new checkpoint");
  EXPECT_EQ(read_file(victim), "precious");
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(dir_names(d), (std::vector<std::string>{"ckpt.bin", "victim"}));
}

// 400 publishes to one path: 4 processes of 2 threads, 50 each, while a reader checks every version it sees.
TEST(AtomicFile, ConcurrentWritersAllSucceedAndNothingIsTorn) {
  const std::string d = make_temp_dir(), path = d + "/id";
  publish(path, content(99, 0));
  std::vector<pid_t> children;
  for (int p = 0; p < 4; p++) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::atomic<int> failed{0};
      auto writer = [&](int w) {
        for (int i = 0; i < 50; i++) try {
            publish(path, content(w, i));
          } catch (const std::exception&) {
            failed++;
          }
      };
      std::thread a(writer, 2 * p), b(writer, 2 * p + 1);
      a.join();
      b.join();
      std::_Exit(failed.load() == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  int torn = 0, reads = 0;
  for (bool running = true; running; reads++) {
    const std::string s = read_file(path);
    torn += !whole(s);
    running = false;
    for (pid_t c : children) running |= waitpid(c, nullptr, WNOHANG) == 0;
  }
  int failed_children = 0;
  for (pid_t c : children) {
    int status = 0;
    if (waitpid(c, &status, 0) == c) failed_children += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(failed_children, 0) << "a writer's publish failed";
  EXPECT_EQ(torn, 0) << "of " << reads << " reads";
  EXPECT_TRUE(whole(read_file(path)));
  EXPECT_EQ(dir_names(d), std::vector<std::string>{"id"}) << "temporary files left behind";
}

TEST(AtomicFile, CreatesTheModeAskedFor) {
  const std::string d = make_temp_dir(), path = d + "/nccl.id";
  publish(path, "secret", 0600);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(AtomicFile, UncommittedOrFailedWritesLeaveNothing) {
  const std::string d = make_temp_dir(), path = d + "/x.bin";
  {
    AtomicFile f(path);
    f.write("abc", 3);
    EXPECT_EQ(f.temp_path().rfind(path + ".", 0), 0u) << "the temporary is beside its target";
  }
  EXPECT_TRUE(dir_names(d).empty());
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);  // a folder in the way: the rename fails
  AtomicFile f(path);
  f.write("abc", 3);
  expect_user_error([&] { f.commit(); }, "cannot rename");
  expect_user_error([&] { AtomicFile(d + "/no/such/folder/x"); }, "cannot write");
}
