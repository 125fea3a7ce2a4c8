// GPU optimizers against the CPU references (every tensor, 22 steps, a mix of shapes and a tensor over
// 10M elements), bit-exact resume from saved state, CUDA-graph replay, and bad-input errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "common/bf16_host.h"
#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "optim/grad_clip.h"
#include "optim/lopt/lo_record16.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"
#include "optim/ref/ref_lopt.h"
#include "optim/ref/ref_optim.h"
#include "tests/gpu/optimizer_checks.h"
#include "tests/gpu/optimizer_test_util.h"
#include "tests/test_util.h"

namespace {
class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

ParamTable mixed_table(bool big) {
  ParamTable t;
  auto add = [&](const char* name, std::vector<int64_t> shape, Role role, bool decay = true) {
    t.add(tensor_spec(name, std::move(shape), role, decay));
  };
  add("w_sq", {64, 64}, Role::Hidden);
  add("w_tall", {96, 48}, Role::Hidden);
  add("w_wide", {48, 96}, Role::Hidden);
  add("w_wide2", {48, 96}, Role::Hidden);
  add("w_odd", {33, 65}, Role::Hidden);
  add("w_3d", {4, 6, 10}, Role::Hidden);
  add("w_4d", {8, 3, 5, 5}, Role::Hidden);
  add("w_row", {1, 7}, Role::Hidden);
  add("w_col", {7, 1}, Role::Hidden);
  add("w_longrows", {3, 2500}, Role::Hidden);
  add("emb_odd", {5, 2051}, Role::Embedding);
  add("bias", {37}, Role::Bias, false);
  add("gain", {50}, Role::NormGain, false);
  add("scalar", {}, Role::Bias, false);
  if (big) add("wte_big", {2560, 4000}, Role::Embedding);  // 10.24M elements
  return t;
}

std::vector<float> random_params(const ParamTable& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> z(0.0f, 0.05f);
  std::vector<float> p(size_t(t.total_elems()), 0.0f);
  for (const auto& ti : t.tensors())
    for (int64_t i = 0; i < ti.numel; i++) p[size_t(ti.offset + i)] = z(rng);
  return p;
}

using optim_test::expect_taking_the_clip_steps_as_beside;
using optim_test::make_grads;
using optim_test::run_steps;
using optim_test::synthetic_loss;
using optim_test::upload;

struct Tolerance {
  double muon = 1e-2, other = 1e-5;
};

// Runs GPU and CPU side by side and checks every tensor after every step: ||p_gpu - p_ref|| over
// ||p_ref - p0|| (error relative to the distance travelled).

// take_clip: the optimizer takes the clipper into its pass A (Optimizer::take_clip) and runs it in its step.
void compare_with_reference(const std::string& name, const OptimOptions& o, float clip, bool bf16, Tolerance tol,
                            int steps = 22, bool big = true, bool take_clip = false) {
  ParamTable table = mixed_table(big);
  Arena arena(table, bf16);
  const std::vector<float> p0 = random_params(table, 11);
  upload(arena, p0, false);
  auto gpu = make_optimizer(name, o, arena);
  auto ref = make_ref_optimizer(name, o, table);
  GradClipper clipper(arena, clip);
  const bool taken = take_clip && gpu->take_clip(&clipper);
  ASSERT_EQ(taken, take_clip) << name << " did not take the clip";
  std::vector<float> p_ref = p0;
  std::map<std::string, double> worst;
  DeviceBuffer<float> d_loss(1, "loss");
  for (int s = 0; s < steps; s++) {
    std::vector<float> g = make_grads(table, 100 + s);
    upload(arena, g, true);
    const float loss = synthetic_loss(s);
    d_loss.upload(&loss, 1);
    StepInfo info;
    info.d_loss = d_loss.get();
    float scale_ref = 1.0f;
    if (clip > 0) info.d_grad_scale = clipper.d_scale();
    if (taken) gpu->step(info, 0);  // the clipper runs inside, after pass A
    if (clip > 0) {
      if (!taken) clipper.run(0);
      double norm_ref = ref_grad_norm(table, g);
      scale_ref = std::min(1.0f, clip / (float(norm_ref) + 1e-6f));
      float out[2];
      CUDA_CHECK(cudaMemcpy(out, clipper.d_scale(), sizeof out, cudaMemcpyDeviceToHost));
      ASSERT_NEAR(out[1], norm_ref, 1e-5 * norm_ref) << "grad norm, step " << s;
      ASSERT_NEAR(out[0], scale_ref, 1e-5 * scale_ref) << "clip scale, step " << s;
      ASSERT_LT(scale_ref, 1.0f) << "the test should exercise clipping";
      scale_ref = out[0];  // the clipper is checked above; from here on compare the optimizers alone
    }
    if (!taken) gpu->step(info, 0);
    ref->step(p_ref, g, scale_ref, loss);
    for (const auto& ti : table.tensors()) {
      std::vector<float> pg = arena.get_param(ti.index);
      double num = 0, den = 0;
      for (int64_t i = 0; i < ti.numel; i++) {
        double r = p_ref[size_t(ti.offset + i)];
        num += (pg[size_t(i)] - r) * (pg[size_t(i)] - r);
        den += (r - p0[size_t(ti.offset + i)]) * (r - p0[size_t(ti.offset + i)]);
        ASSERT_TRUE(std::isfinite(pg[size_t(i)])) << ti.name;
      }
      ASSERT_GT(den, 0) << ti.name << " did not move";
      // fp32 cannot place p closer than its own rounding: allow one ulp of p per element (growing with
      // the steps), the "+1e-7|p|" term of small_fc_lopt.md 9.4, on top of the relative bound.
      double pn = 0;
      for (int64_t i = 0; i < ti.numel; i++) pn += double(p_ref[size_t(ti.offset + i)]) * p_ref[size_t(ti.offset + i)];
      const double ulps = std::ldexp(std::sqrt(pn), -23) * std::sqrt(double(s + 1));
      double err = std::max(0.0, std::sqrt(num) - ulps) / std::sqrt(den);
      const bool is_muon = name == "muon" && ti.resolved_owner() == Owner::Muon;
      // Tensors of a few elements get 10x: one element's momentum can cancel to a small difference of
      // large terms, and nothing averages its rounding out.
      double bound = is_muon ? tol.muon : (ti.numel < 64 ? 10 * tol.other : tol.other);
      worst[ti.name] = std::max(worst[ti.name], err);
      ASSERT_LE(err, bound) << name << " tensor " << ti.name << " step " << s;
    }
  }
  EXPECT_EQ(gpu->steps_done(), steps);
  std::string worst_name;
  double overall = 0;
  for (auto& [k, v] : worst)
    if (v >= overall) {
      overall = v;
      worst_name = k;
    }
  std::printf("[ info ] %s vs CPU reference: worst relative error %.3g (%s) over %d steps\n", name.c_str(), overall,
              worst_name.c_str(), steps);
  if (bf16) {  // the compute copy is refreshed by the optimizer, bit for bit
    std::vector<__nv_bfloat16> b(size_t(arena.total()));
    CUDA_CHECK(cudaMemcpy(b.data(), arena.params_bf16(), b.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> p = arena.get_params_flat();
    for (const auto& ti : table.tensors())
      for (int64_t i = 0; i < ti.numel; i++) {
        float bf = __bfloat162float(b[size_t(ti.offset + i)]);
        ASSERT_EQ(bf, bf16_round(p[size_t(ti.offset + i)])) << ti.name << " " << i;
      }
  }
}
}  // namespace

TEST_F(Gpu, AdamWMatchesReference) {
  OptimOptions o;
  o.adamw.lr = 3e-3;
  o.adamw.weight_decay = 0.1;
  o.schedule = make_schedule("cosine", 3, 22, 0.1, 0.2);
  compare_with_reference("adamw", o, 0.0f, true, {});
}

TEST_F(Gpu, AdamWWithClippingMatchesReference) {
  OptimOptions o;
  o.adamw.beta2 = 0.95;
  compare_with_reference("adamw", o, 0.5f, false, {}, 12);
}

TEST_F(Gpu, AdafactorMatchesReference) {
  OptimOptions o;
  o.adafactor.weight_decay = 0.05;
  o.schedule = make_schedule("wsd", 2, 22, 0.0, 0.3);
  compare_with_reference("adafactor", o, 0.0f, true, {});
}

TEST_F(Gpu, AdafactorWithClippingMatchesReference) {
  OptimOptions o;
  o.adafactor.lr = 0.5;  // rho_t = 1/sqrt(t) regime
  o.adafactor.d = 2.0;
  compare_with_reference("adafactor", o, 0.5f, false, {}, 12);
}

TEST_F(Gpu, MuonMatchesReference) {
  OptimOptions o;
  o.muon.lr = 0.02;
  o.schedule = make_schedule("warmup", 4, 0, 0, 0.2);
  compare_with_reference("muon", o, 0.0f, true, {});
}

TEST_F(Gpu, MuonMatchRmsNoNesterovMatchesReference) {
  OptimOptions o;
  o.muon.adjust_lr = "match_rms_adamw";
  o.muon.nesterov = false;
  o.muon.ns_steps = 3;
  o.muon.ns_workspace_mb = 16;  // forces several sub-batches per group
  compare_with_reference("muon", o, 0.5f, false, {}, 12);
}

namespace {
// Random meta-weights in the published formats, written once per test binary run.
const std::string& lopt_weight_dir() {
  static const std::string dir = [] {
    std::string d = make_temp_dir();
    save_small_fc_weights(d + "/mulo", random_small_fc_weights(7, 1.0f));
    save_velo_weights_pylo(d, random_velo_weights(8, 0.05f));
    return d;
  }();
  return dir;
}

OptimOptions resume_options() {
  OptimOptions o;
  o.schedule = make_schedule("cosine", 2, 16, 0.0, 0.2);
  o.muon.lr = 0.02;
  o.small_fc.weights = lopt_weight_dir() + "/mulo";
  o.velo.weights = lopt_weight_dir();
  o.velo.num_steps = 16;
  return o;
}
}  // namespace

// A resumed VeLO's (and fast small_fc_lopt's) first step reads p where the uninterrupted run uses the sums of
// p^2 its last pass C took: the two must agree to the bit. With bf16 records (":rec16") too, and a run with
// fp32 records refuses their state.
TEST_F(Gpu, SaveLoadContinuesBitForBit) {
  const std::string dir = make_temp_dir();
  for (const std::string label : {"adamw", "adafactor", "muon", "small_fc_lopt", "small_fc_lopt:fast", "velo",
                                  "small_fc_lopt:fast:rec16", "velo:rec16"}) {
    SCOPED_TRACE(label);
    const std::string name = label.substr(0, label.find(':'));
    const bool rec16 = label.find(":rec16") != std::string::npos;
    ParamTable table = mixed_table(false);
    OptimOptions o = resume_options();
    o.small_fc.fast = label.find(":fast") != std::string::npos;
    o.small_fc.bf16_record = o.velo.bf16_record = rec16;
    const std::string path = dir + "/" + label + ".state";
    optim_test::expect_resume_bit_for_bit(name, o, table, random_params(table, 3), path);
    if (rec16) {
      OptimOptions o32 = o;
      o32.small_fc.bf16_record = o32.velo.bf16_record = false;
      Arena b(table, false);
      auto fp32 = make_optimizer(name, o32, b);
      expect_user_error([&] { fp32->load_state(SectionReader(path)); }, "it was saved with other settings");
    }
  }
}

// An optimizer that owns a subset of the tensors (a rank's shard, later) steps exactly those, bit for bit as
// the same optimizer over an arena of only those tensors, and leaves the others untouched; the grad-norm
// clipper measures the subset alike; a state file of the subset is refused by an optimizer of all tensors.
TEST_F(Gpu, OwnedSubsetStepsLikeAnArenaOfThoseTensors) {
  const std::string dir = make_temp_dir();
  const ParamTable full = mixed_table(false);
  for (const std::string name : {"adamw", "adafactor", "muon", "small_fc_lopt", "velo"}) {
    SCOPED_TRACE(name);
    optim_test::expect_owned_subset_steps_alike(name, resume_options(), full, random_params(full, 21), 0.5f,
                                                dir + "/" + name + ".state");
  }
}

TEST_F(Gpu, BadStateFilesAreRefused) {
  const std::string dir = make_temp_dir(), path = dir + "/adamw.state";
  ParamTable table = mixed_table(false);
  Arena a(table, false);
  OptimOptions o;
  auto adamw = make_optimizer("adamw", o, a);
  run_steps(*adamw, a, 1, 2);
  {
    SectionWriter w(path);
    adamw->save_state(w);
    w.commit();
  }
  auto muon = make_optimizer("muon", o, a);
  expect_user_error([&] { muon->load_state(SectionReader(path)); }, "holds the state of optimizer 'adamw'");
  ParamTable other;
  other.add(tensor_spec("x", {3, 3}, Role::Hidden));
  Arena b(other, false);
  auto adamw_b = make_optimizer("adamw", o, b);
  expect_user_error([&] { adamw_b->load_state(SectionReader(path)); }, "different model");
  std::string data = read_file(path);
  data[data.size() - 40] ^= 0x55;
  write_file(path, data);
  expect_user_error([&] { adamw->load_state(SectionReader(path)); }, "checksum");
  expect_user_error([&] { make_optimizer("lion", o, a); }, "unknown optimizer 'lion'");
  OptimOptions bad;
  bad.adafactor.d = 0.1;
  expect_user_error([&] { make_optimizer("adafactor", bad, a); }, "adafactor.d must be >= 1");
}

// A captured step (clip + optimizer) replayed N times must equal N eager steps: proves the step reads its
// counter, schedule and clip scale on the device and never syncs with the host.
TEST_F(Gpu, GraphReplayEqualsEagerSteps) {
  const ParamTable table = mixed_table(false);
  for (const std::string name : {"adamw", "adafactor", "muon", "small_fc_lopt", "velo"}) {
    SCOPED_TRACE(name);
    optim_test::expect_graph_replay_equals_eager(name, resume_options(), table, random_params(table, 9), 0.05f);
  }
}

TEST_F(Gpu, SmallFcLoptMatchesReference) {
  OptimOptions o = resume_options();
  o.small_fc.weight_decay = 0.01;
  o.schedule = make_schedule("cosine", 3, 22, 0.1, 0.2);
  compare_with_reference("small_fc_lopt", o, 0.0f, true, {}, 22, false);
}

TEST_F(Gpu, SmallFcLoptSwappedTiesNoMupClippedMatchesReference) {
  OptimOptions o = resume_options();
  o.schedule = LrSchedule{};
  o.small_fc.mup = false;
  o.small_fc.tie = "swapped";  // the non-default rule (PyLO's is argsort)
  o.small_fc.lr = 0.5;
  compare_with_reference("small_fc_lopt", o, 0.5f, false, {}, 22, false);
}

TEST_F(Gpu, SmallFcLoptFastModeWithinBf16Tolerance) {
  // Tensor-core MLP: layer 1's inputs and weights rounded to bf16 (8 bits of mantissa), hidden units and
  // layers 2-3 to fp16 (11 bits), fp32 accumulation; vectors and N-D tensors run exact. Stated
  // tolerance: 2e-2 of the distance travelled (exact mode: 1e-5); measured 4.3e-3 (H100).
  OptimOptions o = resume_options();
  o.small_fc.fast = true;
  Tolerance tol;
  tol.other = 2e-2;
  compare_with_reference("small_fc_lopt", o, 0.0f, true, tol, 10, false);
}

TEST_F(Gpu, VeloMatchesReference) {
  OptimOptions o = resume_options();
  o.velo.num_steps = 30;
  o.velo.weight_decay = 0.01;
  compare_with_reference("velo", o, 0.0f, true, {}, 22, false);
}

namespace {
// bf16 records (velo. / small_fc_lopt.bf16_record): after every step the GPU's records are the CPU
// reference's (RefLoTensor, the one both references step), value for value. The records follow the
// gradients alone (not p), so the two see the same inputs throughout; a value whose fp32 update differs by an
// ulp between them can round the other way (about 1 draw in 65536), and stays different, so up to 1 in 1000
// may differ. Without the rounding, or with other draws, about half of them would. g_clip: the gradient's
// clamp in the optimizer's pass B (VeLO's 1000), 0 for none.
void expect_bf16_records_are_the_references(const std::string& name, const OptimOptions& o, TieRule tie,
                                            const LoDecays& dec, float g_clip) {
  ParamTable table = mixed_table(false);
  Arena arena(table, true);
  upload(arena, random_params(table, 11), false);
  auto gpu = make_optimizer(name, o, arena);
  std::vector<RefLoTensor> ref;
  for (const auto& ti : table.tensors()) ref.emplace_back(ti.shape, tie);
  DeviceBuffer<float> d_loss(1, "loss");
  const Optimizer::StateBuffer moments = gpu->saved_buffers().at(1);
  ASSERT_EQ(moments.name, "lopt.moments");
  for (int s = 0; s < 10; s++) {
    const std::vector<float> g = make_grads(table, 100 + uint32_t(s));
    upload(arena, g, true);
    const float loss = synthetic_loss(s);
    d_loss.upload(&loss, 1);
    StepInfo info;
    info.d_loss = d_loss.get();
    gpu->step(info, 0);
    for (const auto& ti : table.tensors()) {
      std::vector<float> gi(g.begin() + ti.offset, g.begin() + ti.offset + ti.numel);
      if (g_clip > 0)
        for (float& x : gi) x = std::min(g_clip, std::max(-g_clip, x));
      const uint64_t key = lo_r16_tensor_key(uint64_t(s), uint32_t(ti.index));
      ref[size_t(ti.index)].update(gi, dec, &key);
    }
    std::vector<uint2> rec(moments.bytes / sizeof(uint2));
    CUDA_CHECK(cudaMemcpy(rec.data(), moments.ptr, rec.size() * sizeof(uint2), cudaMemcpyDeviceToHost));
    std::vector<int64_t> at;  // the records lie tensor by tensor, each start aligned (core/chunks.h)
    std::vector<int> all(size_t(table.size()));
    for (int k = 0; k < table.size(); k++) all[size_t(k)] = k;
    ASSERT_LE(plan_state_offsets(table, all, &at), int64_t(rec.size())) << "the records' layout";
    int64_t values = 0, differ = 0;
    for (const auto& ti : table.tensors()) {
      const RefLoTensor& r = ref[size_t(ti.index)];
      for (int64_t i = 0; i < ti.numel; i++) {
        const uint2 u = rec[size_t(at[size_t(ti.index)] + i)];
        const float got[4] = {lo_bf16_value(uint16_t(u.x)), lo_bf16_value(uint16_t(u.x >> 16)),
                              lo_bf16_value(uint16_t(u.y)), lo_bf16_value(uint16_t(u.y >> 16))};
        const float want[4] = {r.m[0][size_t(i)], r.m[1][size_t(i)], r.m[2][size_t(i)], r.v[size_t(i)]};
        for (int k = 0; k < 4; k++) differ += got[k] != want[k];
        values += 4;
      }
    }
    ASSERT_LE(differ * 1000, values) << name << " step " << s << ": " << differ << " of " << values << " differ";
  }
}
}  // namespace

TEST_F(Gpu, VeloBf16RecordsAreTheReferencesRecords) {
  OptimOptions o = resume_options();
  o.velo.num_steps = 30;
  o.velo.bf16_record = true;
  expect_bf16_records_are_the_references("velo", o, kVeloPyloTie, nominal_decays(), 1000.0f);
  // The steps, with the reference keeping its records in bf16 too: the few values rounded the other way
  // (above) move their elements' steps by about a bf16 step of a moment, far below a misread record's error.
  Tolerance tol;
  tol.other = 5e-3;
  compare_with_reference("velo", o, 0.0f, true, tol, 10, false);
}

// Exact and fast: the fast pass C stages the tiles' records through shared memory (8 bytes each).
TEST_F(Gpu, SmallFcLoptBf16RecordsAreTheReferencesRecords) {
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "exact");
    OptimOptions o = resume_options();
    o.small_fc.bf16_record = true;
    o.small_fc.fast = fast;
    expect_bf16_records_are_the_references("small_fc_lopt", o, kSmallFcPyloTie, small_fc_decays(), 0.0f);
    Tolerance tol;  // as VeLO's above; fast: its own bound (SmallFcLoptFastModeWithinBf16Tolerance)
    tol.other = fast ? 2e-2 : 5e-3;
    compare_with_reference("small_fc_lopt", o, 0.0f, true, tol, 10, false);
  }
}

