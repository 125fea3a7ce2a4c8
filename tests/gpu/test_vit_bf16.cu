// The mixed-precision ViT and its image kernels against double-precision CPU references: patches cut from
// bytes (normalised; mixup and cutmix with the reversed batch), the token assembly and its backward, then
// the whole model (logits, loss, every gradient) against the CPU reference ViT (models/vit_ref) with hard
// labels and with soft targets, and bit-identical repeats. Tolerances as in test_gpt2_bf16.
#include <cmath>
#include <cstring>
#include <random>

#include "common/cuda_check.h"
#include "kernels/patch_embed.h"
#include "models/vit_bf16.h"
#include "models/vit_ref.h"
#include "tests/gpu/bf16_test_util.h"
#include "tests/test_util.h"

namespace {
class VitBf16Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

std::vector<uint8_t> random_pixels(size_t n, uint32_t seed) {
  std::mt19937 r(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(r() & 255u);
  return v;
}

// The normalised, mixed images as the model sees them, NCHW (the reference's input), in double.
std::vector<float> host_images(const std::vector<uint8_t>& px, const ImageGeometry& g, const ImageNorm& n,
                               const ImageMix& mix) {
  std::vector<float> out(size_t(g.B) * g.channels * g.H * g.W);
  auto value = [&](int b, int y, int x, int c) {
    return (double(px[((size_t(b) * g.H + y) * g.W + x) * g.channels + c]) / 255.0 - n.mean[c]) / n.std[c];
  };
  for (int b = 0; b < g.B; b++)
    for (int c = 0; c < g.channels; c++)
      for (int y = 0; y < g.H; y++)
        for (int x = 0; x < g.W; x++) {
          double v = value(b, y, x, c);
          const int partner = g.B - 1 - b;
          if (mix.mode == ImageMix::kMixup) v = mix.lambda * v + (1.0 - mix.lambda) * value(partner, y, x, c);
          if (mix.mode == ImageMix::kCutmix && y >= mix.y0 && y < mix.y1 && x >= mix.x0 && x < mix.x1)
            v = value(partner, y, x, c);
          out[((size_t(b) * g.channels + c) * g.H + y) * g.W + x] = float(v);
        }
  return out;
}

PixelNorm norm_of(const ImageNorm& n) {
  PixelNorm t;
  for (int c = 0; c < 3; c++) {
    t.mean[c] = n.mean[c];
    t.inv_std[c] = 1.0f / n.std[c];
  }
  return t;
}

std::vector<ImageMix> mixes() {
  ImageMix mixup, cutmix;
  mixup.mode = ImageMix::kMixup;
  mixup.lambda = 0.7f;
  cutmix.mode = ImageMix::kCutmix;
  cutmix.y0 = 1;
  cutmix.y1 = 6;
  cutmix.x0 = 2;
  cutmix.x1 = 8;
  return {ImageMix(), mixup, cutmix};
}
}  // namespace

// Patch rows against the images the reference sees, for 1 and 3 channels and every mix; then the token
// assembly and its backward against sums in double.
TEST_F(VitBf16Gpu, PatchAndTokenKernels) {
  for (int channels : {1, 3})
    for (const ImageMix& mix : mixes()) {
      SCOPED_TRACE(str_cat("channels ", channels, " mix ", int(mix.mode)));
      const ImageGeometry g{3, 8, 12, channels, 4};
      ImageNorm norm;
      const std::vector<uint8_t> px = random_pixels(size_t(g.B) * g.H * g.W * channels, 7);
      const std::vector<float> img = host_images(px, g, norm, mix);
      DeviceBuffer<uint8_t> dpx(px.size());
      dpx.upload(px);
      const int P = g.patches(), K = g.patch_dim();
      DeviceBuffer<bf16> rows(size_t(g.B) * P * K);
      DeviceBuffer<ImageMix> dmix(1);
      dmix.upload(&mix, 1);
      image_patches(rows.get(), dpx.get(), g, norm_of(norm), dmix.get(), 0);
      std::vector<double> want(size_t(g.B) * P * K);
      for (int b = 0; b < g.B; b++)
        for (int k = 0; k < P; k++)
          for (int c = 0; c < channels; c++)
            for (int ky = 0; ky < g.patch; ky++)
              for (int kx = 0; kx < g.patch; kx++) {
                const int y = (k / g.grid_w()) * g.patch + ky, x = (k % g.grid_w()) * g.patch + kx;
                want[(size_t(b) * P + k) * K + size_t(c * g.patch + ky) * g.patch + kx] =
                    img[((size_t(b) * channels + c) * g.H + y) * g.W + x];
              }
      EXPECT_LT(rel_error(from_dev(rows), want), 4e-3);
    }
  const int B = 3, P = 6, C = 64, T = P + 1;
  const auto proj = randv(size_t(B) * P * C, 1.0f, 1), cls = randv(size_t(C), 1.0f, 2),
             pos = randv(size_t(T) * C, 1.0f, 3);
  const auto dx = randv(size_t(B) * T * C, 1.0f, 4);
  DeviceBuffer<bf16> dproj_in = to_dev(proj), dcls_in = to_dev(cls), dpos_in = to_dev(pos), ddx = to_dev(dx);
  DeviceBuffer<bf16> x(size_t(B) * T * C), dproj(size_t(B) * P * C);
  tokens_forward(x.get(), dproj_in.get(), dcls_in.get(), dpos_in.get(), B, P, C, 0);
  std::vector<double> wx(size_t(B) * T * C), wpos(size_t(T) * C, 0.5), wcls(size_t(C), 0.25), wdproj(proj.size());
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        const size_t i = (size_t(b) * T + t) * C + c;
        wx[i] = (t == 0 ? cls[size_t(c)] : proj[(size_t(b) * P + t - 1) * C + c]) + double(pos[size_t(t) * C + c]);
        wpos[size_t(t) * C + c] += dx[i];
        if (t == 0) wcls[size_t(c)] += dx[i];
        if (t > 0) wdproj[(size_t(b) * P + t - 1) * C + c] = dx[i];
      }
  EXPECT_LT(rel_error(from_dev(x), wx), 4e-3) << "tokens forward";
  DeviceBuffer<float> gpos(size_t(T) * C);
  DeviceBuffer<float> gcls{size_t(C)};
  std::vector<float> half(size_t(T) * C, 0.5f), quarter(size_t(C), 0.25f);
  gpos.upload(half);  // the backward accumulates
  gcls.upload(quarter);
  tokens_backward(gcls.get(), gpos.get(), dproj.get(), ddx.get(), B, P, C, 0);
  EXPECT_LT(rel_error(gpos.download(), wpos), 1e-6) << "position gradient";
  EXPECT_LT(rel_error(gcls.download(), wcls), 1e-6) << "cls gradient";
  EXPECT_EQ(rel_error(from_dev(dproj), wdproj), 0.0) << "patch gradient rows";
}

