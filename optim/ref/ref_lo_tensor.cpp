// Accumulators shared by the learned-optimizer references (velo.md 4.5-4.6, small_fc_lopt.md 3.3-3.4): the
// momenta m_k and the second moment v as EMAs of g and g^2, and at three decays the factored second
// moments R and C (EMAs of the mean of g^2 + 1e-30 over d0 and over d1; vectors: V, an EMA of it), with
// their Adafactor factors.
#include <cmath>

#include "optim/lopt/lo_record16.h"
#include "optim/ref/ref_lopt.h"

RefLoTensor::RefLoTensor(const std::vector<int64_t>& shape, TieRule tie) : fd(factored_dims(shape, tie)) {
  NdShape nd{shape};
  n_ = nd.count_without(-1);
  for (int k = 0; k < 3; k++) m[k].assign(size_t(n_), 0.0f);
  v.assign(size_t(n_), 0.0f);
  if (!fd.factored) {
    for (int k = 0; k < 3; k++) V_[k].assign(size_t(n_), 0.0f);
    return;
  }
  n0_ = shape[size_t(fd.d0)];
  n1_ = shape[size_t(fd.d1)];
  for (int k = 0; k < 3; k++) {
    R_[k].assign(size_t(n_ / n0_), 0.0f);
    C_[k].assign(size_t(n_ / n1_), 0.0f);
  }
  ri_.resize(size_t(n_));
  ci_.resize(size_t(n_));
  group_.assign(R_[0].size(), 0);
  for (int64_t i = 0; i < n_; i++) {
    auto c = nd.coords(i);
    ri_[size_t(i)] = nd.flat_without(c, fd.d0);
    ci_[size_t(i)] = nd.flat_without(c, fd.d1);
    group_[size_t(ri_[size_t(i)])] = nd.flat_without(c, fd.d0, fd.d1);  // μR: R entries sharing all but d1
  }
  groups_ = nd.count_without(fd.d0, fd.d1);
}

void RefLoTensor::update(const std::vector<float>& g, const LoDecays& d, const uint64_t* record_key) {
  for (int64_t i = 0; i < n_; i++) {
    const float gi = g[size_t(i)];
    for (int k = 0; k < 3; k++) m[k][size_t(i)] = d.m[k] * m[k][size_t(i)] + (1.0f - d.m[k]) * gi;
    v[size_t(i)] = d.v * v[size_t(i)] + (1.0f - d.v) * gi * gi;
    if (record_key) {
      const uint64_t r = lo_r16_draws(*record_key, uint64_t(i));
      for (int k = 0; k < 3; k++) m[k][size_t(i)] = lo_bf16_value(lo_bf16_sr(m[k][size_t(i)], uint32_t(r >> (16 * k))));
      v[size_t(i)] = lo_bf16_value(lo_bf16_sr(v[size_t(i)], uint32_t(r >> 48)));
    }
    if (!fd.factored)
      for (int k = 0; k < 3; k++) V_[k][size_t(i)] = d.f[k] * V_[k][size_t(i)] + (1.0f - d.f[k]) * (gi * gi + 1e-30f);
  }
  if (!fd.factored) return;
  std::vector<double> rs(R_[0].size(), 0.0), cs(C_[0].size(), 0.0);
  for (int64_t i = 0; i < n_; i++) {
    const double q = double(g[size_t(i)]) * g[size_t(i)];
    rs[size_t(ri_[size_t(i)])] += q;
    cs[size_t(ci_[size_t(i)])] += q;
  }
  for (int k = 0; k < 3; k++) {
    for (size_t j = 0; j < rs.size(); j++)
      R_[k][j] = d.f[k] * R_[k][j] + (1.0f - d.f[k]) * float(rs[j] / double(n0_) + 1e-30);
    for (size_t j = 0; j < cs.size(); j++)
      C_[k][j] = d.f[k] * C_[k][j] + (1.0f - d.f[k]) * float(cs[j] / double(n1_) + 1e-30);
    std::vector<double> mu(size_t(groups_), 0.0);
    for (size_t j = 0; j < rs.size(); j++) mu[size_t(group_[j])] += R_[k][j];
    for (auto& x : mu) x /= double(n1_);
    rf_[k].resize(rs.size());
    cf_[k].resize(cs.size());
    for (size_t j = 0; j < rs.size(); j++)
      rf_[k][j] = 1.0f / std::sqrt(std::max(R_[k][j] / (float(mu[size_t(group_[j])]) + 1e-9f), 1e-9f));
    for (size_t j = 0; j < cs.size(); j++) cf_[k][j] = 1.0f / std::sqrt(std::max(C_[k][j], 1e-9f));
  }
}

RefLoTensor::Elem RefLoTensor::elem(int64_t i, float momentum_eps) const {
  Elem e;
  for (int k = 0; k < 3; k++) {
    if (fd.factored) {
      const size_t ri = size_t(ri_[size_t(i)]), ci = size_t(ci_[size_t(i)]);
      e.row[k] = R_[k][ri];
      e.col[k] = C_[k][ci];
      e.fg[k] = e.fm[k] = rf_[k][ri] * cf_[k][ci];
    } else {
      const float V = V_[k][size_t(i)];
      e.row[k] = e.col[k] = V;
      e.fg[k] = 1.0f / std::sqrt(std::max(V + 1e-9f, 1e-9f));
      e.fm[k] = 1.0f / std::sqrt(V + momentum_eps);
    }
  }
  return e;
}

std::vector<std::pair<std::string, std::vector<float>*>> RefLoTensor::state() {
  std::vector<std::pair<std::string, std::vector<float>*>> out;
  for (int k = 0; k < 3; k++) out.push_back({"m" + std::to_string(k), &m[k]});
  out.push_back({"v", &v});
  for (int k = 0; k < 3; k++) {
    if (fd.factored) {
      out.push_back({"R" + std::to_string(k), &R_[k]});
      out.push_back({"C" + std::to_string(k), &C_[k]});
    } else {
      out.push_back({"V" + std::to_string(k), &V_[k]});
    }
  }
  return out;
}
