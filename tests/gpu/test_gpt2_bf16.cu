// The mixed-precision GPT-2 and its kernels against double-precision CPU references: cuBLASLt matmuls
// with each fused epilogue, LayerNorm, the fused cross-entropy, then the whole model (logits, loss,
// every gradient) against the CPU reference model and bit-identical repeats. Tolerances are relative
// to each tensor's norm and sized for bf16 storage (8 significant bits) with fp32 accumulation.
#include <cmath>
#include <cstring>
#include <random>

#include "common/bf16_host.h"
#include "common/cuda_check.h"
#include "kernels/column_sums.h"
#include "kernels/crossentropy.h"
#include "kernels/layernorm.h"
#include "kernels/matmul_lt.h"
#include "models/gpt2.h"
#include "models/model_tables.h"
#include "models/ref_ops.h"
#include "tests/gpu/bf16_test_util.h"
#include "tests/gpu/tiny_gpt2_case.h"
#include "tests/test_util.h"

namespace {
class Gpt2Bf16Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

}  // namespace

TEST_F(Gpt2Bf16Gpu, MatmulEpilogues) {
  const int N = 50, I = 64, O = 96;
  const auto x = randv(size_t(N) * I, 1.0f, 1), W = randv(size_t(O) * I, 0.2f, 2), b = randv(size_t(O), 0.5f, 3);
  const auto res = randv(size_t(N) * O, 1.0f, 4), dy = randv(size_t(N) * O, 1.0f, 5);
  DeviceBuffer<bf16> dx = to_dev(x), dW = to_dev(W), dbias = to_dev(b), dres = to_dev(res), ddy = to_dev(dy);
  DeviceBuffer<bf16> y(size_t(N) * O), pre(size_t(N) * O), gx(size_t(N) * I);
  std::vector<double> lin(size_t(N) * O);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++) {
      double s = b[size_t(o)];
      for (int i = 0; i < I; i++) s += double(x[size_t(n) * I + i]) * W[size_t(o) * I + i];
      lin[size_t(n) * O + o] = s;
    }
  LtMatmul mm;
  std::vector<double> want(lin.size());
  // bias
  mm.forward(y.get(), O, dx.get(), I, dW.get(), dbias.get(), N, I, O, 0);
  EXPECT_LT(rel_error(from_dev(y), lin), 8e-3) << "bias epilogue";
  // bias + residual
  mm.forward(y.get(), O, dx.get(), I, dW.get(), dbias.get(), N, I, O, 0, dres.get());
  for (size_t k = 0; k < want.size(); k++) want[k] = lin[k] + res[k];
  EXPECT_LT(rel_error(from_dev(y), want), 8e-3) << "residual accumulate";
  // GELU with the pre-activation kept
  mm.forward(y.get(), O, dx.get(), I, dW.get(), dbias.get(), N, I, O, 0, nullptr, pre.get());
  EXPECT_LT(rel_error(from_dev(pre), lin), 8e-3) << "GELU aux (pre-activation)";
  for (size_t k = 0; k < want.size(); k++) want[k] = ref_gelu_tanh(lin[k]);
  EXPECT_LT(rel_error(from_dev(y), want), 1e-2) << "GELU epilogue";
  // dx = dy W, then with the GELU gradient of `pre`
  std::vector<double> wdx(size_t(N) * I), wdg(size_t(N) * O);
  for (int n = 0; n < N; n++)
    for (int i = 0; i < I; i++) {
      double s = 0;
      for (int o = 0; o < O; o++) s += double(dy[size_t(n) * O + o]) * W[size_t(o) * I + i];
      wdx[size_t(n) * I + i] = s;
    }
  mm.backward_dx(gx.get(), I, false, ddy.get(), O, dW.get(), N, I, O, 0);
  EXPECT_LT(rel_error(from_dev(gx), wdx), 8e-3) << "dx";
  const std::vector<float> gx1 = from_dev(gx);
  mm.backward_dx(gx.get(), I, true, ddy.get(), O, dW.get(), N, I, O, 0);
  for (auto& v : wdx) v *= 2;
  EXPECT_LT(rel_error(from_dev(gx), wdx), 8e-3) << "dx accumulate";
  // DGELU: a (N, O) -> (N, O) matmul with W2 (O, O) so the aux shape matches the output
  const auto W2 = randv(size_t(O) * O, 0.2f, 6);
  DeviceBuffer<bf16> dW2 = to_dev(W2), g2(size_t(N) * O);
  const std::vector<float> pre_h = from_dev(pre);
  for (int n = 0; n < N; n++)
    for (int i = 0; i < O; i++) {
      double s = 0;
      for (int o = 0; o < O; o++) s += double(dy[size_t(n) * O + o]) * W2[size_t(o) * O + i];
      wdg[size_t(n) * O + i] = s * ref_gelu_tanh_grad(pre_h[size_t(n) * O + i]);
    }
  mm.backward_dx(g2.get(), O, false, ddy.get(), O, dW2.get(), N, O, O, 0, pre.get());
  EXPECT_LT(rel_error(from_dev(g2), wdg), 1e-2) << "DGELU epilogue";
  // dW += dy^T x in fp32, twice
  DeviceBuffer<float> gw(size_t(O) * I);
  gw.zero();
  mm.backward_dw(gw.get(), ddy.get(), O, dx.get(), I, N, I, O, 0);
  mm.backward_dw(gw.get(), ddy.get(), O, dx.get(), I, N, I, O, 0);
  std::vector<double> wdw(size_t(O) * I);
  for (int o = 0; o < O; o++)
    for (int i = 0; i < I; i++) {
      double s = 0;
      for (int n = 0; n < N; n++) s += double(dy[size_t(n) * O + o]) * x[size_t(n) * I + i];
      wdw[size_t(o) * I + i] = 2 * s;
    }
  EXPECT_LT(rel_error(gw.download(), wdw), 1e-5) << "dW (fp32 accumulate of exact bf16 products)";
}