TEST_F(Gpu, VeloArgsortTiesClippedPastNumStepsMatchesReference) {
  OptimOptions o = resume_options();
  o.schedule = LrSchedule{};
  o.velo.num_steps = 10;   // runs past num_steps: fraction > 1
  o.velo.tie = "argsort";  // the non-default rule (PyLO's is swapped)
  compare_with_reference("velo", o, 0.5f, false, {}, 22, false);
}

// The trainer's clip taken into pass A (Optimizer::take_clip): the norm from pass A's unscaled tile sums and the
// clipper's other tensors, the means as s^2 times those sums; against the reference as with the clipper apart.
TEST_F(Gpu, LearnedOptimizersTakingTheClipMatchReference) {
  OptimOptions o = resume_options();
  o.schedule = LrSchedule{};
  o.velo.num_steps = 30;
  compare_with_reference("velo", o, 0.5f, true, {}, 22, false, true);
  compare_with_reference("small_fc_lopt", o, 0.5f, true, {}, 22, false, true);
  o.small_fc.fast = true;
  Tolerance fast;
  fast.other = 2e-2;  // as SmallFcLoptFastModeWithinBf16Tolerance
  compare_with_reference("small_fc_lopt", o, 0.5f, true, fast, 10, false, true);
  o.small_fc.fast = false;
  ParamTable table = mixed_table(false);
  Arena arena(table, false);
  GradClipper clipper(arena, 0.5f);
  EXPECT_FALSE(make_optimizer("adamw", o, arena)->take_clip(&clipper));  // no pass A: the clipper stays apart
}

