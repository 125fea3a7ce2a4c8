// The process group read from the launcher's environment, and the NCCL id shared through a file.
#include <map>
#include <thread>

#include "tests/test_util.h"
#include "train/process_group.h"

namespace {
ProcessGroup from(const std::map<std::string, std::string>& env) {
  return process_group_from_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

void expect_refused(const std::map<std::string, std::string>& env, const std::string& words) {
  try {
    from(env);
    ADD_FAILURE() << "accepted; expected: " << words;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(ProcessGroup, ReadsMpirunEnvOrNothing) {
  ProcessGroup g = from({});
  EXPECT_EQ(g.world, 1);
  EXPECT_EQ(g.rank, 0);
  EXPECT_EQ(g.launcher, "none");
  g = from({{"OMPI_COMM_WORLD_SIZE", "4"},
            {"OMPI_COMM_WORLD_RANK", "3"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
            {"WORLD_SIZE", "9"}});  // mpirun's variables win
  EXPECT_EQ(g.world, 4);
  EXPECT_EQ(g.rank, 3);
  EXPECT_EQ(g.local_rank, 1);
  EXPECT_EQ(g.launcher, "mpirun");
  g = from({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_RANK", "0"}});
  EXPECT_EQ(g.world, 2);
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.local_rank, 0);
  EXPECT_EQ(g.launcher, "env");
  g = from({{"WORLD_SIZE", "1"}, {"RANK", "0"}});  // one process needs no local rank
  EXPECT_EQ(g.world, 1);
}

TEST(ProcessGroup, RefusesInconsistentEnvironments) {
  expect_refused({{"RANK", "1"}}, "sets RANK but not WORLD_SIZE");
  expect_refused({{"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}, "sets WORLD_SIZE but not RANK");
  expect_refused({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"LOCAL_RANK", "0"}}, "RANK=2 is not below WORLD_SIZE=2");
  expect_refused({{"WORLD_SIZE", "2"}, {"RANK", "1"}}, "but not LOCAL_RANK");
  expect_refused({{"WORLD_SIZE", "two"}, {"RANK", "0"}}, "WORLD_SIZE='two' must be a whole number from 1 to 1048576");
  expect_refused({{"WORLD_SIZE", "0"}, {"RANK", "0"}}, "must be a whole number from 1 to 1048576");
  // The message names the upper limit too: 2000000 is >= 1, and refused.
  expect_refused({{"WORLD_SIZE", "2000000"}, {"RANK", "0"}},
                 "WORLD_SIZE='2000000' must be a whole number from 1 to 1048576");
  expect_refused({{"WORLD_SIZE", "2"}, {"RANK", "-1"}, {"LOCAL_RANK", "0"}},
                 "RANK='-1' must be a whole number from 0 to");
  expect_refused({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}}, "but not OMPI_COMM_WORLD_LOCAL_RANK");
}

TEST(ProcessGroup, UniqueIdTravelsThroughAFile) {
  const std::string dir = make_temp_dir(), path = dir + "/nccl_id";
  std::vector<char> id(128);
  for (size_t i = 0; i < id.size(); i++) id[i] = char(i * 7 + 1);
  std::thread writer([&] {  // rank 0 comes late: the reader waits for it
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    publish_unique_id(path, id);
  });
  EXPECT_EQ(wait_for_unique_id(path, id.size(), 10.0), id);
  writer.join();
  std::vector<char> other(id.rbegin(), id.rend());
  publish_unique_id(path, other);  // an old file is replaced whole
  EXPECT_EQ(wait_for_unique_id(path, id.size(), 1.0), other);
  try {
    wait_for_unique_id(dir + "/never", 128, 0.2);
    ADD_FAILURE() << "no timeout";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("did not write the NCCL id"), std::string::npos) << e.what();
  }
  write_file(dir + "/short", "abc");
  try {
    wait_for_unique_id(dir + "/short", 128, 1.0);
    ADD_FAILURE() << "a 3-byte id was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 3 bytes, not an NCCL id of 128"), std::string::npos) << e.what();
  }
}