namespace {
void check_layernorm(int N, int C) {
  const auto x = randv(size_t(N) * C, 2.0f, 7), w = randv(size_t(C), 1.0f, 8), b = randv(size_t(C), 1.0f, 9);
  const auto dy = randv(size_t(N) * C, 1.0f, 10), d0 = randv(size_t(N) * C, 1.0f, 11);
  DeviceBuffer<bf16> dx_ = to_dev(x), dw_ = to_dev(w), db_ = to_dev(b), ddy = to_dev(dy), dres = to_dev(d0),
                     y(size_t(N) * C);
  DeviceBuffer<float> mean{size_t(N)}, rstd{size_t(N)}, scratch{column_sums_scratch_floats(C)}, gw{size_t(C)},
      gb{size_t(C)}, bias{size_t(C)}, dsum{size_t(C)};
  gw.zero();
  gb.zero();
  bias.zero();
  dsum.zero();
  layernorm_forward(y.get(), mean.get(), rstd.get(), dx_.get(), dw_.get(), db_.get(), N, C, kGpt2LnEps, 0);
  layernorm_backward(dres.get(), gw.get(), gb.get(), ddy.get(), dx_.get(), dw_.get(), mean.get(), rstd.get(), N, C,
                     scratch.get(), 0, dsum.get());
  bias_backward(bias.get(), ddy.get(), C, N, C, scratch.get(), 0);
  std::vector<double> wy(size_t(N) * C), wdx(size_t(N) * C), wgw(static_cast<size_t>(C)), wgb(static_cast<size_t>(C));
  for (int n = 0; n < N; n++) {
    const float* xr = &x[size_t(n) * C];
    const float* g = &dy[size_t(n) * C];
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += xr[c];
    m /= C;
    for (int c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
    const double r = 1 / std::sqrt(v / C + 1e-5);
    double s1 = 0, s2 = 0;
    for (int c = 0; c < C; c++) {
      s1 += g[c] * w[size_t(c)];
      s2 += g[c] * w[size_t(c)] * (xr[c] - m) * r;
    }
    for (int c = 0; c < C; c++) {
      const double xh = (xr[c] - m) * r;
      wy[size_t(n) * C + c] = xh * w[size_t(c)] + b[size_t(c)];
      wdx[size_t(n) * C + c] = d0[size_t(n) * C + c] + r * (g[c] * w[size_t(c)] - s1 / C - xh * s2 / C);
      wgw[size_t(c)] += g[c] * xh;
      wgb[size_t(c)] += g[c];
    }
  }
  EXPECT_LT(rel_error(from_dev(y), wy), 8e-3) << "LayerNorm forward";
  EXPECT_LT(rel_error(from_dev(dres), wdx), 8e-3) << "LayerNorm dx (accumulated into the residual gradient)";
  EXPECT_LT(rel_error(gw.download(), wgw), 1e-5) << "LayerNorm dw";
  EXPECT_LT(rel_error(gb.download(), wgb), 1e-6) << "LayerNorm db";
  EXPECT_LT(rel_error(bias.download(), wgb), 1e-6) << "bias gradient";
  std::vector<double> wsum(static_cast<size_t>(C));
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) wsum[size_t(c)] += wdx[size_t(n) * C + c];
  EXPECT_LT(rel_error(dsum.download(), wsum), 8e-3) << "column sums of the updated input gradient";
}

}  // namespace

