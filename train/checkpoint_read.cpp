// The checks and reads of a checkpoint that come before any GPU work (host code, so the CPU suite tests them).
#include <sstream>

#include "train/checkpoint.h"

TrainState read_train_state(const SectionReader& r) {
  TrainState s;
  s.data = r.get_vector<int64_t>("train.loader");
  std::istringstream rs(r.get_string("train.sample_rng"));
  rs >> s.rng;
  s.step = r.get_i64("train.step");
  if (r.has("train.dropout_counter")) s.dropout_counter = uint64_t(r.get_i64("train.dropout_counter"));
  return s;
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
  if (world != dp.world)
    user_error("'", r.path(), "' was written by ", world, world == 1 ? " process" : " processes", ", this run has ",
               dp.world, "; resume it with ", world,
               " (each process's data position and optimizer shard are its own).");
  if (owner.empty() != dp.owner.empty())
    user_error("'", r.path(), "' was written ", owner.empty() ? "without" : "with", " --shard 1; resume it ",
               owner.empty() ? "without" : "with", " --shard 1.");
  if (owner != dp.owner)
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
