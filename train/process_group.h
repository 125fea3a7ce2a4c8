// Where this process sits among the data-parallel training processes (issue: multi-GPU), and the file
// through which they share NCCL's unique id, so that no MPI library and no home-made transport is needed:
//  - mpirun (Open MPI) sets OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK;
//  - any other launcher (torchrun, a job script, several nodes) sets RANK / WORLD_SIZE / LOCAL_RANK;
//  - neither: one process.
// Rank 0 writes the id to a file every process can read (a shared folder for several nodes), through a
// temporary name and a rename, so that a reader sees the whole id or none; the others wait for it. Rank 0
// removes it once every process has joined (train/nccl_comm), but a file left by a run that failed
// earlier would be read as this run's: give each run a path of its own (a job id).
#pragma once
#include <functional>
#include <string>
#include <vector>

struct ProcessGroup {
  int rank = 0, world = 1, local_rank = 0;
  std::string launcher = "none";  // "mpirun", "env" or "none"
};

// From the environment (getenv: injectable for tests). UserError on a malformed or inconsistent value.
using EnvLookup = std::function<const char*(const char*)>;
ProcessGroup process_group_from_env(const EnvLookup& getenv);
ProcessGroup process_group_from_env();

// Rank 0: writes `id` to `path` atomically. A file left there by an earlier run is replaced.
void publish_unique_id(const std::string& path, const std::vector<char>& id);
// Other ranks: waits up to timeout_s for `path` to hold `bytes` bytes and returns them; UserError on
// timeout, naming the file and what to check.
std::vector<char> wait_for_unique_id(const std::string& path, size_t bytes, double timeout_s);