// Where VeLO's clamp of s g to +-1000 binds, pass A's unscaled sums are wrong for the clamped elements: those
// tiles are summed again, clamped (kRepair). An element of 1e5 in each matrix, clip 1e9 (s = 1: the clamp
// binds).
TEST_F(Gpu, VeloTakingTheClipRepairsTilesWhereTheClampBinds) {
  OptimOptions o = resume_options();
  o.schedule = LrSchedule{};
  o.velo.num_steps = 30;
  expect_taking_the_clip_steps_as_beside("velo", o, mixed_table(false), 1e5f, 1e9f);
}

// A finite gradient whose square overflows (3e19^2 > 3.4e38): the norm is infinite, s = 0, and the scaled sums
// are 0, but s^2 times an infinite unscaled sum is NaN. Such tiles are summed again too, also without a clamp.
TEST_F(Gpu, LearnedOptimizersTakingTheClipRepairTilesWhoseSumOverflows) {
  OptimOptions o = resume_options();
  o.schedule = LrSchedule{};
  o.velo.num_steps = 30;
  for (const std::string name : {"velo", "small_fc_lopt"})
    expect_taking_the_clip_steps_as_beside(name, o, mixed_table(false), 3e19f, 1.0f);
}

TEST_F(Gpu, LearnedOptimizersOnATensorOver10MElements) {
  OptimOptions o = resume_options();
  o.velo.num_steps = 100;
  compare_with_reference("velo", o, 0.0f, false, {}, 3, true);
  compare_with_reference("small_fc_lopt", o, 0.0f, false, {}, 2, true);
}