namespace {
struct VitRun {
  std::vector<float> logits, grads;
  float loss = 0;
};
VitRun run_vit(VitBf16& m, Arena& arena, const Batch& batch) {
  VitRun r;
  arena.zero_grads(0);
  m.set_batch(batch, 0);
  m.forward(0);
  r.logits.resize(size_t(m.B()) * size_t(m.shape().classes));
  m.logits_to_host(r.logits.data());
  m.loss_and_dlogits(1.0f, 0);
  m.backward(0);
  CUDA_CHECK(cudaMemcpy(&r.loss, m.d_loss(), 4, cudaMemcpyDeviceToHost));
  r.grads.resize(size_t(arena.table().total_elems()));
  CUDA_CHECK(cudaMemcpy(r.grads.data(), arena.grads(), r.grads.size() * 4, cudaMemcpyDeviceToHost));
  return r;
}

// Label-smoothed one-hot rows mixed with the reversed batch's, as the loader makes them.
std::vector<float> soft_targets(const std::vector<int>& y, int classes, float lambda) {
  const int B = int(y.size());
  std::vector<float> t(size_t(B) * classes, 0.01f);
  for (int b = 0; b < B; b++) {
    t[size_t(b) * classes + y[size_t(b)]] += lambda * (1.0f - 0.01f * classes);
    t[size_t(b) * classes + y[size_t(B - 1 - b)]] += (1.0f - lambda) * (1.0f - 0.01f * classes);
  }
  return t;
}
}  // namespace

