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
#include "tests/gpu/attention_test_util.h"
#include "tests/test_util.h"

using namespace attention_test;

namespace {
class FlashAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

// One problem on the device: a forward and backward through the kernels under test, with every output
// poisoned first (0xff bytes: NaN in bf16 and fp32, so that an unwritten element shows; or 0x00).
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
  const Errors e = expect_near(got, ref, C);
  std::printf(
      "[flash] B=%d T=%d NH=%d qk_std=%.1f %s p=%.1f  max err / max|ref|: out %.2e  dq %.2e  dk %.2e  dv %.2e;  lse "
      "abs %.2e\n",
      B, T, NH, c.qk_std, c.causal ? "causal" : "full", p, e.out, e.dqkv[0], e.dqkv[1], e.dqkv[2], e.lse);
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
