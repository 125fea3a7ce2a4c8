// cuDNN's fused attention (kernels/cudnn_attention.cu), with both of its backwards, against the double-
// precision CPU reference that our kernels are checked against (tests/gpu/attention_test_util.h): out, lse,
// dq, dk, dv, causal and not (ViT's T = 197); against our kernels at GPT-2 124M's and ViT-B/16's head count;
// bit-identical reruns of the deterministic backward (and whether the atomic one reruns identically, printed);
// a control that must fail (k and v swapped); the plan cache; argument checks; and the tiny bf16 GPT-2 with
// --attention cudnn against the CPU model.
//
// Tolerances, the same as our kernels' (attention_test::Tolerances): out and dq, dk, dv are stored in bf16
// (relative rounding 2^-9) and both kernels round P and dS to bf16 for the tensor cores, so each output is
// within 1e-2 (out) or 2e-2 (gradients) of the largest reference value, and lse (fp32) within 1e-3. Against
// our kernels the same bounds hold, each side's own error being a few 1e-3 (printed). Wrong inputs (k and v
// swapped, a head's columns shifted, a missing mask) give errors of order 1.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "kernels/attention_kind.h"
#include "kernels/cudnn_attention.h"
#include "kernels/flash_attention.h"
#include "tests/gpu/attention_test_util.h"
#include "tests/gpu/bf16_test_util.h"
#include "tests/gpu/tiny_gpt2_case.h"
#include "tests/test_util.h"

using namespace attention_test;

