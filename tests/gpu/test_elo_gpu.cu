// ELO on the GPU (small_fc_lopt's passes in ELO's mode) against the CPU reference (optim/ref/ref_elo.cpp)
// over 22 steps on a mix of shapes (square, tall, wide, odd, 3-D, 4-D, (1,n), (n,1), long rows, a large
// matrix, an embedding, a head, vectors, a scalar), with random MetaMLP weights written by the test, weight
// decay on, a cosine schedule, ELO's own global clip off and on (after the trainer's); nan_to_num of
// NaN and +-inf gradients; bit-exact resume, CUDA-graph replay and owned subsets; fast mode.
//
// Bound (exact mode): ||p_gpu - p_ref|| <= 1e-5 x ||p_ref - p0|| per tensor and step (10x for tensors under
// 64 elements), plus one fp32 ulp of p per element, as small_fc_lopt's tests in test_optim_gpu.cu: both
// sides run the same fp32 elementwise math, the reference its sums and the MLP in double. Fast mode (bf16 /
// fp16 tensor-core MLP): 2e-2, small_fc_lopt's stated fast-mode bound.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "common/bf16_host.h"
#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "core/chunks.h"
#include "optim/grad_clip.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"
#include "optim/ref/ref_lopt.h"
#include "optim/ref/ref_optim.h"
#include "tests/gpu/optimizer_checks.h"
#include "tests/gpu/optimizer_test_util.h"
#include "tests/test_util.h"

namespace {
using namespace optim_test;

class EloGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

constexpr double kExactTol = 1e-5, kFastTol = 2e-2;

// Random weights in ELO's published layout (MetaMLP, as DiamondXL/elo), written once per test binary run.
const std::string& elo_weights_dir() {
  static const std::string dir = [] {
    std::string d = make_temp_dir() + "/elo";
    save_small_fc_weights(d, random_small_fc_weights(17, 1.0f));
    return d;
  }();
  return dir;
}

OptimOptions elo_options() {
  OptimOptions o;
  o.elo.weights = elo_weights_dir();
  o.elo.lr = 1e-2;
  o.elo.weight_decay = 0.1;
  o.schedule = make_schedule("cosine", 3, 22, 0.1, 0.2);
  return o;
}

// The GPU optimizer and the CPU reference side by side, from the same parameters. trainer_clip > 0: the
// trainer's grad-norm clipper feeds StepInfo::d_grad_scale (and the reference gets its scale).
class SideBySide {
 public:
  SideBySide(const OptimOptions& o, float trainer_clip, bool bf16)
      : table_(lopt_mixed_table()), arena_(table_, bf16), clipper_(arena_, trainer_clip), trainer_clip_(trainer_clip) {
    p0_ = random_params(table_, 11);
    upload(arena_, p0_, false);
    gpu_ = make_optimizer("elo", o, arena_);
    ref_ = make_ref_optimizer("elo", o, table_);
    p_ref_ = p0_;
  }

  // One step on both; returns the trainer's scale.
  float step(const std::vector<float>& g) {
    upload(arena_, g, true);
    StepInfo info;
    float scale = 1.0f;
    if (trainer_clip_ > 0) {
      clipper_.run(0);
      info.d_grad_scale = clipper_.d_scale();
      CUDA_CHECK(cudaMemcpy(&scale, clipper_.d_scale(), sizeof scale, cudaMemcpyDeviceToHost));
    }
    gpu_->step(info, 0);
    ref_->step(p_ref_, g, scale, 0.0f);
    return scale;
  }

  // Checks every tensor but those in `skip` after step s: finite, and within tol (10x under 64 elements).
  void check(int s, double tol, const std::vector<std::string>& skip = {}) {
    for (const auto& ti : table_.tensors()) {
      if (std::find(skip.begin(), skip.end(), ti.name) != skip.end()) continue;
      const std::vector<float> pg = arena_.get_param(ti.index);
      for (float x : pg) ASSERT_TRUE(std::isfinite(x)) << ti.name << " step " << s;
      const double err = tensor_error(ti, pg, p_ref_, p0_, s);
      worst_[ti.name] = std::max(worst_[ti.name], err);
      ASSERT_LE(err, ti.numel < 64 ? 10 * tol : tol) << "tensor " << ti.name << " step " << s;
    }
  }

  void report(const char* what, int steps) const {
    auto w = std::max_element(worst_.begin(), worst_.end(), [](auto& a, auto& b) { return a.second < b.second; });
    std::printf("[ info ] elo%s vs CPU reference: worst relative error %.3g (%s) over %d steps\n", what, w->second,
                w->first.c_str(), steps);
  }

  // The bf16 compute copy equals the fp32 master rounded, element for element.
  void check_bf16_copy() {
    std::vector<__nv_bfloat16> b(size_t(arena_.total()));
    CUDA_CHECK(cudaMemcpy(b.data(), arena_.params_bf16(), b.size() * 2, cudaMemcpyDeviceToHost));
    const std::vector<float> p = arena_.get_params_flat();
    for (const auto& ti : table_.tensors())
      for (int64_t i = 0; i < ti.numel; i++)
        ASSERT_EQ(__bfloat162float(b[size_t(ti.offset + i)]), bf16_round(p[size_t(ti.offset + i)])) << ti.name;
  }

