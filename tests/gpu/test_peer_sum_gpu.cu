// --grad-sum copy's sums (train/peer_sum.h) between real processes, which CUDA IPC needs: 2 and 3
// processes of tests/tools/peer_sum_probe on this machine's GPUs (one GPU serves them all), each comparing
// its gradients after the sums with the host's, bit for bit, eagerly and in a replayed CUDA graph.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/cuda_check.h"
#include "tests/test_util.h"

extern char** environ;

namespace {
class PeerSumGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

std::string probe_path() {  // built beside test_gpu
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string() + "/peer_sum_probe";
}

// Runs `world` probes; their exit statuses (-1: killed after 120 s).
std::vector<int> run_probes(int world) {
  const std::string dir = make_temp_dir(), probe = probe_path();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; r++) {
    std::vector<std::string> args = {probe, std::to_string(r), std::to_string(world), dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, probe.c_str(), nullptr, nullptr, argv.data(), environ), 0) << probe;
    pids.push_back(pid);
  }
  std::vector<int> status(size_t(world), -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int r = 0; r < world; r++) {
    int st = 0;
    while (waitpid(pids[size_t(r)], &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pids[size_t(r)], SIGKILL);
        waitpid(pids[size_t(r)], &st, 0);
        st = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    status[size_t(r)] = st == -1 ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return status;
}
}  // namespace

TEST_F(PeerSumGpu, ProcessesSumEveryRunAsTheHostDoes) {
  ASSERT_TRUE(std::filesystem::exists(probe_path())) << probe_path() << " is missing: `make` builds it";
  for (int world : {2, 3}) {
    const std::vector<int> status = run_probes(world);
    for (int r = 0; r < world; r++) EXPECT_EQ(status[size_t(r)], 0) << "rank " << r << " of " << world;
  }
}
