// Flash attention (kernels/flash_attention_fwd.cu, _bwd.cu) against a double-precision CPU reference of causal and
// non-causal softmax attention and its backward, on the same bf16-rounded inputs: out, lse, dq, dk, dv for shapes with
// T below, at and past the 64/128-row tiles, without and with dropout on the attention probabilities (the reference
// draws the same masks with kernels/dropout.h); bit-identical reruns; the mask follows the device counter; each head of
// a many-head call equal to the same head run alone; argument checks. (Speed: bench_gpt2_ops.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/bf16_host.h"
#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "kernels/flash_attention.h"
#include "tests/test_util.h"

namespace {
class FlashAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

constexpr int kHs = 64;

std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> y(x.size());
  for (size_t i = 0; i < x.size(); i++) y[i] = __float2bfloat16_rn(x[i]);
  return y;
}
std::vector<float> to_float(const std::vector<bf16>& x) {
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
Dropout dropout(float p, uint64_t counter = 5) {
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
Reference reference(const std::vector<float>& qkv, const std::vector<float>& dout, int B, int T, int NH, bool causal,
                    const Dropout& drop) {
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
Inputs random_inputs(int B, int T, int NH, float qk_std, uint64_t seed) {
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

// One problem on the device: a forward and backward through the kernels under test, with every output
// poisoned first (0xff bytes: NaN in bf16 and fp32, so that an unwritten element shows; or 0x00).
struct Outputs {
  std::vector<bf16> out, dqkv;
  std::vector<float> lse;
};
class FlashRun {
 public:
  FlashRun(const Inputs& in, int B, int T, int NH, bool causal)
      : B_(B),
        T_(T),
        NH_(NH),
        causal_(causal),
        qkv_(in.qkv.size()),
        out_(in.dout.size()),
        dout_(in.dout.size()),
        dqkv_(in.qkv.size()),
        lse_(size_t(B) * NH * T),
        scratch_(size_t(B) * NH * T),
        counter_(1) {
    qkv_.upload(to_bf16(in.qkv));
    dout_.upload(to_bf16(in.dout));
  }
  Outputs run(const Dropout& drop, int poison = 0xff) {
    DropoutArgs d;
    if (drop.on()) {
      counter_.upload(&drop.counter, 1);
      d.seed = drop.seed;
      d.counter = counter_.get();
      d.site = drop.site;
      d.threshold = drop.threshold;
      d.scale = drop.scale;
    }
    CUDA_CHECK(cudaMemset(out_.get(), poison, out_.bytes()));
    CUDA_CHECK(cudaMemset(lse_.get(), poison, lse_.bytes()));
    CUDA_CHECK(cudaMemset(dqkv_.get(), poison, dqkv_.bytes()));
    flash_attention_forward(out_.get(), lse_.get(), qkv_.get(), B_, T_, NH_, causal_, 0, d);
    flash_attention_backward(dqkv_.get(), dout_.get(), out_.get(), lse_.get(), qkv_.get(), scratch_.get(), B_, T_, NH_,
                             causal_, 0, d);
    CUDA_CHECK(cudaDeviceSynchronize());
    return {out_.download(), dqkv_.download(), lse_.download()};
  }

 private:
  int B_, T_, NH_;
  bool causal_;
  DeviceBuffer<bf16> qkv_, out_, dout_, dqkv_;
  DeviceBuffer<float> lse_, scratch_;
  DeviceBuffer<uint64_t> counter_;
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Case {
  int B, T, NH;
  float qk_std;  // std of q and k: scores have std qk_std^2 (after the 1/8 scale)
  bool causal = true;
};
// T below, at and past the 64/128-row tiles, several heads and batches; non-causal at ViT's lengths (50:
// 28x28 images in 4x4 patches plus cls; 197: 224x224 in 16x16 patches plus cls) and at tile edges.
const Case kCases[] = {{1, 1, 1, 1.0f},          {2, 17, 3, 1.0f},         {1, 64, 2, 1.0f},
                       {2, 130, 2, 1.0f},        {1, 200, 1, 2.5f},        {3, 129, 2, 1.0f},
                       {1, 1024, 4, 1.0f},       {1, 1, 1, 1.0f, false},   {2, 50, 3, 1.0f, false},
                       {1, 64, 2, 1.0f, false},  {2, 197, 3, 1.0f, false}, {1, 200, 1, 2.5f, false},
                       {3, 129, 2, 1.0f, false}, {1, 577, 2, 1.0f, false}};

void run_case(const Case& c, uint64_t seed, const Dropout& drop, float p) {
  const int B = c.B, T = c.T, NH = c.NH, C = NH * kHs;
  SCOPED_TRACE(str_cat("B=", B, " T=", T, " NH=", NH, " qk_std=", c.qk_std, " causal=", c.causal, " dropout=", p));
  const Inputs in = random_inputs(B, T, NH, c.qk_std, seed);
  const Reference ref = reference(in.qkv, in.dout, B, T, NH, c.causal, drop);
  const Outputs got = FlashRun(in, B, T, NH, c.causal).run(drop);
  const std::vector<float> out = to_float(got.out), dqkv = to_float(got.dqkv), &lse = got.lse;

  // Tolerances: out, dq, dk, dv are stored in bf16 (relative rounding 2^-9) and the backward also rounds
  // P and dS to bf16 for the tensor cores; lse is fp32 throughout.
  const double tol_out = 1e-2, tol_grad = 2e-2, tol_lse = 1e-3;
  const Err eo = compare(out, ref.out, [](size_t) { return true; });
  EXPECT_EQ(eo.bad, 0u) << "out has non-finite (unwritten?) elements";
  EXPECT_LE(eo.rel_max, tol_out) << "out";
  double lse_err = 0;
  size_t lse_bad = 0;
  for (size_t i = 0; i < lse.size(); i++) {
    if (!std::isfinite(lse[i]))
      lse_bad++;
    else
      lse_err = std::max(lse_err, std::fabs(lse[i] - ref.lse[i]));
  }
  EXPECT_EQ(lse_bad, 0u) << "lse has non-finite (unwritten?) elements";
  EXPECT_LE(lse_err, tol_lse) << "lse";
  const char* names[3] = {"dq", "dk", "dv"};
  Err eg[3];
  for (int part = 0; part < 3; part++) {
    eg[part] = compare(dqkv, ref.dqkv, [&](size_t i) { return int((i % size_t(3 * C)) / size_t(C)) == part; });
    EXPECT_EQ(eg[part].bad, 0u) << names[part] << " has non-finite (unwritten?) elements";
    EXPECT_LE(eg[part].rel_max, tol_grad) << names[part];
  }
  std::printf(
      "[flash] B=%d T=%d NH=%d qk_std=%.1f %s p=%.1f  max err / max|ref|: out %.2e  dq %.2e  dk %.2e  dv %.2e;  lse "
      "abs %.2e\n",
      B, T, NH, c.qk_std, c.causal ? "causal" : "full", p, eo.rel_max, eg[0].rel_max, eg[1].rel_max, eg[2].rel_max,
      lse_err);
}
}  // namespace

TEST_F(FlashAttention, MatchesCpuReference) {
  uint64_t seed = 1;
  for (const Case& c : kCases) run_case(c, seed++, Dropout(), 0.0f);
}

TEST_F(FlashAttention, MatchesCpuReferenceWithDropout) {
  for (const float p : {0.1f, 0.5f}) {
    uint64_t seed = 1;
    for (const Case& c : kCases) run_case(c, seed++, dropout(p), p);
  }
}

TEST_F(FlashAttention, BitIdenticalReruns) {
  const int B = 2, T = 300, NH = 3;
  for (const bool causal : {true, false})
    for (const float p : {0.0f, 0.1f}) {
      FlashRun fa(random_inputs(B, T, NH, 1.0f, 7), B, T, NH, causal);
      SCOPED_TRACE(str_cat("causal=", causal, " dropout=", p));
      const Dropout drop = p > 0 ? dropout(p) : Dropout();
      const Outputs a = fa.run(drop, 0xff), b = fa.run(drop, 0x00);  // different garbage each time
      EXPECT_TRUE(same_bits(a.out, b.out)) << "out differs between runs";
      EXPECT_TRUE(same_bits(a.lse, b.lse)) << "lse differs between runs";
      EXPECT_TRUE(same_bits(a.dqkv, b.dqkv)) << "dqkv differs between runs";
    }
}

// The kernels read the counter from device memory (as in a replayed CUDA graph): a new value draws a new
// mask. lse is that of the undropped scores whatever the mask.
TEST_F(FlashAttention, DropoutMaskFollowsCounter) {
  const int B = 2, T = 200, NH = 2;
  FlashRun fa(random_inputs(B, T, NH, 1.0f, 11), B, T, NH, true);
  const Outputs none = fa.run(Dropout()), c5 = fa.run(dropout(0.1f, 5)), c6 = fa.run(dropout(0.1f, 6));
  EXPECT_FALSE(same_bits(c5.out, c6.out)) << "out did not change with the counter";
  EXPECT_FALSE(same_bits(c5.dqkv, c6.dqkv)) << "dqkv did not change with the counter";
  EXPECT_FALSE(same_bits(none.out, c5.out)) << "out with dropout equals out without";
  EXPECT_FALSE(same_bits(none.dqkv, c5.dqkv)) << "dqkv with dropout equals dqkv without";
  EXPECT_TRUE(same_bits(none.lse, c5.lse) && same_bits(none.lse, c6.lse)) << "lse depends on the dropout mask";
}

// Many heads at T = 1024 (more than one of the kernels' head groups, see grid_pos): every head of the
// batched call must equal, bit for bit, the same head run alone.
TEST_F(FlashAttention, HeadsMatchSingleHeadRuns) {
  const int B = 3, T = 1024, NH = 25, C = NH * kHs;
  std::mt19937 rng(3);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<bf16> qkv(size_t(B) * T * 3 * C), dout(size_t(B) * T * C);
  for (auto& x : qkv) x = __float2bfloat16_rn(z(rng));
  for (auto& x : dout) x = __float2bfloat16_rn(z(rng));
  DeviceBuffer<bf16> d_qkv(qkv.size()), d_out(dout.size()), d_dout(dout.size()), d_dqkv(qkv.size());
  DeviceBuffer<float> d_lse(size_t(B) * NH * T), d_scratch(size_t(B) * NH * T);
  d_qkv.upload(qkv);
  d_dout.upload(dout);
  flash_attention_forward(d_out.get(), d_lse.get(), d_qkv.get(), B, T, NH, true, 0);
  flash_attention_backward(d_dqkv.get(), d_dout.get(), d_out.get(), d_lse.get(), d_qkv.get(), d_scratch.get(), B, T, NH,
                           true, 0);
  const std::vector<bf16> out = d_out.download(), dqkv = d_dqkv.download();
  const std::vector<float> lse = d_lse.download();

  DeviceBuffer<bf16> h_qkv(size_t(T) * 3 * kHs), h_out(size_t(T) * kHs), h_dout(size_t(T) * kHs),
      h_dqkv(size_t(T) * 3 * kHs);
  DeviceBuffer<float> h_lse(T), h_scratch(T);
  std::vector<bf16> one_qkv(size_t(T) * 3 * kHs), one_dout(size_t(T) * kHs);
  int mismatched = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      for (int t = 0; t < T; t++)
        for (int d = 0; d < kHs; d++) {
          for (int part = 0; part < 3; part++)
            one_qkv[(size_t(t) * 3 + part) * kHs + d] = qkv[(size_t(b) * T + t) * 3 * C + part * C + h * kHs + d];
          one_dout[size_t(t) * kHs + d] = dout[(size_t(b) * T + t) * C + h * kHs + d];
        }
      h_qkv.upload(one_qkv);
      h_dout.upload(one_dout);
      flash_attention_forward(h_out.get(), h_lse.get(), h_qkv.get(), 1, T, 1, true, 0);
      flash_attention_backward(h_dqkv.get(), h_dout.get(), h_out.get(), h_lse.get(), h_qkv.get(), h_scratch.get(), 1, T,
                               1, true, 0);
      const std::vector<bf16> o1 = h_out.download(), g1 = h_dqkv.download();
      const std::vector<float> l1 = h_lse.download();
      bool same = std::memcmp(l1.data(), &lse[(size_t(b) * NH + h) * T], size_t(T) * 4) == 0;
      for (int t = 0; t < T && same; t++) {
        same = std::memcmp(&o1[size_t(t) * kHs], &out[(size_t(b) * T + t) * C + h * kHs], kHs * sizeof(bf16)) == 0;
        for (int part = 0; part < 3 && same; part++)
          same = std::memcmp(&g1[(size_t(t) * 3 + part) * kHs], &dqkv[(size_t(b) * T + t) * 3 * C + part * C + h * kHs],
                             kHs * sizeof(bf16)) == 0;
      }
      if (!same) mismatched++;
    }
  EXPECT_EQ(mismatched, 0) << "heads whose batched results differ from a single-head run";
}

TEST_F(FlashAttention, RejectsBadShapes) {
  DeviceBuffer<bf16> buf(3 * 64);
  DeviceBuffer<float> f(4);
  expect_user_error([&] { flash_attention_forward(buf.get(), f.get(), buf.get(), 1, 1, 0, true, 0); }, "at least 1");
  expect_user_error([&] { flash_attention_forward(buf.get(), f.get(), buf.get(), 1, 0, 1, true, 0); }, "at least 1");
  expect_user_error(
      [&] { flash_attention_backward(buf.get(), buf.get(), buf.get(), f.get(), buf.get(), f.get(), 0, 1, 1, true, 0); },
      "at least 1");
  expect_user_error([&] { flash_attention_forward(buf.get() + 1, f.get(), buf.get(), 1, 1, 1, true, 0); }, "aligned");
  DropoutArgs no_counter;
  no_counter.threshold = dropout_threshold(0.1f);
  no_counter.scale = dropout_scale(no_counter.threshold);
  expect_user_error([&] { flash_attention_forward(buf.get(), f.get(), buf.get(), 1, 1, 1, true, 0, no_counter); },
                    "counter");
}
