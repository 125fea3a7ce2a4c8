// The kernel options that a second model needs beyond GPT-2 (the ViT: kernels/gelu.h's exact erf GELU,
// soft-target cross-entropy) against the double-precision references of models/ref_ops.h; the tanh
// forward kernel too, and the soft-target cross-entropy with one-hot targets against the hard-target one.
#include <cmath>
#include <random>

#include "kernels/column_sums.h"
#include "kernels/crossentropy.h"
#include "kernels/gelu.h"
#include "models/ref_ops.h"
#include "tests/gpu/bf16_test_util.h"
#include "tests/test_util.h"

namespace {
class GenericKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

double ref_gelu(Gelu kind, double u) { return kind == Gelu::kErf ? ref_gelu_erf(u) : ref_gelu_tanh(u); }
double ref_gelu_grad(Gelu kind, double u) { return kind == Gelu::kErf ? ref_gelu_erf_grad(u) : ref_gelu_tanh_grad(u); }
}  // namespace

TEST_F(GenericKernelsGpu, GeluForwardBothForms) {
  const int N = 37, cols = 130, ld = 136;  // padded stride: the padding must stay untouched
  const auto pre = randv(size_t(N) * ld, 2.0f, 31);
  for (Gelu kind : {Gelu::kTanh, Gelu::kErf}) {
    SCOPED_TRACE(kind == Gelu::kErf ? "erf" : "tanh");
    DeviceBuffer<bf16> dpre = to_dev(pre), dy = to_dev(std::vector<float>(pre.size(), 7.0f));
    gelu_forward(dy.get(), dpre.get(), ld, N, cols, kind, 0);
    const std::vector<float> got = from_dev(dy);
    std::vector<double> want(size_t(N) * cols), got_c(size_t(N) * cols);
    double other = 0;  // the other form's largest distance (the tolerance below is bf16's, larger than it)
    for (int n = 0; n < N; n++)
      for (int c = 0; c < ld; c++) {
        const size_t i = size_t(n) * ld + size_t(c), j = size_t(n) * cols + size_t(c);
        if (c >= cols) {
          EXPECT_EQ(got[i], 7.0f) << "padding written, row " << n;
          continue;
        }
        want[j] = ref_gelu(kind, pre[i]);
        got_c[j] = got[i];
        other = std::max(other, std::abs(ref_gelu(kind == Gelu::kErf ? Gelu::kTanh : Gelu::kErf, pre[i]) - want[j]));
      }
    EXPECT_LT(rel_error(got_c, want), 4e-3);
    EXPECT_GT(other, 1e-4);
    // In place (y == pre): the same values, the padding still holding pre.
    gelu_forward(dpre.get(), dpre.get(), ld, N, cols, kind, 0);
    std::vector<float> want_in_place = got;
    for (int n = 0; n < N; n++)
      for (int c = cols; c < ld; c++) want_in_place[size_t(n) * ld + size_t(c)] = pre[size_t(n) * ld + size_t(c)];
    EXPECT_EQ(from_dev(dpre), want_in_place);
  }
}

// Contiguous rows take the 16-byte path: the same values as the pair kernel (elementwise), checked against
// a strided call on the same data.
TEST_F(GenericKernelsGpu, GeluForwardContiguousEqualsStrided) {
  const int N = 33, cols = 264;
  const auto pre = randv(size_t(N) * cols, 2.0f, 32);
  for (Gelu kind : {Gelu::kTanh, Gelu::kErf}) {
    DeviceBuffer<bf16> dpre = to_dev(pre), flat(pre.size()), strided(pre.size());
    gelu_forward(flat.get(), dpre.get(), cols, N, cols, kind, 0);         // ld == cols: vectorised
    gelu_forward(strided.get(), dpre.get(), cols, N, cols - 2, kind, 0);  // ld != cols: pairs
    gelu_forward(strided.get() + cols - 2, dpre.get() + cols - 2, cols, N, 2, kind, 0);
    EXPECT_EQ(from_dev(flat), from_dev(strided)) << (kind == Gelu::kErf ? "erf" : "tanh");
    std::vector<double> want(pre.size());
    for (size_t i = 0; i < pre.size(); i++) want[i] = ref_gelu(kind, pre[i]);
    EXPECT_LT(rel_error(from_dev(flat), want), 4e-3);
  }
}

