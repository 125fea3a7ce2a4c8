// tokenize's dataset writer (data/shard_writer): a dataset is replaced all or nothing. The new set appears
// only at commit, whole; an error before it, a rename refused half way through it, or a process killed at any
// point of it leaves one complete set (the old one, or after the commit point the new one), nothing else.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "data/shard_writer.h"
#include "data/token_shards.h"
#include "tests/test_util.h"

namespace {
constexpr int kVocab = 50257;

// An old dataset "x" of three shards whose tokens are 1000 + shard, and a file of the user's.
void write_old_set(const std::string& d) {
  write_token_shard(d + "/x_val_000000.bin", std::vector<uint16_t>(5, 1000));
  write_token_shard(d + "/x_train_000001.bin", std::vector<uint16_t>(10, 1001));
  write_token_shard(d + "/x_train_000002.bin", std::vector<uint16_t>(10, 1002));
  write_file(d + "/notes.txt", "keep me");
}
const std::vector<std::string> kOld = {"x_train_000001.bin", "x_train_000002.bin", "x_val_000000.bin"};
const std::vector<std::string> kNew = {"x_train_000001.bin", "x_train_000002.bin", "x_train_000003.bin",
                                       "x_train_000004.bin", "x_val_000000.bin"};

// Four new shards' worth (val 5, train 10 each, the last 2): tokens 7.
void add_new_set(ShardWriter& w) { w.add(std::vector<int>(37, 7)); }

bool is_old_set(const std::string& d) {
  if (dataset_files(d, "x") != kOld) return false;
  return read_token_shard(d + "/x_val_000000.bin", kVocab) == std::vector<uint16_t>(5, 1000) &&
         read_token_shard(d + "/x_train_000002.bin", kVocab) == std::vector<uint16_t>(10, 1002);
}
bool is_new_set(const std::string& d) {
  if (dataset_files(d, "x") != kNew) return false;
  return read_token_shard(d + "/x_val_000000.bin", kVocab) == std::vector<uint16_t>(5, 7) &&
         read_token_shard(d + "/x_train_000004.bin", kVocab) == std::vector<uint16_t>(2, 7);
}
std::vector<std::string> with_notes(std::vector<std::string> v) {
  v.push_back("notes.txt");
  std::sort(v.begin(), v.end());
  return v;
}
}  // namespace

TEST(ShardWriter, CommitReplacesTheWholeSet) {
  const std::string d = make_temp_dir();
  write_old_set(d);
  write_token_shard(d + "/x_train_000009.bin", std::vector<uint16_t>(3, 1009));  // an old shard the new set lacks
  {
    ShardWriter w(d, "x", 10, 5);
    add_new_set(w);
    EXPECT_EQ(dataset_files(d, "x").size(), 4u) << "the new shards stay out of sight until the commit";
    w.commit();
    EXPECT_EQ(w.shards(), 5);
    EXPECT_EQ(w.tokens(), 37);
  }
  EXPECT_TRUE(is_new_set(d));
  EXPECT_EQ(dir_names(d), with_notes(kNew)) << "no staging folder, no old shard left";
  EXPECT_EQ(read_file(d + "/notes.txt"), "keep me");
}

TEST(ShardWriter, AnErrorBeforeTheCommitLeavesTheOldSet) {
  const std::string d = make_temp_dir();
  write_old_set(d);
  try {
    ShardWriter w(d, "x", 10, 5);
    add_new_set(w);
    user_error("bad input at line 3001.");  // what tokenize does on an error: the writer is never committed
  } catch (const UserError&) {
  }
  EXPECT_TRUE(is_old_set(d));
  EXPECT_EQ(dir_names(d), with_notes(kOld));
}

