// The Hopper attention forward and backward (kernels/flash_attention_*_sm90.cu) against the mma.sync kernels, which
// test_flash_attention.cu checks against a double-precision CPU reference (on a Hopper GPU that suite's forward
// is the Hopper kernel itself): out, lse and dqkv bit for bit on the same bf16 inputs,
// causal and not, T below, at and past the 64-key and 128-query tiles, several heads and batches. Every output
// is poisoned first (NaN), so an element left unwritten fails. A control run on other inputs (k and v
// swapped) must differ, so the comparison can fail. Skipped without a GPU of compute capability 9.0 or a
// build for one.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "kernels/flash_attention.h"
#include "kernels/flash_attention_sm90.h"
#include "tests/test_util.h"

namespace {
class FlashAttentionSm90 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
    if (!flash_attention_sm90_available()) GTEST_SKIP() << "not a compute capability 9.0 GPU, or not built for one";
  }
};

struct Shape {
  int B, T, NH;
  bool causal;
};

// q and k of std 2 (scores of std 0.5 after the 1/8 scale, so the softmax is neither flat nor one-hot), v std 1.
std::vector<bf16> random_qkv(const Shape& s, uint32_t seed) {
  const int C = s.NH * 64;
  std::mt19937 rng(seed);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<bf16> x(size_t(s.B) * s.T * 3 * C);
  for (size_t i = 0; i < x.size(); i++)
    x[i] = __float2bfloat16_rn(z(rng) * ((i % (3 * C)) < size_t(2 * C) ? 2.0f : 1.0f));
  return x;
}
// The same with k and v exchanged.
std::vector<bf16> swap_kv(std::vector<bf16> x, const Shape& s) {
  const size_t C = size_t(s.NH) * 64;
  for (size_t row = 0; row < x.size() / (3 * C); row++)
    std::swap_ranges(x.begin() + row * 3 * C + C, x.begin() + row * 3 * C + 2 * C, x.begin() + row * 3 * C + 2 * C);
  return x;
}

struct Result {
  std::vector<float> out, lse;
};
Result forward(const std::vector<bf16>& qkv_host, const Shape& s, bool sm90) {
  const size_t C = size_t(s.NH) * 64, rows = size_t(s.B) * s.T;
  DeviceBuffer<bf16> qkv(qkv_host.size()), out(rows * C);
  DeviceBuffer<float> lse(size_t(s.B) * s.NH * s.T);
  qkv.upload(qkv_host);
  CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
  CUDA_CHECK(cudaMemset(lse.get(), 0xff, lse.bytes()));
  if (sm90)
    flash_attention_forward_sm90(out.get(), lse.get(), qkv.get(), s.B, s.T, s.NH, s.causal, 0);
  else
    flash_attention_forward_mma(out.get(), lse.get(), qkv.get(), s.B, s.T, s.NH, s.causal, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  Result r;
  for (bf16 v : out.download()) r.out.push_back(__bfloat162float(v));
  r.lse = lse.download();
  return r;
}

// max |a - b| / max |b|; NaN anywhere gives infinity.
double rel_max(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); i++) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

const Shape kShapes[] = {{2, 1024, 3, true}, {2, 256, 2, true},  {1, 100, 2, true}, {3, 1, 1, true},
                         {1, 191, 1, true},  {2, 197, 3, false}, {1, 50, 2, false}, {1, 130, 1, false}};

// The two kernels do the same fp32 arithmetic in the same order (the scores' 16-term dot products on the
// tensor cores, the softmax's trees): equal bits.
TEST_F(FlashAttentionSm90, MatchesMmaSyncKernelBitForBit) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(str_cat("B=", s.B, " T=", s.T, " NH=", s.NH, " causal=", s.causal));
    const std::vector<bf16> qkv = random_qkv(s, 11);
    const Result want = forward(qkv, s, false), got = forward(qkv, s, true);
    const double eo = rel_max(got.out, want.out), el = rel_max(got.lse, want.lse);
    std::printf("B=%d T=%d NH=%d %s: out %.2e, lse %.2e\n", s.B, s.T, s.NH, s.causal ? "causal" : "full", eo, el);
    EXPECT_EQ(eo, 0.0);
    EXPECT_EQ(el, 0.0);
  }
}

// The backward (dq, dk, dv) of both paths from the same forward outputs and dout: equal bits.
std::vector<float> backward(const std::vector<bf16>& qkv_host, const Shape& s, bool sm90, uint32_t seed) {
  const size_t C = size_t(s.NH) * 64, rows = size_t(s.B) * s.T;
  std::mt19937 rng(seed);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<bf16> dout_host(rows * C);
  for (bf16& x : dout_host) x = __float2bfloat16_rn(z(rng));
  DeviceBuffer<bf16> qkv(qkv_host.size()), out(rows * C), dout(rows * C), dqkv(qkv_host.size());
  DeviceBuffer<float> lse(size_t(s.B) * s.NH * s.T), scratch(size_t(s.B) * s.NH * s.T);
  qkv.upload(qkv_host);
  dout.upload(dout_host);
  CUDA_CHECK(cudaMemset(dqkv.get(), 0xff, dqkv.bytes()));
  flash_attention_forward_mma(out.get(), lse.get(), qkv.get(), s.B, s.T, s.NH, s.causal, 0);
  if (sm90)
    flash_attention_backward(dqkv.get(), dout.get(), out.get(), lse.get(), qkv.get(), scratch.get(), s.B, s.T, s.NH,
                             s.causal, 0);
  else
    flash_attention_backward_mma(dqkv.get(), dout.get(), out.get(), lse.get(), qkv.get(), scratch.get(), s.B, s.T, s.NH,
                                 s.causal, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> r;
  for (bf16 v : dqkv.download()) r.push_back(__bfloat162float(v));
  return r;
}

TEST_F(FlashAttentionSm90, BackwardMatchesMmaSyncKernelBitForBit) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(str_cat("B=", s.B, " T=", s.T, " NH=", s.NH, " causal=", s.causal));
    const std::vector<bf16> qkv = random_qkv(s, 13);
    const double e = rel_max(backward(qkv, s, true, 3), backward(qkv, s, false, 3));
    std::printf("backward B=%d T=%d NH=%d %s: dqkv %.2e\n", s.B, s.T, s.NH, s.causal ? "causal" : "full", e);
    EXPECT_EQ(e, 0.0);
  }
  const Shape s{2, 256, 2, true};  // the control: other inputs must differ
  EXPECT_GT(rel_max(backward(swap_kv(random_qkv(s, 13), s), s, true, 3), backward(random_qkv(s, 13), s, false, 3)),
            0.1);
}

TEST_F(FlashAttentionSm90, ComparisonSeesOtherInputs) {
  const Shape s{2, 256, 2, true};
  const std::vector<bf16> qkv = random_qkv(s, 11);
  const double eo = rel_max(forward(swap_kv(qkv, s), s, true).out, forward(qkv, s, false).out);
  EXPECT_GT(eo, 0.1);
}

TEST_F(FlashAttentionSm90, BitIdenticalReruns) {
  const Shape s{2, 1024, 2, true};
  const std::vector<bf16> qkv = random_qkv(s, 5);
  const Result a = forward(qkv, s, true), b = forward(qkv, s, true);
  EXPECT_EQ(rel_max(a.out, b.out), 0.0);
  EXPECT_EQ(rel_max(a.lse, b.lse), 0.0);
}
}  // namespace
