// The CPU reference block on its own: causal and unmasked attention differ exactly where they should, and
// its parameter and input gradients match central finite differences for both sets of options (non-causal,
// erf GELU, fused qkv, MLP width 3C; causal, tanh GELU, separate q/k/v, MLP width 40, dropout).
#include <cmath>
#include <random>

#include "models/ref_block.h"
#include "tests/test_util.h"

namespace {
BlockShape shape(bool gpt_like) {
  BlockShape s;
  s.channels = 16;
  s.heads = 2;
  s.hidden = gpt_like ? 40 : 48;
  s.causal = gpt_like;
  s.ln_eps = gpt_like ? 1e-5f : 1e-6f;
  s.gelu = gpt_like ? Gelu::kTanh : Gelu::kErf;
  s.separate_qkv = gpt_like;
  return s;
}
// One block's table (weights N(0, 0.3), so attention is far from uniform) and its parameters, moved off
// the zero biases and unit gains.
std::vector<double> block_params(const ParamTable& t, uint32_t seed) {
  const std::vector<float> pf = init_params(t, seed);
  std::vector<double> p(pf.begin(), pf.end());
  std::mt19937 rng(seed);
  std::normal_distribution<double> z(0.0, 0.1);
  for (const auto& x : t.tensors())
    for (int64_t i = 0; i < x.numel; i++) p[size_t(x.offset + i)] += z(rng);
  return p;
}
std::vector<double> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = z(rng);
  return v;
}
struct BlockCase {
  BlockShape s;
  ParamTable t;
  BlockTensors ix;
  explicit BlockCase(const BlockShape& shape) : s(shape) { ix = add_block(t, "b.", s, kTimmBlockNames, {0.3f, 0.3f}); }
};
}  // namespace

// With the causal mask, token t's output depends on tokens 0..t only; without it, on all. The last token
// sees everything either way, so its output is the same to the bit.
TEST(RefBlock, CausalAndNonCausalDiffer) {
  BlockShape sc = shape(false), sn = shape(false);
  sc.causal = true;
  const BlockCase k(sn);  // the table does not depend on the mask
  const std::vector<double> p = block_params(k.t, 1);
  const int B = 2, T = 5, C = sn.channels;
  const RefBlock causal(sc, k.ix, k.t), open(sn, k.ix, k.t);
  std::vector<double> xin = random_vec(size_t(B * T * C), 2);
  auto run = [&](const RefBlock& blk, std::vector<double> x) {
    RefBlockActs a;
    blk.forward(p.data(), RefDropout{}, B, T, x.data(), &a);
    return x;
  };
  const std::vector<double> yc = run(causal, xin), yn = run(open, xin);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      double diff = 0;
      for (int c = 0; c < C; c++) diff += std::fabs(yc[size_t((b * T + t) * C + c)] - yn[size_t((b * T + t) * C + c)]);
      if (t == T - 1) {
        EXPECT_EQ(diff, 0.0) << "image " << b;
      } else {
        EXPECT_GT(diff, 1e-3) << "image " << b << " token " << t;
      }
    }
  // Change the last token (not by a constant: LayerNorm would cancel that): the causal block's earlier
  // outputs stay put, the open block's all move.
  const std::vector<double> change = random_vec(size_t(C), 3);
  for (int c = 0; c < C; c++) xin[size_t(((B - 1) * T + T - 1) * C + c)] += change[size_t(c)];
  const std::vector<double> yc2 = run(causal, xin), yn2 = run(open, xin);
  for (int t = 0; t < T - 1; t++)
    for (int c = 0; c < C; c++) {
      const size_t i = size_t(((B - 1) * T + t) * C + c);
      ASSERT_EQ(yc2[i], yc[i]) << "token " << t;
      ASSERT_NE(yn2[i], yn[i]) << "token " << t;
    }
}

// f = sum(out * r): the gradients of every tensor (6 elements each) and of the input (16 elements)
// against central differences, |g - fd| <= 1e-8 + 1e-6 |fd|.
TEST(RefBlock, GradientsMatchFiniteDifferences) {
  for (int gpt_like = 0; gpt_like < 2; gpt_like++) {
    SCOPED_TRACE(gpt_like ? "causal, tanh, separate q/k/v, dropout 0.2" : "non-causal, erf, fused qkv");
    const BlockCase k(shape(gpt_like == 1));
    std::vector<double> p = block_params(k.t, 3);
    const RefBlock blk(k.s, k.ix, k.t, BlockSites{5, 6, 7});
    const RefDropout drop{gpt_like ? 0.2f : 0.0f, 42, 3};
    const int B = 2, T = 4, C = k.s.channels;
    std::vector<double> x = random_vec(size_t(B * T * C), 4);
    const std::vector<double> r = random_vec(x.size(), 5);
    RefBlockActs a;
    auto f = [&]() {
      std::vector<double> y = x;
      blk.forward(p.data(), drop, B, T, y.data(), &a);
      double s = 0;
      for (size_t i = 0; i < y.size(); i++) s += y[i] * r[i];
      return s;
    };
    f();
    std::vector<double> G(p.size(), 0.0), dx = r;
    blk.backward(p.data(), drop, a, dx.data(), G.data());
    std::mt19937 rng(6);
    auto check = [&](std::vector<double>& v, size_t i, double g, const std::string& what) {
      const double h = 1e-5, keep = v[i];
      v[i] = keep + h;
      const double fp = f();
      v[i] = keep - h;
      const double fm = f();
      v[i] = keep;
      const double fd = (fp - fm) / (2 * h);
      ASSERT_NEAR(g, fd, 1e-8 + 1e-6 * std::fabs(fd)) << what;
    };
    for (const auto& t : k.t.tensors())
      for (int probe = 0; probe < 6; probe++) {
        const size_t i = size_t(t.offset) + size_t(rng() % uint64_t(t.numel));
        check(p, i, G[i], t.name);
      }
    for (int probe = 0; probe < 16; probe++) {
      const size_t i = size_t(rng() % uint64_t(x.size()));
      check(x, i, dx[i], "input element " + std::to_string(i));
    }
  }
}