// Shapes: one row per block; many rows per block (not a multiple of the rows loaded at once) and 512+
// column-sum splits; a block of one partly used warp (C = 136); GPT-2's widths 1024 (355M) and 1600 (1558M).
TEST_F(Gpt2Bf16Gpu, LayerNormAndColumnSums) {
  for (const auto& shape :
       {std::make_pair(70, 136), std::make_pair(5000, 136), std::make_pair(3000, 1024), std::make_pair(2053, 1600)}) {
    SCOPED_TRACE(testing::Message() << "N=" << shape.first << " C=" << shape.second);
    check_layernorm(shape.first, shape.second);
  }
}

namespace {
// gelu_bias_backward and bias_backward over (N, cols) rows of stride ld, against double sums.
void check_gelu_bias(int N, int cols, int ld) {
  const auto d0 = randv(size_t(N) * ld, 1.0f, 21), pre = randv(size_t(N) * ld, 2.0f, 22);
  DeviceBuffer<bf16> dd = to_dev(d0), dpre = to_dev(pre);
  DeviceBuffer<float> db{size_t(cols)}, plain{size_t(cols)}, scratch{column_sums_scratch_floats(cols / 4)};
  db.zero();
  plain.zero();
  bias_backward(plain.get(), dd.get(), ld, N, cols, scratch.get(), 0);
  gelu_bias_backward(db.get(), dd.get(), dpre.get(), ld, N, cols, scratch.get(), 0);
  const std::vector<float> got = from_dev(dd);
  std::vector<double> want(size_t(N) * cols), got_c(size_t(N) * cols), wdb(static_cast<size_t>(cols)),
      wplain(static_cast<size_t>(cols));
  for (int n = 0; n < N; n++)
    for (int c = 0; c < cols; c++) {
      const size_t i = size_t(n) * ld + size_t(c), j = size_t(n) * cols + size_t(c);
      want[j] = d0[i] * ref_gelu_tanh_grad(pre[i]);
      got_c[j] = got[i];
      wdb[size_t(c)] += want[j];
      wplain[size_t(c)] += d0[i];
      if (c == cols - 1) EXPECT_EQ(got[i + 1], d0[i + 1]) << "padding column written, row " << n;
    }
  EXPECT_LT(rel_error(plain.download(), wplain), 1e-6) << "column sums";
  EXPECT_LT(rel_error(got_c, want), 8e-3) << "d * gelu'(pre)";
  EXPECT_LT(rel_error(db.download(), wdb), 8e-3) << "bias gradient";
}
}  // namespace

// Rows not a multiple of the kernel's 8-row batches; a padded stride; widths a multiple of 8 and not.
TEST_F(Gpt2Bf16Gpu, GeluBiasBackward) {
  for (const auto& shape : {std::make_pair(520, 528), std::make_pair(522, 530)}) {
    SCOPED_TRACE(testing::Message() << "cols=" << shape.first << " ld=" << shape.second);
    check_gelu_bias(301, shape.first, shape.second);
  }
}

