// Saving and loading a CPU reference's state (the section layout of Optimizer::save_state).
#include "common/error.h"
#include "optim/ref/ref_optim.h"

std::vector<RefOptimizer::StateVec> RefOptimizer::state_vectors() {
  user_error("the CPU reference of '", name(), "' cannot save or load its state.");
}

void RefOptimizer::save_state(SectionWriter& w) {
  const std::vector<StateVec> vecs = state_vectors();
  w.put_string("optim.name", name());
  const uint64_t fp = table_.fingerprint();
  w.put("optim.fingerprint", &fp, sizeof fp);
  w.put_i64("optim.counter", t_);
  for (const auto& s : vecs) w.put_vector("optim." + s.name, *s.v);
}

void RefOptimizer::load_state(const SectionReader& r) {
  const std::vector<StateVec> vecs = state_vectors();
  const std::string saved = r.get_string("optim.name");
  if (saved != name()) user_error("'", r.path(), "' holds the state of optimizer '", saved, "', not '", name(), "'.");
  uint64_t fp = 0;
  r.read("optim.fingerprint", &fp, sizeof fp);
  if (fp != table_.fingerprint())
    user_error("'", r.path(), "' was saved for a different model (parameter names or shapes differ).");
  const int64_t t = r.get_i64("optim.counter");
  for (const auto& s : vecs)  // check everything before overwriting anything
    if (r.size("optim." + s.name) != s.v->size() * sizeof(float))
      r.fail("optim." + s.name, str_cat("holds ", r.size("optim." + s.name), " bytes but this optimizer needs ",
                                        s.v->size() * sizeof(float), "; it was saved with other settings"));
  for (const auto& s : vecs) r.read("optim." + s.name, s.v->data(), s.v->size() * sizeof(float));
  t_ = t;
}
