// The GPU GPT-2 against the CPU reference: logits, loss and every parameter's gradient, for separate
// and fused q/k/v, with and without dropout, and a sequence longer than a warp; bit-identical repeats;
// a 124M-size smoke test.
#include <cmath>
#include <cstring>

#include "common/cuda_check.h"
#include "models/gpt2_fp32.h"
#include "models/model_tables.h"
#include "tests/gpu/tiny_gpt2_case.h"
#include "tests/test_util.h"

namespace {
class Gpt2Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};
}  // namespace

TEST_F(Gpt2Gpu, MatchesCpuReference) {
  for (int variant = 0; variant < 3; variant++) {
    const bool separate = variant != 1;
    SCOPED_TRACE(variant == 0 ? "separate q/k/v" : variant == 1 ? "fused qkv" : "separate q/k/v, dropout 0.2");
    const TinyGpt2Case c = tiny_gpt2_case(32, 4, separate, false, variant == 2 ? 0.2f : 0.0f);
    const ParamTable& table = c.table;
    const std::vector<double>& g_ref = c.g_ref;
    Arena arena(table, false);
    for (const auto& t : table.tensors()) arena.set_param(t.index, &c.p[size_t(t.offset)]);
    Gpt2Fp32 m(c.s, arena, c.B, c.T);
    std::vector<float> grads[2];
    for (int rep = 0; rep < 2; rep++) {  // the same masks both times
      const TinyGpt2Run r = run_tiny_gpt2(m, arena, c);
      EXPECT_LT(rel_error(r.logits, c.logits_ref), 1e-5) << "logits";
      EXPECT_NEAR(r.loss, c.loss_ref, 1e-5 * c.loss_ref);
      EXPECT_EQ(r.counter_after, c.dropout_counter + (c.dropout > 0));  // the next micro-batch draws new masks
      grads[rep] = r.grads;
    }
    double all = 0;
    for (double v : g_ref) all += v * v;
    all = std::sqrt(all);
    for (const auto& t : table.tensors()) {
      double rn = 0, gn = 0;
      for (int64_t i = 0; i < t.numel; i++)
        rn += g_ref[size_t(t.offset + i)] * g_ref[size_t(t.offset + i)],
            gn += double(grads[0][size_t(t.offset + i)]) * grads[0][size_t(t.offset + i)];
      if (std::sqrt(rn) < 1e-7 * all) {  // e.g. the key bias: softmax ignores a shift shared by all keys
        EXPECT_LT(std::sqrt(gn), 1e-5 * all) << t.name << " should have a (numerically) zero gradient";
        continue;
      }
      EXPECT_LT(rel_error(grads[0], g_ref, size_t(t.offset), size_t(t.numel)), 1e-4) << t.name;
    }
    EXPECT_EQ(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * 4), 0)
        << "gradients are not reproducible";
  }
}

TEST_F(Gpt2Gpu, FullSizeSmoke) {
  Gpt2Shape s = gpt2_shape("d12");
  ParamTable table = gpt2_param_table(s);
  Arena arena(table, false);
  std::vector<float> p = gpt2_init(table, s, 1);
  for (const auto& t : table.tensors()) arena.set_param(t.index, &p[size_t(t.offset)]);
  const int B = 2, T = 64;
  Gpt2Fp32 m(s, arena, B, T);
  std::vector<int> x(B * T), y(B * T);
  for (int i = 0; i < B * T; i++) {
    x[size_t(i)] = (i * 7919) % 50257;
    y[size_t(i)] = (i * 104729) % 50257;
  }
  m.set_batch(x.data(), y.data(), 0);
  m.forward(0);
  m.loss_and_dlogits(1.0f, 0);
  m.backward(0);
  float loss;
  CUDA_CHECK(cudaMemcpy(&loss, m.d_loss(), 4, cudaMemcpyDeviceToHost));
  // Logits at init are ~N(0, 768 * 0.02^2), so the expected cross-entropy is ln V + sigma^2 / 2.
  EXPECT_NEAR(loss, std::log(50257.0) + 0.5 * 768 * 0.02 * 0.02, 0.05);
  std::vector<float> g(size_t(table.total_elems()));
  CUDA_CHECK(cudaMemcpy(g.data(), arena.grads(), g.size() * 4, cudaMemcpyDeviceToHost));
  for (float v : g) ASSERT_TRUE(std::isfinite(v));
}
