// The checks and reads of a checkpoint that come before any GPU work (host code, so the CPU suite tests them).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "train/checkpoint.h"

std::unique_ptr<SectionReader> open_checkpoint(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    // A folder of checkpoints: name its newest, which is what the user most likely meant.
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("model_", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".bin") == 0) names.push_back(n);
    }
    const std::string hint = names.empty() ? "a checkpoint file such as <folder>/model_00001000.bin"
                                           : "one of its files, such as '" + path + "/" +
                                                 *std::max_element(names.begin(), names.end()) + "' (the newest)";
    user_error("--resume '", path, "' is a folder; give ", hint, ".");
  }
  return std::make_unique<SectionReader>(path);
}

TrainState read_train_state(const SectionReader& r, int64_t steps) {
  TrainState s;
  s.data = r.get_vector<int64_t>("train.loader");
  std::istringstream rs(r.get_string("train.sample_rng"));
  // The generator's text is its 312 state words (std::mt19937_64's operator<<); anything else is refused,
  // not left half read.
  if (!(rs >> s.rng) || !(rs >> std::ws).eof())
    r.fail("train.sample_rng", "is not a saved random generator state; the file is damaged");
  s.step = r.get_i64("train.step");
  if (s.step < 0)
    r.fail("train.step", str_cat("holds step ", s.step, ", and a step count is never negative; the file is damaged"));
  if (s.step > steps)
    user_error("'", r.path(), "' is at step ", s.step, ", beyond this run's ", steps, " steps (-x); resume it with -x ",
               s.step, " or more.");
  if (r.has("train.dropout_counter")) s.dropout_counter = uint64_t(r.get_i64("train.dropout_counter"));
  return s;
}

void check_checkpoint_optimizer(const SectionReader& r, const std::string& optimizer, bool overlap) {
  const std::string saved = r.get_string("optim.name");
  if (saved != optimizer)
    user_error("'", r.path(), "' holds the state of optimizer '", saved, "', not '", optimizer, "'; resume with -o ",
               saved, ", or start afresh without --resume.");
  const bool grouped = r.has("optim.groups") && r.get_i64("optim.groups") > 1;  // written only by --overlap runs
  if (grouped != overlap)
    user_error("'", r.path(), "' was written ", grouped ? "with" : "without",
               " --overlap 1, which orders the optimizer's state by blocks; resume it ", grouped ? "with" : "without",
               " --overlap 1.");
}

void check_checkpoint_params(const SectionReader& r, const ParamTable& table, const std::string& flags_hint) {
  uint64_t fingerprint = table.fingerprint();
  if (r.has("model.table")) r.read("model.table", &fingerprint, sizeof fingerprint);
  if (fingerprint != table.fingerprint() || r.size("model.params") != uint64_t(table.natural_total()) * sizeof(float))
    user_error("'", r.path(), "' holds a different model; resume with the ", flags_hint, " that wrote it.");
}

std::string rank_checkpoint_path(const std::string& main, int rank) { return main + ".rank" + std::to_string(rank); }

void check_checkpoint_dp(const SectionReader& r, const DpRecord& dp) {
  const int64_t world = r.has("dp.world") ? r.get_i64("dp.world") : 1;
  const std::vector<int> owner = r.has("dp.owner") ? r.get_vector<int>("dp.owner") : std::vector<int>{};
  const std::vector<int64_t> cut = r.has("dp.cut") ? r.get_vector<int64_t>("dp.cut") : std::vector<int64_t>{};
  if (world != dp.world)
    user_error("'", r.path(), "' was written by ", world, world == 1 ? " process" : " processes", ", this run has ",
               dp.world, "; resume it with ", world,
               " (each process's data position and optimizer shard are its own).");
  if (owner.empty() != dp.owner.empty())
    user_error("'", r.path(), "' was written ", owner.empty() ? "without" : "with", " --shard 1; resume it ",
               owner.empty() ? "without" : "with", " --shard 1.");
  if (owner != dp.owner || cut != dp.cut)
    user_error("'", r.path(), "' shares the tensors among the processes differently (another optimizer?); resume it ",
               "with the flags that wrote it.");
}

std::vector<int64_t> read_rank_position(const SectionReader& r, const ParamTable& table, const DpRecord& dp,
                                        int64_t step) {
  uint64_t fingerprint = 0;
  r.read("model.table", &fingerprint, sizeof fingerprint);
  if (fingerprint != table.fingerprint())
    user_error("'", r.path(), "' holds a different model than its rank 0 file; resume from a complete checkpoint.");
  check_checkpoint_dp(r, dp);
  if (r.get_i64("train.step") != step)
    user_error("'", r.path(), "' is of step ", r.get_i64("train.step"), ", its rank 0 file of step ", step,
               "; resume from a complete checkpoint.");
  return r.get_vector<int64_t>("train.loader");
}