TEST_F(Gpu, LearnedOptimizersStayFiniteOnHostileInput) {
  // Zero gradients, huge gradients, a loss spike, and training far past num_steps.
  for (const std::string name : {"small_fc_lopt", "velo"}) {
    SCOPED_TRACE(name);
    ParamTable table = mixed_table(false);
    OptimOptions o = resume_options();
    o.velo.num_steps = 4;
    Arena a(table, false);
    upload(a, random_params(table, 5), false);
    auto opt = make_optimizer(name, o, a);
    DeviceBuffer<float> d_loss(1, "loss");
    for (int s = 0; s < 14; s++) {
      std::vector<float> g = make_grads(table, uint32_t(900 + s));
      if (s < 3) std::fill(g.begin(), g.end(), 0.0f);
      if (s == 6 || s == 7)
        for (auto& x : g) x *= 1e6f;
      const float loss = s == 8 ? 3000.0f : 3.0f;
      d_loss.upload(&loss, 1);
      upload(a, g, true);
      StepInfo info;
      info.d_loss = d_loss.get();
      opt->step(info, 0);
      for (float x : a.get_params_flat()) ASSERT_TRUE(std::isfinite(x)) << "step " << s;
    }
  }
}

TEST_F(Gpu, LearnedOptimizerInputErrors) {
  ParamTable table = mixed_table(false);
  Arena a(table, false);
  OptimOptions o = resume_options();
  auto velo = make_optimizer("velo", o, a);
  expect_user_error([&] { velo->step(StepInfo{}, 0); }, "needs the step's training loss");
  o.velo.weights = make_temp_dir() + "/nothing_here";
  expect_user_error([&] { make_optimizer("velo", o, a); }, "scripts/download_lopt_weights.sh");
  o.small_fc.weights = make_temp_dir();
  expect_user_error([&] { make_optimizer("small_fc_lopt", o, a); }, "scripts/download_lopt_weights.sh");
}