TEST_F(GenericKernelsGpu, GeluBiasBackwardErf) {
  const int N = 301, cols = 520, ld = 528;
  const auto d0 = randv(size_t(N) * ld, 1.0f, 21), pre = randv(size_t(N) * ld, 2.0f, 22);
  DeviceBuffer<bf16> dd = to_dev(d0), dpre = to_dev(pre);
  DeviceBuffer<float> db{size_t(cols)}, scratch{column_sums_scratch_floats(cols / 4)};
  db.zero();
  gelu_bias_backward(db.get(), dd.get(), dpre.get(), ld, N, cols, scratch.get(), 0, Gelu::kErf);
  const std::vector<float> got = from_dev(dd);
  std::vector<double> want(size_t(N) * cols), tanh_form(size_t(N) * cols), got_c(size_t(N) * cols),
      wdb(static_cast<size_t>(cols));
  for (int n = 0; n < N; n++)
    for (int c = 0; c < cols; c++) {
      const size_t i = size_t(n) * ld + size_t(c), j = size_t(n) * cols + size_t(c);
      want[j] = d0[i] * ref_gelu_erf_grad(pre[i]);
      tanh_form[j] = d0[i] * ref_gelu_tanh_grad(pre[i]);
      got_c[j] = got[i];
      wdb[size_t(c)] += want[j];
    }
  EXPECT_LT(rel_error(got_c, want), 4e-3) << "d * gelu'(pre), erf form";
  EXPECT_LT(rel_error(db.download(), wdb), 4e-3) << "bias gradient";
  // The forms differ by ~5e-4 here, under this bf16 tolerance: this test catches a wrong kernel; the tail
  // test below tells the forms apart.
  EXPECT_GT(rel_error(tanh_form, want), 1e-4);
}

// Element by element in the negative tail, where the forms differ by 5-60%: each output within half a bf16
// ulp (its rounding) plus 2e-4 of the exact value, plus what 1 + erf(u / sqrt 2) loses to cancellation in
// float (two ulps of 1, 2.4e-7, times u / 2 in the value, 1/2 in the gradient: it matters below u = -3.5).
// Where the tanh form differs from the erf one by more than that bound (u >= -5) it must fail it.
TEST_F(GenericKernelsGpu, GeluErfTailElementwise) {
  std::vector<float> pre;
  for (float u = -6.0f; u <= -2.5f; u += 1.0f / 64) pre.push_back(bf16_round(u));
  const int N = 1, cols = int(pre.size() / 2 * 2);
  pre.resize(size_t(cols));
  const std::vector<float> ones(pre.size(), 1.0f);
  DeviceBuffer<bf16> dpre = to_dev(pre), dy(pre.size()), dd = to_dev(ones);
  DeviceBuffer<float> db{size_t(cols)}, scratch{column_sums_scratch_floats(cols)};
  db.zero();
  gelu_forward(dy.get(), dpre.get(), cols, N, cols, Gelu::kErf, 0);
  gelu_bias_backward(db.get(), dd.get(), dpre.get(), cols, N, cols, scratch.get(), 0, Gelu::kErf);
  const std::vector<float> y = from_dev(dy), g = from_dev(dd);
  int bad_y = 0, bad_g = 0, tanh_close = 0, tanh_checked = 0;
  auto off = [](double got, double want, double cancel) {
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 7);
    return std::abs(got - want) > 0.5 * ulp + 2e-4 * std::abs(want) + cancel;
  };
  for (size_t i = 0; i < pre.size(); i++) {
    const double u = pre[i], cancel_y = 2.4e-7 * 0.5 * std::abs(u), cancel_g = 2.4e-7 * 0.5;
    bad_y += off(y[i], ref_gelu_erf(u), cancel_y);
    bad_g += off(g[i], ref_gelu_erf_grad(u), cancel_g);
    if (u >= -5.0) {
      tanh_checked++;
      tanh_close += !off(ref_gelu_tanh(u), ref_gelu_erf(u), cancel_y);
    }
  }
  EXPECT_EQ(bad_y, 0) << "forward values off in the tail";
  EXPECT_EQ(bad_g, 0) << "gradient values off in the tail";
  EXPECT_GT(tanh_checked, 100);
  EXPECT_EQ(tanh_close, 0) << "the tanh form would pass here: the test could not tell the forms apart";
}