TEST_F(Gpt2Bf16Gpu, CrossEntropy) {
  const int N = 6, V = 203, ld = 208;  // V not a multiple of 8: the row tail takes the scalar path
  auto z = randv(size_t(N) * ld, 3.0f, 12);
  std::vector<int> tg = {0, 202, 7, 100, 199, 55};
  DeviceBuffer<bf16> dz = to_dev(z);
  DeviceBuffer<float> loss{size_t(N)};
  DeviceBuffer<int> dt{size_t(N)};
  dt.upload(tg);
  const float scale = 0.25f;
  crossentropy_forward_backward(dz.get(), ld, loss.get(), dt.get(), N, V, scale, 0);
  const std::vector<float> got = from_dev(dz), gl = loss.download();
  for (int n = 0; n < N; n++) {
    double m = -1e300, s = 0;
    for (int v = 0; v < V; v++) m = std::max(m, double(z[size_t(n) * ld + v]));
    for (int v = 0; v < V; v++) s += std::exp(z[size_t(n) * ld + v] - m);
    const double lse = m + std::log(s);
    EXPECT_NEAR(gl[size_t(n)], lse - z[size_t(n) * ld + tg[size_t(n)]], 1e-4) << "row " << n;
    std::vector<double> want(static_cast<size_t>(V));
    std::vector<float> g(static_cast<size_t>(V));
    for (int v = 0; v < V; v++) {
      want[size_t(v)] = (std::exp(z[size_t(n) * ld + v] - lse) - (v == tg[size_t(n)])) * scale;
      g[size_t(v)] = got[size_t(n) * ld + v];
    }
    EXPECT_LT(rel_error(g, want), 8e-3) << "row " << n;
    for (int v = V; v < ld; v++) EXPECT_EQ(got[size_t(n) * ld + v], 0.0f) << "padding must get a zero gradient";
  }
}

// Both q/k/v layouts, both places of the GELU backward (the model's two kernel choices), and dropout
// (which un-fuses the residual adds and the projections' bias gradients).
TEST_F(Gpt2Bf16Gpu, ModelMatchesCpuReference) {
  for (int variant = 0; variant < 6; variant++) {
    const bool separate = (variant & 1) || variant >= 4;
    const std::string gelu = variant & 2 || variant == 5 ? "gelu_backward=kernel" : "gelu_backward=epilogue";
    const float dropout = variant >= 4 ? 0.2f : 0.0f;
    SCOPED_TRACE((separate ? "separate q/k/v, " : "fused qkv, ") + gelu + (dropout > 0 ? ", dropout 0.2" : ""));
    const TinyGpt2Case c = tiny_gpt2_case(128, 2, separate, true, dropout);
    const ParamTable& table = c.table;
    const std::vector<double>& g_ref = c.g_ref;
    Arena arena(table, true);
    for (const auto& t : table.tensors()) arena.set_param(t.index, &c.p[size_t(t.offset)]);
    auto m = make_gpt2("bf16", c.s, arena, c.B, c.T);
    m->set_kernel_choices(gelu);
    ASSERT_EQ(m->kernel_choices(), gelu);
    if (variant == 0) EXPECT_THROW(m->set_kernel_choices("gelu_backward=fast"), UserError);
    std::vector<float> grads[2];
    for (int rep = 0; rep < 2; rep++) {  // the same masks both times
      const TinyGpt2Run r = run_tiny_gpt2(*m, arena, c);
      EXPECT_LT(rel_error(r.logits, c.logits_ref), 2e-2) << "logits";
      EXPECT_NEAR(r.loss, c.loss_ref, 1e-2 * c.loss_ref);
      EXPECT_EQ(r.counter_after, c.dropout_counter + (c.dropout > 0));
      grads[rep] = r.grads;
    }
    double all = 0;
    for (double v : g_ref) all += v * v;
    all = std::sqrt(all);
    double worst = 0;
    for (const auto& t : table.tensors()) {
      std::vector<float> g(grads[0].begin() + t.offset, grads[0].begin() + t.offset + t.numel);
      std::vector<double> w(g_ref.begin() + t.offset, g_ref.begin() + t.offset + t.numel);
      double rn = 0;
      for (double v : w) rn += v * v;
      if (std::sqrt(rn) < 1e-3 * all) continue;  // e.g. the key bias (softmax ignores a shared shift): bf16 noise only
      const double e = rel_error(g, w);
      worst = std::max(worst, e);
      EXPECT_LT(e, 5e-2) << t.name;
    }
    std::printf("[ info ] bf16 model vs CPU reference (%s, %s, dropout %g): worst per-tensor gradient error %.3g\n",
                separate ? "separate" : "fused", gelu.c_str(), double(dropout), worst);
    EXPECT_EQ(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * 4), 0)
        << "gradients are not reproducible";
  }
}

