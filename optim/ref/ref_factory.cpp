#include "optim/ref/ref_lopt.h"
#include "optim/ref/ref_parts.h"

std::unique_ptr<RefOptimizer> make_ref_optimizer(const std::string& name, const OptimOptions& o, const ParamTable& t) {
  validate_options(name, o);
  if (name == "adamw") return make_ref_adamw(t, o);
  if (name == "adafactor") return make_ref_adafactor(t, o);
  if (name == "muon") return make_ref_muon(t, o);
  if (name == "small_fc_lopt") return make_ref_small_fc(t, o, load_small_fc_weights(o.small_fc.weights));
  return make_ref_velo(t, o, load_velo_weights(o.velo.weights));
}