TEST_F(GenericKernelsGpu, SoftTargetCrossEntropy) {
  const int N = 5, V = 1003, ld = 1008;  // V not a multiple of 8; more columns than threads
  const auto z = randv(size_t(N) * ld, 3.0f, 41);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> t(size_t(N) * V);
  // Row 0: label smoothing 0.1 around class 17; rows 1-3: random distributions; row 4: mass 0.7 (the
  // gradient's mass * softmax term).
  for (int n = 0; n < N; n++) {
    float* tr = t.data() + size_t(n) * V;
    double sum = 0;
    for (int v = 0; v < V; v++) {
      tr[v] = n == 0 ? 0.1f / V + (v == 17 ? 0.9f : 0.0f) : u(rng);
      sum += tr[v];
    }
    const double mass = n == 0 ? sum : n == 4 ? 0.7 : 1.0;
    for (int v = 0; v < V; v++) tr[v] = float(tr[v] / sum * mass);
  }
  DeviceBuffer<bf16> dz = to_dev(z);
  DeviceBuffer<float> loss{size_t(N)}, dt{t.size()};
  dt.upload(t);
  const float scale = 0.5f;
  crossentropy_soft_forward_backward(dz.get(), ld, loss.get(), dt.get(), N, V, scale, 0);
  const std::vector<float> got = from_dev(dz), gl = loss.download();
  for (int n = 0; n < N; n++) {
    std::vector<double> zr(static_cast<size_t>(V)), tr(static_cast<size_t>(V)), want(static_cast<size_t>(V));
    std::vector<float> g(static_cast<size_t>(V));
    for (int v = 0; v < V; v++) {
      zr[size_t(v)] = z[size_t(n) * ld + v];
      tr[size_t(v)] = t[size_t(n) * V + v];
      g[size_t(v)] = got[size_t(n) * ld + v];
    }
    const double wl = ref_crossentropy_soft(zr.data(), tr.data(), want.data(), V);
    for (double& w : want) w *= scale;
    EXPECT_NEAR(gl[size_t(n)], wl, 1e-4 * std::max(1.0, std::abs(wl))) << "row " << n;
    EXPECT_LT(rel_error(g, want), 8e-3) << "row " << n;
    for (int v = V; v < ld; v++) EXPECT_EQ(got[size_t(n) * ld + v], 0.0f) << "padding must get a zero gradient";
  }
}

TEST_F(GenericKernelsGpu, SoftTargetsOneHotEqualHardTargets) {
  const int N = 4, V = 203, ld = 208;
  const auto z = randv(size_t(N) * ld, 3.0f, 51);
  const std::vector<int> tg = {0, 202, 77, 5};
  std::vector<float> t(size_t(N) * V, 0.0f);
  for (int n = 0; n < N; n++) t[size_t(n) * V + size_t(tg[size_t(n)])] = 1.0f;
  DeviceBuffer<bf16> hard = to_dev(z), soft = to_dev(z);
  DeviceBuffer<float> lh{size_t(N)}, ls{size_t(N)}, dt{t.size()};
  DeviceBuffer<int> di{size_t(N)};
  dt.upload(t);
  di.upload(tg);
  crossentropy_forward_backward(hard.get(), ld, lh.get(), di.get(), N, V, 0.25f, 0);
  crossentropy_soft_forward_backward(soft.get(), ld, ls.get(), dt.get(), N, V, 0.25f, 0);
  EXPECT_EQ(from_dev(soft), from_dev(hard)) << "logit gradients";
  EXPECT_EQ(ls.download(), lh.download()) << "losses";
}