TEST_F(Gpt2Bf16Gpu, FullSizeAgreesWithFp32Model) {
  // d12 at B=2, T=64: the bf16 model's loss and gradients stay close to the fp32 model's, without and
  // with dropout (the same masks in both).
  for (float dropout : {0.0f, 0.1f}) {
    SCOPED_TRACE(dropout);
    Gpt2Shape s = gpt2_shape("d12");
    ParamTable table = gpt2_param_table(s);
    std::vector<float> p = gpt2_init(table, s, 1);
    const int B = 2, T = 64;
    std::vector<int> x(B * T), y(B * T);
    for (int i = 0; i < B * T; i++) {
      x[size_t(i)] = (i * 7919) % 50257;
      y[size_t(i)] = (i * 104729) % 50257;
    }
    std::vector<float> g[2];
    float loss[2];
    for (int k = 0; k < 2; k++) {
      Arena arena(table, k == 0);
      for (const auto& t : table.tensors()) arena.set_param(t.index, &p[size_t(t.offset)]);
      auto m = make_gpt2(k == 0 ? "bf16" : "fp32", s, arena, B, T);
      m->set_dropout(dropout, 3);
      arena.zero_grads(0);
      m->set_batch(x.data(), y.data(), 0);
      m->forward(0);
      m->loss_and_dlogits(1.0f, 0);
      m->backward(0);
      CUDA_CHECK(cudaMemcpy(&loss[k], m->d_loss(), 4, cudaMemcpyDeviceToHost));
      g[k] = arena.get_params_flat();  // sized like the arena
      CUDA_CHECK(cudaMemcpy(g[k].data(), arena.grads(), g[k].size() * 4, cudaMemcpyDeviceToHost));
    }
    EXPECT_NEAR(loss[0], loss[1], 2e-3 * loss[1]);
    const double e = rel_error(g[0], g[1]);
    std::printf("[ info ] d12 bf16 vs fp32, dropout %g: loss %.5f vs %.5f, gradient error %.3g\n", double(dropout),
                loss[0], loss[1], e);
    EXPECT_LT(e, 5e-2);
  }
}

// The gradients of the case's batch, from zero, on the default stream, waited for.
template <class M>
void one_backward(M& m, Arena& arena, const TinyGpt2Case& c) {
  arena.zero_grads(0);
  m.set_batch(c.x.data(), c.y.data(), 0);
  m.forward(0);
  m.loss_and_dlogits(1.0f, 0);
  m.backward(0);
  CUDA_CHECK(cudaDeviceSynchronize());
}

