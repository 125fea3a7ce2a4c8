// What the attention tests share (tests/gpu/test_flash_attention.cu, test_cudnn_attention.cu): a
// double-precision CPU reference of causal and non-causal softmax attention and its backward (with our
// dropout masks), random bf16-rounded inputs, and the comparison of a kernel's outputs with the reference
// under the tolerances that bf16 storage allows.
#pragma once
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/bf16_host.h"
#include "kernels/dropout.h"
#include "tests/test_util.h"

using bf16 = __nv_bfloat16;

namespace attention_test {
constexpr int kHs = 64;  // head size

inline std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> y(x.size());
  for (size_t i = 0; i < x.size(); i++) y[i] = __float2bfloat16_rn(x[i]);
  return y;
}
inline std::vector<float> to_float(const std::vector<bf16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); i++) y[i] = __bfloat162float(x[i]);
  return y;
}

// A dropout site as the host sees it: DropoutArgs with the counter's value instead of its device pointer.
struct Dropout {
  uint64_t seed = 0, counter = 0;
  uint32_t site = 0, threshold = 0;  // threshold 0: no dropout
  float scale = 1.0f;
  bool on() const { return threshold != 0; }
};
inline Dropout dropout(float p, uint64_t counter = 5) {
  Dropout d;
  d.seed = 0x5eed;
  d.counter = counter;
  d.site = 7;
  d.threshold = dropout_threshold(p);
  d.scale = dropout_scale(d.threshold);
  return d;
}

