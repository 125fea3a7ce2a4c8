// ELO reference (celo2.md 8): small_fc_lopt's accumulators, features and 39-32-32-2 MLP with ELO's fixed
// decays (rms 0.999), optional global clipping then nan_to_num, and PyLO ELO's update
// p -= lr (dir exp(exp_mult mag) + wd p), p on the right the value before the step.
#include <cfloat>
#include <cmath>

#include "optim/ref/ref_celo2.h"

namespace {
// torch.nan_to_num: NaN -> 0, +-inf -> +-FLT_MAX.
float nan_to_num(float x) {
  if (std::isnan(x)) return 0.0f;
  if (std::isinf(x)) return x > 0 ? FLT_MAX : -FLT_MAX;
  return x;
}

class RefElo : public RefOptimizer {
 public:
  RefElo(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w) : RefOptimizer(t, o), w_(w) {
    dec_ = nominal_decays();  // the nominal decays as they are: ELO learns no offsets
    const TieRule tie = parse_tie_rule(o.elo.tie, kEloPyloTie);
    for (const auto& ti : t.tensors()) st_.push_back(std::make_unique<RefLoTensor>(ti.shape, tie));
  }

  void step(std::vector<float>& params, const std::vector<float>& grads, float gs, float) override {
    const EloOptions& h = opts_.elo;
    const float clip = h.clip_grad ? ref_global_clip_scale(table_, grads, gs, h.clip_norm) : 1.0f;
    const float lr = float(h.lr * opts_.schedule.factor(t_));
    float tau[11];
    small_fc_time_features(t_, tau);  // t counts earlier steps: 0 at the first update (E4)
    for (const auto& ti : table_.tensors()) {
      std::vector<float> g(static_cast<size_t>(ti.numel)), dir(g.size()), mag(g.size());
      for (int64_t i = 0; i < ti.numel; i++) {
        float x = grads[size_t(ti.offset + i)] * gs;
        if (clip != 1.0f) x *= clip;
        g[size_t(i)] = nan_to_num(x);
      }
      RefLoTensor& s = *st_[size_t(ti.index)];
      float* p = &params[size_t(ti.offset)];
      s.update(g, dec_);
      small_fc_outputs(w_, s, g.data(), p, ti.numel, tau, dir.data(), mag.data());
      const float wd = ti.decay ? float(h.weight_decay) : 0.0f;
      for (int64_t i = 0; i < ti.numel; i++) {
        const float u = dir[size_t(i)] * std::exp(mag[size_t(i)] * float(h.exp_mult));
        p[i] = p[i] - lr * (u + wd * p[i]);
      }
    }
    t_++;
  }

 protected:
  std::string name() const override { return "elo"; }
  std::vector<StateVec> state_vectors() override {
    std::vector<StateVec> out;
    for (const auto& ti : table_.tensors())
      for (const auto& [name, v] : st_[size_t(ti.index)]->state()) out.push_back({ti.name + "." + name, v});
    return out;
  }

 private:
  SmallFcWeights w_;
  LoDecays dec_;
  std::vector<std::unique_ptr<RefLoTensor>> st_;
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_elo(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w) {
  return std::make_unique<RefElo>(t, o, w);
}