  // Records {m0, m1, m2, v} of element i of tensor `name`: the GPU's (from its saved state) and the reference's.
  void moments(const std::string& name, int64_t i, float gpu[4], float ref[4]) {
    const std::string dir = make_temp_dir();
    {
      SectionWriter w(dir + "/gpu");
      gpu_->save_state(w);
      w.commit();
      SectionWriter r(dir + "/ref");
      ref_->save_state(r);
      r.commit();
    }
    std::vector<int64_t> soff;
    plan_state_offsets(table_, all_tensors(table_), &soff);
    const std::vector<float> rec = SectionReader(dir + "/gpu").get_vector<float>("optim.lopt.moments");
    const int idx = table_.find(name);
    std::copy_n(&rec[size_t(4 * (soff[size_t(idx)] + i))], 4, gpu);
    const SectionReader rr(dir + "/ref");
    const char* parts[4] = {"m0", "m1", "m2", "v"};
    for (int k = 0; k < 4; k++) ref[k] = rr.get_vector<float>("optim." + name + "." + parts[k])[size_t(i)];
  }

  const ParamTable& table() const { return table_; }
  Optimizer& gpu() { return *gpu_; }

 private:
  ParamTable table_;
  Arena arena_;
  GradClipper clipper_;
  float trainer_clip_;
  std::unique_ptr<Optimizer> gpu_;
  std::unique_ptr<RefOptimizer> ref_;
  std::vector<float> p0_, p_ref_;
  std::map<std::string, double> worst_;
};

// 22 steps side by side; checks that the trainer's clip and ELO's own clip (where on) are active.
void compare_with_reference(const char* what, const OptimOptions& o, float trainer_clip, bool bf16, double tol,
                            int steps = 22) {
  SideBySide run(o, trainer_clip, bf16);
  for (int s = 0; s < steps; s++) {
    const std::vector<float> g = make_grads(run.table(), uint32_t(100 + s));
    const float scale = run.step(g);
    if (trainer_clip > 0) ASSERT_LT(scale, 1.0f) << "the test should exercise the trainer's clipping";
    if (o.elo.clip_grad)
      ASSERT_LT(ref_global_clip_scale(run.table(), g, scale, o.elo.clip_norm), 1.0f)
          << "the test should exercise ELO's global clipping";
    ASSERT_NO_FATAL_FAILURE(run.check(s, tol));
  }
  EXPECT_EQ(run.gpu().steps_done(), steps);
  run.report(what, steps);
  if (bf16) ASSERT_NO_FATAL_FAILURE(run.check_bf16_copy());
}

// Sets element i of tensor `name` in the flat gradients to v.
void poke(const ParamTable& t, std::vector<float>& g, const char* name, int64_t i, float v) {
  ASSERT_GE(t.find(name), 0) << name;
  const TensorInfo& ti = t[t.find(name)];
  ASSERT_LT(i, ti.numel);
  g[size_t(ti.offset + i)] = v;
}

}  // namespace

TEST_F(EloGpu, MatchesReference) { compare_with_reference("", elo_options(), 0.0f, true, kExactTol); }

TEST_F(EloGpu, TrainerAndGlobalClipMatchesReference) {
  OptimOptions o = elo_options();
  o.elo.clip_grad = true;  // ELO's own global clip (clip_norm 1), after the trainer's
  o.elo.exp_mult = 0.05;   // a magnitude output that matters
  compare_with_reference(" (clipped)", o, 5.0f, false, kExactTol);
}

TEST_F(EloGpu, FastModeWithinBf16Tolerance) {
  // small_fc_lopt's tensor-core pass C with ELO's step: layer 1 in bf16, layers 2-3 in fp16, fp32
  // accumulation; vectors and N-D tensors exact. Stated bound 2e-2 of the distance travelled.
  OptimOptions o = elo_options();
  o.elo.fast = true;
  compare_with_reference(" fast", o, 0.0f, true, kFastTol, 10);
}

