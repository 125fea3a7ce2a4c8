// Where this process sits among the data-parallel training processes (issue: multi-GPU), and the file
// through which they share NCCL's unique id, so that no MPI library and no home-made transport is needed:
//  - mpirun (Open MPI) sets OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK;
//  - any other launcher (torchrun, a job script, several nodes) sets RANK / WORLD_SIZE / LOCAL_RANK;
//  - neither: one process.
// Rank 0 writes the id to a file every process can read (a shared folder for several nodes), through a
// temporary name and a rename, so that a reader sees the whole id or none, readable by its owner only;
// the others wait for it. Rank 0 removes it once every process has joined (train/nccl_comm). A file left
// by a run that failed earlier must not be taken for this run's: rank 0 refuses to start over one, and
// the file names the launch it belongs to (the launcher's job id where it sets one) and its world size,
// so that a reader waits past another launch's or an old file and refuses a world size other than its own.
#pragma once
#include <functional>
#include <string>
#include <vector>

struct ProcessGroup {
  int rank = 0, world = 1, local_rank = 0;
  std::string launcher = "none";  // "mpirun", "env" or "none"
  // The same for every process of one launch, different for the next: Open MPI's PMIx namespace or job
  // id, torchrun's run id or Slurm's job and step; empty where the launcher sets none of them.
  std::string launch_id;
};

// From the environment (getenv: injectable for tests). UserError on a malformed or inconsistent value.
using EnvLookup = std::function<const char*(const char*)>;
ProcessGroup process_group_from_env(const EnvLookup& getenv);
ProcessGroup process_group_from_env();

// Rank 0: writes `id` with g's world size and launch to `path` atomically, mode 0600. UserError when
// something is at `path` already (an earlier run's file?).
void publish_unique_id(const std::string& path, const std::vector<char>& id, const ProcessGroup& g);
// Other ranks: waits up to timeout_s for `path` to hold an id of `bytes` bytes from g's launch, written
// less than two minutes before the wait began, and returns it; waits past any other file. UserError at
// once when the file's world size is not g's, and on timeout (naming the file that was there, if any).
std::vector<char> wait_for_unique_id(const std::string& path, size_t bytes, double timeout_s, const ProcessGroup& g);