// The reproducer: a folder under a shard's name made the rename of that shard fail after the
// shards before it had replaced theirs, and the error path then deleted those: neither old nor new remained.
TEST(ShardWriter, AFolderUnderAShardsNameIsRefusedBeforeAnythingChanges) {
  const std::string d = make_temp_dir();
  write_token_shard(d + "/t_val_000000.bin", std::vector<uint16_t>(3, 1000));
  ASSERT_EQ(mkdir((d + "/t_train_000001.bin").c_str(), 0755), 0);
  try {
    ShardWriter w(d, "t", 10, 5);
    w.add(std::vector<int>(27, 7));
    w.commit();
    ADD_FAILURE() << "the commit went through a folder in the way";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("t_train_000001.bin' has a shard's name but is not a regular file"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_token_shard(d + "/t_val_000000.bin", kVocab), std::vector<uint16_t>(3, 1000));
  EXPECT_EQ(dir_names(d), (std::vector<std::string>{"t_train_000001.bin", "t_val_000000.bin"}));
}

// A rename refused in the middle of the commit (here: a staged shard gone) moves everything back.
TEST(ShardWriter, ARenameRefusedMidCommitRestoresTheOldSet) {
  const std::string d = make_temp_dir();
  write_old_set(d);
  {
    ShardWriter w(d, "x", 10, 5);
    add_new_set(w);
    ASSERT_EQ(std::remove((w.staging() + "/new/x_train_000003.bin").c_str()), 0);
    expect_user_error([&] { w.commit(); },
                      "x_train_000003.bin': No such file or directory; the previous dataset was restored.");
  }
  EXPECT_TRUE(is_old_set(d));
  EXPECT_EQ(dir_names(d), with_notes(kOld));
}

// A process killed before the commit, or after any of its renames: the next writer (or recover_dataset)
// leaves exactly one complete set, the old one before the commit point, the new one after it; no old shard
// is lost in between.
TEST(ShardWriter, AKilledRunIsUndoneOrFinishedByTheNext) {
  const int steps = int(kOld.size() + kNew.size()) + 1;  // the moves of both sets, then the commit point
  for (int kill_at = -1; kill_at < steps; kill_at++) {
    const std::string d = make_temp_dir();
    write_old_set(d);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        ShardWriter w(d, "x", 10, 5);
        add_new_set(w);
        if (kill_at < 0) _exit(0);  // killed while writing
        w.commit([&](int step) {
          if (step == kill_at) _exit(0);
        });
      } catch (...) {
        _exit(2);
      }
      _exit(3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "kill at " << kill_at;
    const std::string stage = d + "/.x.tokenize";
    for (const std::string& f : kOld)  // every old shard is in the folder or the staging folder's old/
      EXPECT_TRUE(std::ifstream(d + "/" + f).good() || std::ifstream(stage + "/old/" + f).good())
          << f << ", kill at " << kill_at;
    testing::internal::CaptureStderr();
    EXPECT_TRUE(recover_dataset(d, "x")) << "kill at " << kill_at;
    const std::string said = testing::internal::GetCapturedStderr();
    const bool committed = kill_at == steps - 1;
    EXPECT_NE(said.find(kill_at < 0 ? ""
                        : committed ? "finished the commit"
                                    : "restored dataset 'x'"),
              std::string::npos)
        << said;
    EXPECT_TRUE(committed ? is_new_set(d) : is_old_set(d)) << "kill at " << kill_at;
    EXPECT_EQ(dir_names(d), with_notes(committed ? kNew : kOld)) << "kill at " << kill_at;
    EXPECT_FALSE(recover_dataset(d, "x"));
  }
}

TEST(ShardWriter, ARunningWriterIsNotUndone) {
  const std::string d = make_temp_dir();
  write_old_set(d);
  ASSERT_EQ(mkdir((d + "/.x.tokenize").c_str(), 0700), 0);
  write_file(d + "/.x.tokenize/pid", std::to_string(getppid()));  // a live process, not this one
  expect_user_error([&] { ShardWriter w(d, "x", 10, 5); }, "another run (process " + std::to_string(getppid()));
  EXPECT_TRUE(is_old_set(d));
}

TEST(ShardWriter, RefusesBadNamesAndEmptyCommits) {
  const std::string d = make_temp_dir();
  for (const std::string name : {"", "a/b", ".hidden"})
    expect_user_error([&] { ShardWriter w(d, name, 10, 5); }, "a dataset name must be non-empty");
  ShardWriter w(d, "x", 10, 5);
  expect_user_error([&] { w.commit(); }, "there are no tokens to write");
}