// NaN -> 0 and +-inf -> +-FLT_MAX in every pass (PyLO's nan_to_num after the clip), against the reference.
TEST_F(EloGpu, NanAndInfGradientsFollowNanToNum) {
  for (const bool clip : {false, true}) {
    SCOPED_TRACE(clip ? "elo.clip_grad on" : "elo.clip_grad off");
    OptimOptions o = elo_options();
    o.elo.clip_grad = clip;
    SideBySide run(o, 0.0f, false);
    const ParamTable& t = run.table();
    int s = 0;
    for (; s < 3; s++) {
      run.step(make_grads(t, uint32_t(300 + s)));
      ASSERT_NO_FATAL_FAILURE(run.check(s, kExactTol));
    }
    // NaN in a tile (pass A's row and column sums), a 3-D tensor (F1 from g), a vector and the embedding:
    // zeros in every pass; with clipping, the NaN norm leaves the factor at 1.
    std::vector<float> g = make_grads(t, 400);
    for (const char* name : {"w_sq", "w_3d", "bias", "emb_odd"}) ASSERT_NO_FATAL_FAILURE(poke(t, g, name, 5, NAN));
    run.step(g);
    ASSERT_NO_FATAL_FAILURE(run.check(s++, kExactTol));
    if (clip) {  // an infinite norm: factor 0, every gradient 0 (inf * 0 = NaN -> 0 as well)
      g = make_grads(t, 401);
      ASSERT_NO_FATAL_FAILURE(poke(t, g, "w_tall", 0, INFINITY));
      ASSERT_NO_FATAL_FAILURE(poke(t, g, "gain", 2, -INFINITY));
      run.step(g);
      ASSERT_NO_FATAL_FAILURE(run.check(s++, kExactTol));
    } else {  // +-inf -> +-FLT_MAX: m_k = (1 - beta_k) FLT_MAX, v = inf; that tensor is lost, the others not
      g = make_grads(t, 402);
      ASSERT_NO_FATAL_FAILURE(poke(t, g, "w_wide", 10, INFINITY));
      ASSERT_NO_FATAL_FAILURE(poke(t, g, "w_wide", 20, -INFINITY));
      run.step(g);
      ASSERT_NO_FATAL_FAILURE(run.check(s++, kExactTol, {"w_wide"}));
      for (const int64_t i : {10, 20}) {
        float mg[4], mr[4];
        run.moments("w_wide", i, mg, mr);
        for (int k = 0; k < 3; k++) {
          EXPECT_TRUE(std::isfinite(mr[k]) && std::fabs(mr[k]) > 1e-4f * FLT_MAX) << "reference m" << k;
          EXPECT_NEAR(mg[k], mr[k], 1e-6 * std::fabs(mr[k])) << "element " << i << " m" << k;
        }
        EXPECT_TRUE(std::isinf(mg[3]) && std::isinf(mr[3])) << "element " << i << " v";
      }
    }
    run.report(clip ? " nan/inf (clipped)" : " nan/inf", s);
  }
}

// ELO with its global clip on, exact and fast.
OptimOptions clipped_elo_options(bool fast) {
  OptimOptions o = elo_options();
  o.elo.clip_grad = true;
  o.elo.fast = fast;
  return o;
}

TEST_F(EloGpu, SaveLoadContinuesBitForBit) {
  const std::string dir = make_temp_dir();
  const ParamTable table = lopt_mixed_table();
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "exact");
    const std::string path = dir + (fast ? "/fast.state" : "/exact.state");
    expect_resume_bit_for_bit("elo", clipped_elo_options(fast), table, random_params(table, 3), path);
    // small_fc_lopt keeps the same buffers, but a state file says which optimizer wrote it.
    OptimOptions so;
    so.small_fc.weights = elo_weights_dir();
    Arena b(table, false);
    auto other = make_optimizer("small_fc_lopt", so, b);
    expect_user_error([&] { other->load_state(SectionReader(path)); }, "resume with -o elo");
  }
}

TEST_F(EloGpu, GraphReplayEqualsEagerSteps) {
  const ParamTable table = lopt_mixed_table();
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "exact");
    const OptimOptions o = clipped_elo_options(fast);
    {
      Arena a(table, true);
      GradClipper clip(a, 5.0f);
      ASSERT_FALSE(
          make_optimizer("elo", o, a)->take_clip(&clip));  // ELO keeps the clipper apart: its gradient is nan_to_num'd
    }
    expect_graph_replay_equals_eager("elo", o, table, random_params(table, 9), 5.0f);
  }
}

// As OwnedSubsetStepsLikeAnArenaOfThoseTensors (test_optim_gpu.cu): a subset steps bit for bit like an arena of
// only those tensors (ELO's global clip then covers the subset alike), and leaves the others untouched. ELO's own
// clip rescales these gradients (norm above 1) to norm 1 whatever the trainer's clip scale was, so the trainer's
// clipper is checked here by its norm only (a clip_max halved on one side still steps alike: seen on the GPU).
TEST_F(EloGpu, OwnedSubsetStepsLikeAnArenaOfThoseTensors) {
  const std::string dir = make_temp_dir();
  const ParamTable full = lopt_mixed_table();
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "exact");
    expect_owned_subset_steps_alike("elo", clipped_elo_options(fast), full, random_params(full, 21), 5.0f,
                                    dir + (fast ? "/fast.state" : "/exact.state"));
  }
}

TEST_F(EloGpu, MissingWeightsAreRefused) {
  const ParamTable table = lopt_mixed_table();
  Arena a(table, false);
  OptimOptions o = elo_options();
  o.elo.weights = make_temp_dir() + "/nothing_here";
  expect_user_error([&] { make_optimizer("elo", o, a); }, "ELO weights not found");
}
