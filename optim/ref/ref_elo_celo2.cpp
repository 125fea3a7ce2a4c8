// ELO_CELO2 reference (celo2.md 1, 4.1, 5.2): CELO2 with other weights and defaults, whose AdamW side path
// reads the learned accumulators m_0 (decay 0.9) and v (decay 0.95) of the tensor. Those accumulators,
// and m_1, m_2 and the second moments PyLO also updates for such tensors without ever reading them, are
// kept as for any tensor, so that the state matches PyLO's.
#include "optim/ref/ref_celo2.h"

namespace {
class RefEloCelo2 : public RefCelo2 {
 public:
  RefEloCelo2(const ParamTable& t, const OptimOptions& o, const Celo2Weights& w, Celo2Trace* trace)
      : RefCelo2(t, o, o.elo_celo2, w, "elo_celo2", false, trace) {}

 protected:
  void adamw_tensor(const TensorInfo& ti, float* p, const std::vector<float>& g, float lr, float wd) override {
    RefLoTensor& s = *lo_[size_t(ti.index)];
    s.update(g, dec_);
    // PyLO reads beta1 and beta2 back from the float32 decay tensors; eps is fixed at 1e-8.
    celo2_adam_apply({double(dec_.m[0]), double(dec_.v), 1e-8}, t_, lr, wd, p, s.m[0].data(), s.v.data(), ti.numel);
  }
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_elo_celo2(const ParamTable& t, const OptimOptions& o, const Celo2Weights& w,
                                                 Celo2Trace* trace) {
  return std::make_unique<RefEloCelo2>(t, o, w, trace);
}
