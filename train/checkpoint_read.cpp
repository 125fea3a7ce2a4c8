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
  if (fingerprint != table.fingerprint() || r.size("model.params") != uint64_t(table.total_elems()) * sizeof(float))
    user_error("'", r.path(), "' holds a different model; resume with the ", flags_hint, " that wrote it.");
}
