#include "train/process_group.h"

#include <sys/stat.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
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

// What the launcher sets the same for every process of one launch (see ProcessGroup::launch_id).
std::string launch_id_from_env(const EnvLookup& getenv) {
  std::string id;
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"})
    if (const char* v = getenv(name)) {
      id = std::string(name) + "=" + v;
      break;
    }
  if (id.rfind("SLURM_JOB_ID=", 0) == 0 && getenv("SLURM_STEP_ID")) id += std::string(".") + getenv("SLURM_STEP_ID");
  for (char& c : id)
    if (std::isspace((unsigned char)c)) c = '_';
  return id;
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
  g.launch_id = launch_id_from_env(getenv);
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

namespace {
constexpr double kOldFileS = 120.0;  // a file written this long before the wait began is an earlier run's

std::string to_hex(const std::vector<char>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (char c : b) s += {d[(unsigned char)c >> 4], d[(unsigned char)c & 15]};
  return s;
}

// The id file: four lines of text, "nccl-id 1", "world N", "launch ID" ("-": none), "id HEX".
struct Ticket {
  int world = 0;
  std::string launch;
  std::vector<char> id;
};

bool parse_ticket(const std::string& text, Ticket* t) {
  std::istringstream in(text);
  std::string magic, version, w, l, i, hex;
  if (!(in >> magic >> version >> w >> t->world >> l >> t->launch >> i >> hex) || magic != "nccl-id" ||
      version != "1" || w != "world" || l != "launch" || i != "id" || hex.size() % 2 != 0 || t->world < 1)
    return false;
  for (size_t k = 0; k < hex.size(); k += 2) {
    const std::string byte = hex.substr(k, 2);
    if (byte.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
    t->id.push_back(char(std::stoi(byte, nullptr, 16)));
  }
  return true;
}

std::string launch_of(const ProcessGroup& g) { return g.launch_id.empty() ? "-" : g.launch_id; }
}  // namespace

void publish_unique_id(const std::string& path, const std::vector<char>& id, const ProcessGroup& g) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0)
    user_error("'", path, "' exists already: an earlier run's NCCL id file? Remove it, or give each run a fresh ",
               "--nccl-id-file.");
  std::ostringstream text;
  text << "nccl-id 1\nworld " << g.world << "\nlaunch " << launch_of(g) << "\nid " << to_hex(id) << "\n";
  AtomicFile f(path, 0, 0600);  // the id lets a process join the run: its owner's only
  f.write(text.str().data(), text.str().size());
  f.commit();
}

std::vector<char> wait_for_unique_id(const std::string& path, size_t bytes, double timeout_s, const ProcessGroup& g) {
  const auto start = std::chrono::steady_clock::now();
  const std::time_t began = std::time(nullptr);
  std::string passed;  // why the last file seen was not taken
  for (;;) {
    struct stat st;
    std::ifstream f(path, std::ios::binary);
    if (f && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      std::string text(4096, '\0');
      f.read(&text[0], std::streamsize(text.size()));
      text.resize(size_t(f.gcount()));
      Ticket t;
      if (!parse_ticket(text, &t) || t.id.size() != bytes)
        user_error("'", path, "' is not an NCCL id file of this program (or of this version); remove it, or choose ",
                   "another --nccl-id-file, and launch again.");
      if (t.launch != launch_of(g)) {
        passed = "holds the id of another launch (" + t.launch + ", this one is " + launch_of(g) + ")";
      } else if (double(st.st_mtime) < double(began) - kOldFileS) {
        passed = "was written more than " + std::to_string(int(kOldFileS)) + " s before this process looked";
      } else if (t.world != g.world) {
        user_error("rank 0 was launched with ", t.world, " processes and this process with ", g.world,
                   "; launch every process with the same WORLD_SIZE.");
      } else {
        return t.id;
      }
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= timeout_s) {
      if (!passed.empty())
        user_error("'", path, "' ", passed, ", and rank 0 wrote no newer one within ", timeout_s,
                   " s: a file left by an earlier run? Remove it, or give each run a fresh --nccl-id-file.");
      user_error("rank 0 did not write the NCCL id to '", path, "' within ", timeout_s,
                 " s; check that every process sees the same folder and that rank 0 started.");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}
