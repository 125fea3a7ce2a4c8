#include "optim/ref/ref_celo2.h"
#include "optim/ref/ref_lopt.h"
#include "optim/ref/ref_parts.h"

std::unique_ptr<RefOptimizer> make_ref_optimizer(const std::string& name, const OptimOptions& o, const ParamTable& t) {
  validate_options(name, o);
  if (name == "adamw") return make_ref_adamw(t, o);
  if (name == "adafactor") return make_ref_adafactor(t, o);
  if (name == "muon") return make_ref_muon(t, o);
  if (name == "small_fc_lopt") return make_ref_small_fc(t, o, load_small_fc_weights(o.small_fc.weights));
  if (name == "celo2") return make_ref_celo2(t, o, load_celo2_weights(o.celo2.weights));
  if (name == "elo_celo2") return make_ref_elo_celo2(t, o, load_elo_celo2_weights(o.elo_celo2.weights));
  if (name == "elo") return make_ref_elo(t, o, load_elo_weights(o.elo.weights));
  return make_ref_velo(t, o, load_velo_weights(o.velo.weights));
}