// Causal (or, with causal false, full) attention in double: out (B,T,C), lse (B,NH,T), dqkv (B,T,3C) from qkv (B,T,3C)
// and dout (B,T,C), with dropout Z = keep * scale on the probabilities P: out = (Z P) V, dS = P (Z dP - D), dV = (Z
// P)^T dout.
struct Reference {
  std::vector<double> out, lse, dqkv;
};
inline Reference reference(const std::vector<float>& qkv, const std::vector<float>& dout, int B, int T, int NH,
                           bool causal, const Dropout& drop) {
  const int C = NH * kHs, ld = 3 * C;
  const double scale = 1.0 / std::sqrt(double(kHs));
  const uint64_t key = dropout_site_key(drop.seed, drop.counter, drop.site);
  Reference r;
  r.out.assign(size_t(B) * T * C, 0.0);
  r.lse.assign(size_t(B) * NH * T, 0.0);
  r.dqkv.assign(size_t(B) * T * ld, 0.0);
  std::vector<double> p(static_cast<size_t>(T)), dp(static_cast<size_t>(T)), z(static_cast<size_t>(T), 1.0);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      auto q = [&](int t, int d) { return double(qkv[(size_t(b) * T + t) * ld + h * kHs + d]); };
      auto k = [&](int t, int d) { return double(qkv[(size_t(b) * T + t) * ld + C + h * kHs + d]); };
      auto v = [&](int t, int d) { return double(qkv[(size_t(b) * T + t) * ld + 2 * C + h * kHs + d]); };
      auto go = [&](int t, int d) { return double(dout[(size_t(b) * T + t) * C + h * kHs + d]); };
      auto dqkv = [&](int t, int part, int d) -> double& {
        return r.dqkv[(size_t(b) * T + t) * ld + part * C + h * kHs + d];
      };
      for (int i = 0; i < T; i++) {
        const int keys = causal ? i + 1 : T;  // query i sees keys 0 .. keys - 1
        double m = -INFINITY;
        for (int j = 0; j < keys; j++) {
          double s = 0;
          for (int d = 0; d < kHs; d++) s += q(i, d) * k(j, d);
          p[size_t(j)] = s * scale;
          m = std::max(m, p[size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j < keys; j++) sum += std::exp(p[size_t(j)] - m);
        const double lse = m + std::log(sum);
        r.lse[(size_t(b) * NH + h) * T + i] = lse;
        for (int j = 0; j < keys; j++) p[size_t(j)] = std::exp(p[size_t(j)] - lse);
        if (drop.on()) {
          const uint32_t rh = dropout_row(key, uint32_t(b * NH + h) * uint32_t(T) + uint32_t(i));
          for (int j = 0; j < keys; j++)
            z[size_t(j)] = dropout_keep(rh, uint32_t(j), drop.threshold) ? double(drop.scale) : 0.0;
        }
        for (int j = 0; j < keys; j++) {
          double a = 0;
          for (int d = 0; d < kHs; d++) a += go(i, d) * v(j, d);
          dp[size_t(j)] = a;
        }
        // D = sum_j z_ij p_ij dp_ij = dout_i . out_i, the latter as the backward gets it: rounded to bf16.
        // (This matters where dq, dk vanish, as at T = 1: with dropout out = scale * v is not exact.)
        double D = 0;
        for (int d = 0; d < kHs; d++) {
          double o = 0;
          for (int j = 0; j < keys; j++) o += z[size_t(j)] * p[size_t(j)] * v(j, d);
          r.out[(size_t(b) * T + i) * C + h * kHs + d] = o;
          D += go(i, d) * bf16_round(float(o));
        }
        for (int j = 0; j < keys; j++) {
          const double ds = p[size_t(j)] * (z[size_t(j)] * dp[size_t(j)] - D) * scale;
          for (int d = 0; d < kHs; d++) {
            dqkv(i, 0, d) += ds * k(j, d);
            dqkv(j, 1, d) += ds * q(i, d);
            dqkv(j, 2, d) += z[size_t(j)] * p[size_t(j)] * go(i, d);
          }
        }
      }
    }
  return r;
}

// Largest |got - want| over max |want|, and the count of non-finite got; elements picked by `take`.
struct Err {
  double rel_max = 0, max_ref = 0;
  size_t bad = 0, n = 0;
};
template <class Take>
Err compare(const std::vector<float>& got, const std::vector<double>& want, Take take) {
  Err e;
  double max_diff = 0;
  for (size_t i = 0; i < want.size(); i++) {
    if (!take(i)) continue;
    e.n++;
    if (!std::isfinite(got[i])) {
      e.bad++;
      continue;
    }
    max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
    e.max_ref = std::max(e.max_ref, std::fabs(want[i]));
  }
  e.rel_max = max_diff / std::max(e.max_ref, 1e-3);  // the floor: at T = 1, dq = dk = 0 exactly
  return e;
}

// Random bf16-rounded inputs: q and k with std qk_std (scores have std qk_std^2 after the 1/8 scale), v and
// dout with std 1.
struct Inputs {
  std::vector<float> qkv, dout;
};
inline Inputs random_inputs(int B, int T, int NH, float qk_std, uint64_t seed) {
  const int C = NH * kHs;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> z(0.0f, 1.0f);
  Inputs in;
  in.qkv.resize(size_t(B) * T * 3 * C);
  in.dout.resize(size_t(B) * T * C);
  for (size_t i = 0; i < in.qkv.size(); i++)
    in.qkv[i] = bf16_round(z(rng) * ((i % (3 * C)) < size_t(2 * C) ? qk_std : 1.0f));
  for (auto& x : in.dout) x = bf16_round(z(rng));
  return in;
}

// A kernel's outputs, downloaded.
struct Outputs {
  std::vector<bf16> out, dqkv;
  std::vector<float> lse;
};
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A kernel's outputs as a reference (one kernel checked against another).
inline Reference as_reference(const Outputs& o) {
  Reference r;
  for (const bf16 x : o.out) r.out.push_back(__bfloat162float(x));
  for (const bf16 x : o.dqkv) r.dqkv.push_back(__bfloat162float(x));
  r.lse.assign(o.lse.begin(), o.lse.end());
  return r;
}

// The largest errors of outputs against a reference: out, dq, dk, dv as max |got - want| / max |want|, lse
// absolute.
struct Errors {
  double out = 0, dqkv[3] = {0, 0, 0}, lse = 0;
};
// Default tolerances: out, dq, dk, dv are stored in bf16 (relative rounding 2^-9) and the backward rounds
// P and dS to bf16 for the tensor cores; lse is fp32 throughout.
struct Tolerances {
  double out = 1e-2, grad = 2e-2, lse = 1e-3;
};

// Checks (EXPECT) every output against the reference: finite everywhere (the outputs were poisoned with
// NaN, so an unwritten element shows) and within the tolerances. C = NH * 64.
inline Errors expect_near(const Outputs& got, const Reference& want, int C, const Tolerances& tol = Tolerances()) {
  const std::vector<float> out = to_float(got.out), dqkv = to_float(got.dqkv);
  Errors e;
  const Err eo = compare(out, want.out, [](size_t) { return true; });
  EXPECT_EQ(eo.bad, 0u) << "out has non-finite (unwritten?) elements";
  EXPECT_LE(e.out = eo.rel_max, tol.out) << "out";
  size_t lse_bad = 0;
  for (size_t i = 0; i < got.lse.size(); i++) {
    if (!std::isfinite(got.lse[i]))
      lse_bad++;
    else
      e.lse = std::max(e.lse, std::fabs(got.lse[i] - want.lse[i]));
  }
  EXPECT_EQ(lse_bad, 0u) << "lse has non-finite (unwritten?) elements";
  EXPECT_LE(e.lse, tol.lse) << "lse";
  const char* names[3] = {"dq", "dk", "dv"};
  for (int part = 0; part < 3; part++) {
    const Err eg = compare(dqkv, want.dqkv, [&](size_t i) { return int((i % size_t(3 * C)) / size_t(C)) == part; });
    EXPECT_EQ(eg.bad, 0u) << names[part] << " has non-finite (unwritten?) elements";
    EXPECT_LE(e.dqkv[part] = eg.rel_max, tol.grad) << names[part];
  }
  return e;
}
}  // namespace attention_test
