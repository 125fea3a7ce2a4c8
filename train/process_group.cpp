#include "train/process_group.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/atomic_file.h"
#include "common/error.h"

namespace {
// A variable's value as an integer >= lo, or `fallback` when it is unset.
int env_int(const EnvLookup& getenv, const char* name, int fallback, int lo) {
  const char* v = getenv(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || x < lo || x > (1 << 20))
    user_error("the environment variable ", name, "='", v, "' must be a whole number from ", lo, " to ", 1 << 20,
               "; check how the processes were launched.");
  return int(x);
}
}  // namespace

ProcessGroup process_group_from_env(const EnvLookup& getenv) {
  ProcessGroup g;
  const bool mpi = getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  const char* size = mpi ? "OMPI_COMM_WORLD_SIZE" : "WORLD_SIZE";
  const char* rank = mpi ? "OMPI_COMM_WORLD_RANK" : "RANK";
  const char* local = mpi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "LOCAL_RANK";
  if (!getenv(size)) {
    if (getenv(rank))
      user_error("the environment sets ", rank, " but not ", size, "; set both (and ", local, ") for every process.");
    return g;
  }
  g.launcher = mpi ? "mpirun" : "env";
  g.world = env_int(getenv, size, 1, 1);
  g.rank = env_int(getenv, rank, -1, 0);
  if (g.rank < 0) user_error("the environment sets ", size, " but not ", rank, "; set both for every process.");
  if (g.rank >= g.world) user_error("the environment's ", rank, "=", g.rank, " is not below ", size, "=", g.world, ".");
  g.local_rank = env_int(getenv, local, g.world == 1 ? 0 : -1, 0);
  if (g.local_rank < 0)
    user_error("the environment sets ", size, "=", g.world, " but not ", local,
               ", which picks this process's GPU; set it for every process.");
  return g;
}

ProcessGroup process_group_from_env() {
  return process_group_from_env([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

void publish_unique_id(const std::string& path, const std::vector<char>& id) {
  AtomicFile f(path);
  f.write(id.data(), id.size());
  f.commit();
}

std::vector<char> wait_for_unique_id(const std::string& path, size_t bytes, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::vector<char> id((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (id.size() == bytes) return id;
      user_error("'", path, "' holds ", id.size(), " bytes, not an NCCL id of ", bytes,
                 "; remove it, or choose another id file, and launch again.");
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= timeout_s)
      user_error("rank 0 did not write the NCCL id to '", path, "' within ", timeout_s,
                 " s; check that every process sees the same folder and that rank 0 started.");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}