namespace {
class CudnnAttentionGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

enum class Kernel { kOurs, kCudnn };

// One problem on the device, run forward then backward by our kernels or cuDNN's, every output poisoned
// first (0xff: NaN in bf16 and fp32, so an unwritten element shows; or 0x00).
class AttentionRun {
 public:
  AttentionRun(const Inputs& in, int B, int T, int NH, bool causal, bool deterministic = true)
      : B_(B),
        T_(T),
        NH_(NH),
        causal_(causal),
        cudnn_(deterministic),
        qkv_(in.qkv.size()),
        out_(in.dout.size()),
        dout_(in.dout.size()),
        dqkv_(in.qkv.size()),
        lse_(size_t(B) * NH * T),
        scratch_(size_t(B) * NH * T) {
    qkv_.upload(to_bf16(in.qkv));
    dout_.upload(to_bf16(in.dout));
  }
  Outputs run(Kernel k, int poison = 0xff) {
    CUDA_CHECK(cudaMemset(out_.get(), poison, out_.bytes()));
    CUDA_CHECK(cudaMemset(lse_.get(), poison, lse_.bytes()));
    CUDA_CHECK(cudaMemset(dqkv_.get(), poison, dqkv_.bytes()));
    CUDA_CHECK(cudaMemset(scratch_.get(), poison, scratch_.bytes()));
    if (k == Kernel::kCudnn) {
      cudnn_.forward(out_.get(), lse_.get(), qkv_.get(), B_, T_, NH_, causal_, 0);
      cudnn_.backward(dqkv_.get(), dout_.get(), out_.get(), lse_.get(), qkv_.get(), scratch_.get(), B_, T_, NH_,
                      causal_, 0);
    } else {
      flash_attention_forward(out_.get(), lse_.get(), qkv_.get(), B_, T_, NH_, causal_, 0);
      flash_attention_backward(dqkv_.get(), dout_.get(), out_.get(), lse_.get(), qkv_.get(), scratch_.get(), B_, T_,
                               NH_, causal_, 0);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    return {out_.download(), dqkv_.download(), lse_.download()};
  }
  const CudnnAttention& cudnn() const { return cudnn_; }

 private:
  int B_, T_, NH_;
  bool causal_;
  CudnnAttention cudnn_;
  DeviceBuffer<bf16> qkv_, out_, dout_, dqkv_;
  DeviceBuffer<float> lse_, scratch_;
};

struct Case {
  int B, T, NH;
  float qk_std;  // std of q and k: scores have std qk_std^2 (after the 1/8 scale)
  bool causal;
};
const char* name(bool deterministic) { return deterministic ? "deterministic" : "atomic"; }

void print_errors(const char* what, const Case& c, bool deterministic, const Errors& e) {
  std::printf(
      "[cudnn] %s, %s backward, B=%d T=%d NH=%d qk_std=%.1f %s  max err / max|ref|: out %.2e  dq %.2e  dk %.2e  dv "
      "%.2e;  lse abs %.2e\n",
      what, name(deterministic), c.B, c.T, c.NH, c.qk_std, c.causal ? "causal" : "full", e.out, e.dqkv[0], e.dqkv[1],
      e.dqkv[2], e.lse);
}
// Whether the loaded cuDNN runs this case's backward; where it does not (a cuDNN older than 9.15.1 and the
// non-causal T = 197, say), the case is skipped with a line that says why.
bool runs_backward(const Case& c) {
  const std::string why = CudnnAttention::backward_refusal(c.T, c.causal);
  if (!why.empty())
    std::printf("[cudnn] skipped B=%d T=%d %s: %s\n", c.B, c.T, c.causal ? "causal" : "full", why.c_str());
  return why.empty();
}
}  // namespace

// GPT-2's causal shape class (T = 256, past the 128-row tiles) and ViT's non-causal T = 197 (not a multiple
// of 64), a sharply peaked softmax (qk_std 2.5) and short odd lengths.
TEST_F(CudnnAttentionGpu, MatchesCpuReference) {
  const Case cases[] = {{2, 256, 3, 1.0f, true}, {2, 197, 3, 1.0f, false}, {1, 130, 2, 2.5f, true},
                        {3, 50, 2, 1.0f, false}, {2, 17, 1, 1.0f, true},   {1, 200, 2, 2.5f, false}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    if (!runs_backward(c)) continue;
    const Inputs in = random_inputs(c.B, c.T, c.NH, c.qk_std, seed++);
    const Reference ref = reference(in.qkv, in.dout, c.B, c.T, c.NH, c.causal, Dropout());
    for (const bool det : {true, false}) {
      SCOPED_TRACE(str_cat("B=", c.B, " T=", c.T, " NH=", c.NH, " causal=", c.causal, " ", name(det)));
      AttentionRun run(in, c.B, c.T, c.NH, c.causal, det);
      print_errors("vs CPU", c, det, expect_near(run.run(Kernel::kCudnn), ref, c.NH * kHs));
    }
  }
}

// GPT-2 124M's attention (12 heads, T = 1024, causal) and ViT-B/16's (12 heads, T = 197), cuDNN against ours.
TEST_F(CudnnAttentionGpu, MatchesOurKernels) {
  const Case cases[] = {{4, 1024, 12, 1.0f, true}, {8, 197, 12, 1.0f, false}};
  for (const Case& c : cases) {
    if (!runs_backward(c)) continue;
    const Inputs in = random_inputs(c.B, c.T, c.NH, c.qk_std, 40 + uint64_t(c.T));
    for (const bool det : {true, false}) {
      SCOPED_TRACE(str_cat("B=", c.B, " T=", c.T, " causal=", c.causal, " ", name(det)));
      AttentionRun run(in, c.B, c.T, c.NH, c.causal, det);
      const Reference ours = as_reference(run.run(Kernel::kOurs));
      print_errors("vs ours", c, det, expect_near(run.run(Kernel::kCudnn), ours, c.NH * kHs));
    }
  }
}

// The deterministic backward must rerun bit for bit (whatever garbage its outputs held); the atomic one
// is only reported.
TEST_F(CudnnAttentionGpu, Reruns) {
  const Case cases[] = {{4, 1024, 12, 1.0f, true}, {8, 197, 12, 1.0f, false}};
  for (const Case& c : cases)
    for (const bool det : {true, false}) {
      if (!runs_backward(c)) continue;
      SCOPED_TRACE(str_cat("T=", c.T, " ", name(det)));
      AttentionRun run(random_inputs(c.B, c.T, c.NH, c.qk_std, 9), c.B, c.T, c.NH, c.causal, det);
      const Outputs first = run.run(Kernel::kCudnn, 0xff);
      int same_dqkv = 0;
      const int reruns = 5;
      for (int i = 0; i < reruns; i++) {
        const Outputs again = run.run(Kernel::kCudnn, i % 2 ? 0xff : 0x00);
        EXPECT_TRUE(same_bits(first.out, again.out)) << "out differs between runs";
        EXPECT_TRUE(same_bits(first.lse, again.lse)) << "lse differs between runs";
        same_dqkv += same_bits(first.dqkv, again.dqkv);
      }
      if (det) EXPECT_EQ(same_dqkv, reruns) << "dqkv differs between runs of the deterministic backward";
      std::printf("[cudnn] %s backward, T=%d: dqkv bit-identical in %d of %d reruns\n%s", name(det), c.T, same_dqkv,
                  reruns, run.cudnn().plans().c_str());
    }
}

// The comparison can fail: cuDNN on the same inputs with k and v exchanged is far from the reference.
TEST_F(CudnnAttentionGpu, SwappedKeysAndValuesFail) {
  for (const bool causal : {true, false}) {
    const Case c{2, 197, 3, 1.0f, causal};
    if (!runs_backward(c)) continue;
    const int C = c.NH * kHs;
    Inputs in = random_inputs(c.B, c.T, c.NH, c.qk_std, 77);
    const Reference ref = reference(in.qkv, in.dout, c.B, c.T, c.NH, c.causal, Dropout());
    for (size_t row = 0; row < in.qkv.size() / size_t(3 * C); row++)
      std::swap_ranges(in.qkv.begin() + row * 3 * C + C, in.qkv.begin() + row * 3 * C + 2 * C,
                       in.qkv.begin() + row * 3 * C + 2 * C);
    const Outputs got = AttentionRun(in, c.B, c.T, c.NH, c.causal).run(Kernel::kCudnn);
    const Err eo = compare(to_float(got.out), ref.out, [](size_t) { return true; });
    const Err eg = compare(to_float(got.dqkv), ref.dqkv, [](size_t) { return true; });
    EXPECT_GT(eo.rel_max, 10 * Tolerances().out) << "out with k and v swapped still matches";
    EXPECT_GT(eg.rel_max, 10 * Tolerances().grad) << "dqkv with k and v swapped still matches";
    std::printf("[cudnn] k and v swapped (%s): out err %.2e, dqkv err %.2e (must be far above the tolerances)\n",
                causal ? "causal" : "full", eo.rel_max, eg.rel_max);
  }
}

// A plan per (shape, direction), built once; a new shape adds its own.
TEST_F(CudnnAttentionGpu, BuildsEachPlanOnce) {
  AttentionRun run(random_inputs(2, 64, 2, 1.0f, 3), 2, 64, 2, true);
  run.run(Kernel::kCudnn);
  run.run(Kernel::kCudnn);
  const std::string plans = run.cudnn().plans();
  EXPECT_EQ(std::count(plans.begin(), plans.end(), '\n'), 2) << plans;
  EXPECT_NE(plans.find("forward B=2 T=64 NH=2 causal"), std::string::npos) << plans;
  EXPECT_NE(plans.find("backward B=2 T=64 NH=2 causal"), std::string::npos) << plans;
}

TEST_F(CudnnAttentionGpu, RejectsBadArguments) {
  CudnnAttention a;
  DeviceBuffer<bf16> buf(3 * 64 * 4);
  DeviceBuffer<float> f(16);
  expect_user_error([&] { a.forward(buf.get(), f.get(), buf.get(), 0, 4, 1, true, 0); }, "at least 1");
  expect_user_error([&] { a.forward(buf.get() + 1, f.get(), buf.get(), 1, 4, 1, true, 0); }, "16-byte aligned");
  expect_user_error([&] { a.backward(buf.get(), buf.get(), buf.get(), f.get(), buf.get(), f.get(), 1, 1, 1, true, 0); },
                    "T = 1");
}

// The tiny GPT-2 (2 layers, T = 40) with cuDNN's attention against the double-precision CPU model, as
// test_gpt2_bf16's ModelMatchesCpuReference checks ours; dropout is refused.
TEST_F(CudnnAttentionGpu, Gpt2MatchesCpuReference) {
  for (const Attention attention : {Attention::kCudnn, Attention::kCudnnNondet}) {
    const bool det = attention == Attention::kCudnn;
    SCOPED_TRACE(name(det));
    const TinyGpt2Case c = tiny_gpt2_case(128, 2, true, true);
    Arena arena(c.table, true);
    for (const auto& t : c.table.tensors()) arena.set_param(t.index, &c.p[size_t(t.offset)]);
    auto m = make_gpt2("bf16", c.s, arena, c.B, c.T, attention);
    const TinyGpt2Run r = run_tiny_gpt2(*m, arena, c), again = run_tiny_gpt2(*m, arena, c);
    EXPECT_LT(rel_error(r.logits, c.logits_ref), 2e-2) << "logits";
    EXPECT_NEAR(r.loss, c.loss_ref, 1e-2 * c.loss_ref);
    double all = 0, worst = 0;
    for (double v : c.g_ref) all += v * v;
    for (const auto& t : c.table.tensors()) {
      std::vector<float> g(r.grads.begin() + t.offset, r.grads.begin() + t.offset + t.numel);
      std::vector<double> w(c.g_ref.begin() + t.offset, c.g_ref.begin() + t.offset + t.numel);
      double rn = 0;
      for (double v : w) rn += v * v;
      if (rn < 1e-6 * all) continue;  // the key bias (softmax ignores a shared shift): bf16 noise only
      worst = std::max(worst, rel_error(g, w));
      EXPECT_LT(rel_error(g, w), 5e-2) << t.name;
    }
    std::printf("[cudnn] tiny GPT-2 with %s attention vs CPU reference: worst per-tensor gradient error %.3g\n",
                det ? "cudnn" : "cudnn-nondet", worst);
    if (det) EXPECT_TRUE(same_bits(r.grads, again.grads)) << "gradients are not reproducible";
    m->set_dropout(0.1f, 1);
    expect_user_error([&] { m->forward(0); }, "no attention dropout");
  }
}