// The per-block backward hook: called for blocks L-1, ..., 0 and then -1, on backward's stream, and at each
// call the block's parameter gradients (everything else's at -1) are already what they are at the end.
TEST_F(Gpt2Bf16Gpu, BlockHookSeesFinalGradients) {
  for (const std::string precision : {"bf16", "fp32"})
    for (float dropout : {0.0f, 0.2f}) {
      SCOPED_TRACE(precision + " dropout " + std::to_string(dropout));
      const TinyGpt2Case c = tiny_gpt2_case(128, 2, true, precision == "bf16", dropout);
      Arena arena(c.table, precision == "bf16");
      for (const auto& t : c.table.tensors()) arena.set_param(t.index, &c.p[size_t(t.offset)]);
      auto m = make_gpt2(precision, c.s, arena, c.B, c.T);
      m->set_dropout(dropout, c.dropout_seed);
      const Gpt2Tensors ix = gpt2_tensors(c.table, c.s);
      const size_t n = size_t(c.table.total_elems());
      DeviceBuffer<float> snap(n * size_t(c.s.layers + 1), "hook snapshots");
      std::vector<int> order;
      m->set_block_hook([&](int block, cudaStream_t s) {
        order.push_back(block);
        float* dst = snap.get() + size_t(block + 1) * n;  // -1 -> slot 0
        CUDA_CHECK(cudaMemcpyAsync(dst, arena.grads(), n * 4, cudaMemcpyDeviceToDevice, s));
      });
      one_backward(*m, arena, c);
      std::vector<int> want;
      for (int l = c.s.layers - 1; l >= -1; l--) want.push_back(l);
      ASSERT_EQ(order, want);
      std::vector<float> final_g(n);
      CUDA_CHECK(cudaMemcpy(final_g.data(), arena.grads(), n * 4, cudaMemcpyDeviceToHost));
      const std::vector<float> all = snap.download();
      auto block_of = [&](int i) {  // the block a tensor belongs to; -1 for the others
        for (int l = 0; l < c.s.layers; l++) {
          const BlockTensors& b = ix.blocks[size_t(l)];
          if (i >= b.ln1w && i <= b.fcprojb) return l;
        }
        return -1;
      };
      for (const auto& t : c.table.tensors()) {
        const float* at_hook = &all[size_t(block_of(t.index) + 1) * n + size_t(t.offset)];
        EXPECT_EQ(std::memcmp(at_hook, &final_g[size_t(t.offset)], size_t(t.numel) * 4), 0)
            << t.name << " changed after its hook";
      }
    }
}

// The MLP hook (bf16 model): called for blocks L-1, ..., 0, each before that block's hook, and at each call
// the block's MLP tensors (block_mlp_list) hold the gradients they hold at the end, with and without dropout.
TEST_F(Gpt2Bf16Gpu, MlpHookSeesFinalMlpGradients) {
  for (float dropout : {0.0f, 0.2f}) {
    SCOPED_TRACE("dropout " + std::to_string(dropout));
    const TinyGpt2Case c = tiny_gpt2_case(128, 2, true, true, dropout);
    Arena arena(c.table, true);
    for (const auto& t : c.table.tensors()) arena.set_param(t.index, &c.p[size_t(t.offset)]);
    auto m = make_gpt2("bf16", c.s, arena, c.B, c.T);
    ASSERT_TRUE(m->calls_mlp_hook());
    m->set_dropout(dropout, c.dropout_seed);
    const Gpt2Tensors ix = gpt2_tensors(c.table, c.s);
    const size_t n = size_t(c.table.total_elems());
    DeviceBuffer<float> snap(n * size_t(c.s.layers), "hook snapshots");
    std::vector<std::string> order;
    m->set_mlp_hook([&](int block, cudaStream_t s) {
      order.push_back("mlp " + std::to_string(block));
      CUDA_CHECK(cudaMemcpyAsync(snap.get() + size_t(block) * n, arena.grads(), n * 4, cudaMemcpyDeviceToDevice, s));
    });
    m->set_block_hook([&](int block, cudaStream_t) { order.push_back("block " + std::to_string(block)); });
    one_backward(*m, arena, c);
    std::vector<std::string> want;
    for (int l = c.s.layers - 1; l >= 0; l--)
      for (const char* k : {"mlp ", "block "}) want.push_back(k + std::to_string(l));
    want.push_back("block -1");
    ASSERT_EQ(order, want);
    std::vector<float> final_g(n);
    CUDA_CHECK(cudaMemcpy(final_g.data(), arena.grads(), n * 4, cudaMemcpyDeviceToHost));
    const std::vector<float> all = snap.download();
    for (int l = 0; l < c.s.layers; l++)
      for (int i : block_mlp_list(ix.blocks[size_t(l)])) {
        const auto& t = c.table[i];
        const float* at_hook = &all[size_t(l) * n + size_t(t.offset)];
        EXPECT_EQ(std::memcmp(at_hook, &final_g[size_t(t.offset)], size_t(t.numel) * 4), 0)
            << t.name << " changed after its MLP hook";
      }
  }
}
