// The process group read from the launcher's environment, and the NCCL id shared through a file.
#include <sys/stat.h>
#include <sys/time.h>

#include <chrono>
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
  const ProcessGroup g = from({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}});
  std::vector<char> id(128);
  for (size_t i = 0; i < id.size(); i++) id[i] = char(i * 7 + 1);
  std::thread writer([&] {  // rank 0 comes late: the reader waits for it
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    publish_unique_id(path, id, g);
  });
  EXPECT_EQ(wait_for_unique_id(path, id.size(), 10.0, g), id);
  writer.join();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the id lets a process join the run: its owner's only";
  expect_user_error([&] { publish_unique_id(path, id, g); }, "exists already: an earlier run's NCCL id file?");
  expect_user_error([&] { wait_for_unique_id(dir + "/never", 128, 0.2, g); }, "did not write the NCCL id");
  write_file(dir + "/short", std::string(128, 'x'));  // the raw id of an older version
  expect_user_error([&] { wait_for_unique_id(dir + "/short", 128, 1.0, g); }, "is not an NCCL id file");
}

// A file left by an earlier run is never taken for this run's: one of another launch or written long
// before this process looked is waited past (and named when no newer one comes), one of another world
// size refused at once.
TEST(ProcessGroup, StaleOrForeignIdFilesAreNotTaken) {
  const std::string dir = make_temp_dir();
  const std::vector<char> id(128, 'a');
  const ProcessGroup mpi2 = from({{"OMPI_COMM_WORLD_SIZE", "2"},
                                  {"OMPI_COMM_WORLD_RANK", "0"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                  {"PMIX_NAMESPACE", "prterun-a-1@1"}});
  const ProcessGroup next = from({{"OMPI_COMM_WORLD_SIZE", "2"},
                                  {"OMPI_COMM_WORLD_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                  {"PMIX_NAMESPACE", "prterun-a-2@1"}});
  EXPECT_EQ(mpi2.launch_id, "PMIX_NAMESPACE=prterun-a-1@1");
  publish_unique_id(dir + "/other_launch", id, mpi2);
  expect_user_error([&] { wait_for_unique_id(dir + "/other_launch", 128, 0.3, next); },
                    "holds the id of another launch (PMIX_NAMESPACE=prterun-a-1@1, this one is "
                    "PMIX_NAMESPACE=prterun-a-2@1), and rank 0 wrote no newer one");

  const ProcessGroup env2 = from({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}});
  EXPECT_EQ(env2.launch_id, "");
  const std::string old = dir + "/old";
  publish_unique_id(old, id, env2);
  const struct timeval ten_minutes_ago[2] = {{time(nullptr) - 600, 0}, {time(nullptr) - 600, 0}};
  ASSERT_EQ(utimes(old.c_str(), ten_minutes_ago), 0);
  expect_user_error([&] { wait_for_unique_id(old, 128, 0.3, env2); }, "was written more than 120 s before");

  const ProcessGroup env4 = from({{"WORLD_SIZE", "4"}, {"RANK", "3"}, {"LOCAL_RANK", "3"}});
  publish_unique_id(dir + "/two", id, env2);
  const auto t0 = std::chrono::steady_clock::now();
  expect_user_error([&] { wait_for_unique_id(dir + "/two", 128, 30.0, env4); },
                    "rank 0 was launched with 2 processes and this process with 4");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0) << "waited on";

  EXPECT_EQ(
      from({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}})
          .launch_id,
      "SLURM_JOB_ID=77.3");
}