TEST_F(VitBf16Gpu, ModelMatchesCpuReference) {
  VitShape tiny = vit_shape("vit-test");  // 3 channels, 8 x 8 in 4 x 4 patches: 5 tokens
  VitShape fm = vit_shape("vit-test");    // Fashion-MNIST-like: 1 channel, 28 x 28 in 4 x 4 patches: 50 tokens
  fm.channels = 128;
  fm.heads = 2;
  fm.image = 28;
  fm.in_chans = 1;
  fm.separate_qkv = true;
  for (const VitShape& s : {tiny, fm})
    for (const ImageMix& mix : mixes()) {
      const bool soft = mix.mode != ImageMix::kNone;
      SCOPED_TRACE(str_cat("image ", s.image, " channels ", s.in_chans, " mix ", int(mix.mode)));
      const int B = 4;
      const ParamTable table = vit_param_table(s);
      std::vector<float> p = vit_init(table, s, 5);
      for (auto& v : p) v = bf16_round(v);  // the bf16 model sees rounded weights: so does the reference
      Arena arena(table, true);
      for (const auto& t : table.tensors()) arena.set_param(t.index, &p[size_t(t.offset)]);
      ImageNorm norm;
      VitBf16 m(s, arena, B, norm);
      const ImageGeometry g{B, s.image, s.image, s.in_chans, s.patch};
      const std::vector<uint8_t> px = random_pixels(size_t(B) * s.image * s.image * s.in_chans, 9);
      std::vector<int> y(B);
      for (int b = 0; b < B; b++) y[size_t(b)] = (3 * b + 1) % s.classes;
      const std::vector<float> st = soft_targets(y, s.classes, mix.mode == ImageMix::kMixup ? mix.lambda : 0.6f);
      Batch batch;
      batch.pixels = px.data();
      batch.targets = y.data();
      batch.soft_targets = soft ? st.data() : nullptr;
      batch.mix = &mix;
      const VitRun r = run_vit(m, arena, batch), again = run_vit(m, arena, batch);

      VitRef ref(s, table);
      std::vector<double> pd(p.begin(), p.end());
      const double loss = ref.forward(pd, host_images(px, g, norm, mix), y, soft ? &st : nullptr, B);
      const std::vector<double> g_ref = ref.backward(pd);
      EXPECT_LT(rel_error(r.logits, ref.logits()), 2e-2) << "logits";
      EXPECT_NEAR(r.loss, loss, 1e-2 * loss);
      double all = 0, worst = 0;
      for (double v : g_ref) all += v * v;
      for (const auto& t : table.tensors()) {
        std::vector<float> gg(r.grads.begin() + t.offset, r.grads.begin() + t.offset + t.numel);
        std::vector<double> w(g_ref.begin() + t.offset, g_ref.begin() + t.offset + t.numel);
        double rn = 0;
        for (double v : w) rn += v * v;
        if (std::sqrt(rn) < 1e-3 * std::sqrt(all)) continue;  // e.g. the key bias: bf16 noise only
        const double e = rel_error(gg, w);
        worst = std::max(worst, e);
        EXPECT_LT(e, 5e-2) << t.name;
      }
      std::printf("[ info ] bf16 ViT vs CPU reference (image %d, mix %d): loss %.5f vs %.5f, worst gradient %.3g\n",
                  s.image, int(mix.mode), double(r.loss), loss, worst);
      EXPECT_EQ(std::memcmp(r.grads.data(), again.grads.data(), r.grads.size() * 4), 0) << "not reproducible";
    }
}

// The hook: blocks L-1, ..., 0, then -1, as in GPT-2.
TEST_F(VitBf16Gpu, BlockHookOrder) {
  const VitShape s = vit_shape("vit-test");
  const ParamTable table = vit_param_table(s);
  Arena arena(table, true);
  const std::vector<float> p = vit_init(table, s, 1);
  for (const auto& t : table.tensors()) arena.set_param(t.index, &p[size_t(t.offset)]);
  VitBf16 m(s, arena, 2);
  std::vector<int> order;
  m.set_block_hook([&](int block, cudaStream_t) { order.push_back(block); });
  const std::vector<uint8_t> px = random_pixels(size_t(2) * 8 * 8 * 3, 1);
  const int y[2] = {1, 2};
  Batch batch;
  batch.pixels = px.data();
  batch.targets = y;
  run_vit(m, arena, batch);
  EXPECT_EQ(order, (std::vector<int>{1, 0, -1}));
}
