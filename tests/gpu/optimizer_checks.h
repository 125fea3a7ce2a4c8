// The checks every optimizer's GPU suite makes alike (test_optim_gpu.cu, test_celo2_gpu.cu, test_elo_gpu.cu):
// a saved state resumes to the same bits, a captured step replays like eager steps, an optimizer owning a
// subset of the tensors (a rank's shard) steps like one over an arena of only those, and one that takes the
// trainer's clip into its pass A steps like one beside the clipper. Each takes the table and
// the starting parameters of its suite; the gradients are make_grads's.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "common/device_buffer.h"
#include "common/sections.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "tests/gpu/optimizer_test_util.h"

namespace optim_test {

// The loss the learned optimizers see at step s (VeLO reads it; the others ignore it).
inline float synthetic_loss(int s) { return 3.0f * std::exp(-0.05f * float(s)) + 0.1f * float(s % 3); }

// N steps with gradients (and losses) seeded from `first_seed`, on the default stream.
inline void run_steps(Optimizer& opt, Arena& a, int first_seed, int n) {
  DeviceBuffer<float> d_loss(1, "loss");
  for (int s = 0; s < n; s++) {
    upload(a, make_grads(a.table(), uint32_t(first_seed + s)), true);
    const float loss = synthetic_loss(first_seed + s);
    d_loss.upload(&loss, 1);
    StepInfo info;
    info.d_loss = d_loss.get();
    opt.step(info, 0);
  }
}

inline bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// 8 steps, the state saved to `path`, 8 more; a fresh optimizer loading it from the saved point's parameters
// ends its 8 steps on the same bits. `path` stays for the caller's refusals.
inline void expect_resume_bit_for_bit(const std::string& name, const OptimOptions& o, const ParamTable& table,
                                      const std::vector<float>& p0, const std::string& path) {
  Arena a(table, false);
  upload(a, p0, false);
  auto opt = make_optimizer(name, o, a);
  run_steps(*opt, a, 500, 8);
  const std::vector<float> mid = a.get_params_flat();
  {
    SectionWriter w(path);
    opt->save_state(w);
    w.commit();
  }
  run_steps(*opt, a, 600, 8);
  const std::vector<float> straight = a.get_params_flat();
  Arena b(table, false);
  upload(b, mid, false);
  auto resumed = make_optimizer(name, o, b);
  resumed->load_state(SectionReader(path));
  EXPECT_EQ(resumed->steps_done(), 8);
  run_steps(*resumed, b, 600, 8);
  ASSERT_TRUE(same_bits(straight, b.get_params_flat())) << "resume is not bit-identical";
  EXPECT_FALSE(same_bits(straight, mid)) << "the steps after the save moved nothing";
  EXPECT_GT(opt->state_bytes(), 0u);
}

// A captured step (the clipper's pass, then the optimizer's, bounded at clip_max) replayed 6 times equals 6
// eager steps from the same start, and moves p: the step reads its counter, schedule and clip scale on the
// device and never syncs with the host.
inline void expect_graph_replay_equals_eager(const std::string& name, const OptimOptions& o, const ParamTable& table,
                                             const std::vector<float>& p0, float clip_max) {
  const std::vector<float> g = make_grads(table, 77);
  DeviceBuffer<float> d_loss(1, "loss");
  const float loss = 2.5f;
  d_loss.upload(&loss, 1);
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<float> results[2];
  for (int graph = 0; graph < 2; graph++) {
    Arena a(table, true);
    upload(a, p0, false);
    upload(a, g, true);
    auto opt = make_optimizer(name, o, a);
    GradClipper clip(a, clip_max);
    StepInfo info;
    info.d_grad_scale = clip.d_scale();
    info.d_loss = d_loss.get();
    auto step = [&] {
      clip.run(st);
      opt->step(info, st);
    };
    if (graph) {
      const CudaGraph cg = CudaGraph::capture(st, step);
      for (int i = 0; i < 6; i++) cg.launch(st);
    } else {
      for (int i = 0; i < 6; i++) step();
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    EXPECT_EQ(opt->steps_done(), 6);
    results[graph] = a.get_params_flat();
  }
  CUDA_CHECK(cudaStreamDestroy(st));
  ASSERT_TRUE(same_bits(results[0], results[1])) << "the replayed graph differs from the eager steps";
  ASSERT_FALSE(same_bits(results[0], p0)) << "the steps moved nothing";
}

// An optimizer taking the trainer's clip (Optimizer::take_clip) against the same optimizer beside the clipper,
// over 6 steps of gradients with one element of each large matrix set to `big` (alternating in sign), clip
// `max_norm`: the same parameters up to rounding, and finite.
inline void expect_taking_the_clip_steps_as_beside(const std::string& name, const OptimOptions& o,
                                                   const ParamTable& table, float big, float max_norm) {
  SCOPED_TRACE(name);
  Arena a(table, false), b(table, false);
  const std::vector<float> p0 = random_params(table, 5);
  upload(a, p0, false);
  upload(b, p0, false);
  auto taking = make_optimizer(name, o, a), apart = make_optimizer(name, o, b);
  GradClipper ca(a, max_norm), cb(b, max_norm);
  ASSERT_TRUE(taking->take_clip(&ca));
  DeviceBuffer<float> d_loss(1, "loss");
  int bent = 0;
  for (int s = 0; s < 6; s++) {
    std::vector<float> g = make_grads(table, uint32_t(300 + s));
    for (const auto& ti : table.tensors())
      if (ti.ndim() == 2 && ti.numel > 1000) {
        g[size_t(ti.offset + 7 * s)] = s % 2 ? -big : big;
        bent++;
      }
    upload(a, g, true);
    upload(b, g, true);
    const float loss = synthetic_loss(s);
    d_loss.upload(&loss, 1);
    StepInfo ia, ib;
    ia.d_loss = ib.d_loss = d_loss.get();
    ia.d_grad_scale = ca.d_scale();
    ib.d_grad_scale = cb.d_scale();
    taking->step(ia, 0);
    cb.run(0);
    apart->step(ib, 0);
    const std::vector<float> pa = a.get_params_flat(), pb = b.get_params_flat();
    for (const auto& ti : table.tensors()) {
      double num = 0, den = 0;
      for (int64_t i = ti.offset; i < ti.offset + ti.numel; i++) {
        ASSERT_TRUE(std::isfinite(pa[size_t(i)])) << ti.name << " step " << s;
        num += (double(pa[size_t(i)]) - pb[size_t(i)]) * (double(pa[size_t(i)]) - pb[size_t(i)]);
        den += (double(pb[size_t(i)]) - p0[size_t(i)]) * (double(pb[size_t(i)]) - p0[size_t(i)]);
      }
      ASSERT_LE(std::sqrt(num), 1e-4 * std::sqrt(den) + 1e-7) << ti.name << " step " << s;
    }
  }
  EXPECT_GT(bent, 0) << "the test should bend some tiles";
}

// The tensors of `full` whose index % 3 != 1 (every kind of shape on both sides of the cut), as a table of
// their own, and a flat vector of `full` cut down to them in that table's layout.
struct OwnedSubset {
  const ParamTable& full;
  ParamTable sub;
  std::vector<int> owned;
  explicit OwnedSubset(const ParamTable& f) : full(f) {
    for (const auto& ti : full.tensors())
      if (ti.index % 3 != 1) owned.push_back(ti.index), sub.add(static_cast<const TensorSpec&>(ti));
  }
  std::vector<float> extract(const std::vector<float>& flat) const {
    std::vector<float> out(size_t(sub.total_elems()), 0.0f);
    for (size_t k = 0; k < owned.size(); k++)
      std::copy_n(flat.begin() + full[owned[k]].offset, full[owned[k]].numel, out.begin() + sub[int(k)].offset);
    return out;
  }
};

// An optimizer that owns a subset of the tensors steps exactly those, bit for bit as the same optimizer over
// an arena of only those tensors, and leaves the others untouched; the grad-norm clipper (clip_max) measures
// the subset alike; its state is smaller, and its state file (written to `path`) is refused by an optimizer
// of all tensors and taken by one of the same subset.
inline void expect_owned_subset_steps_alike(const std::string& name, const OptimOptions& o, const ParamTable& full,
                                            const std::vector<float>& p0, float clip_max, const std::string& path) {
  const OwnedSubset s(full);
  Arena a(full, false), b(s.sub, false);
  upload(a, p0, false);
  upload(b, s.extract(p0), false);
  auto oa = make_optimizer(name, o, a, s.owned), ob = make_optimizer(name, o, b);
  GradClipper ca(a, clip_max, s.owned), cb(b, clip_max);
  DeviceBuffer<float> d_loss(1, "loss");
  for (int step = 0; step < 6; step++) {
    const std::vector<float> g = make_grads(full, uint32_t(40 + step));
    upload(a, g, true);
    upload(b, s.extract(g), true);
    const float loss = synthetic_loss(step);
    d_loss.upload(&loss, 1);
    ca.run(0);
    cb.run(0);
    StepInfo ia, ib;
    ia.d_loss = ib.d_loss = d_loss.get();
    ia.d_grad_scale = ca.d_scale();
    ib.d_grad_scale = cb.d_scale();
    oa->step(ia, 0);
    ob->step(ib, 0);
  }
  float na = 0, nb = 0;
  CUDA_CHECK(cudaMemcpy(&na, ca.d_norm(), 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&nb, cb.d_norm(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(na, nb);
  EXPECT_TRUE(std::isfinite(na) && na > 0) << "grad norm " << na;
  const std::vector<float> pa = a.get_params_flat(), want = s.extract(pa);
  ASSERT_TRUE(same_bits(want, b.get_params_flat())) << "the owned tensors differ";
  EXPECT_EQ(std::count_if(want.begin(), want.end(), [](float v) { return !std::isfinite(v); }), 0)
      << "non-finite parameters: equal in both arenas, but both wrong";
  EXPECT_FALSE(same_bits(want, s.extract(p0))) << "the owned tensors did not move";
  for (const auto& ti : full.tensors())
    if (ti.index % 3 == 1)
      EXPECT_EQ(std::memcmp(&pa[size_t(ti.offset)], &p0[size_t(ti.offset)], size_t(ti.numel) * 4), 0)
          << ti.name << " moved";
  EXPECT_LT(oa->state_bytes(), make_optimizer(name, o, a)->state_bytes());
  {
    SectionWriter w(path);
    oa->save_state(w);
    w.commit();
  }
  expect_user_error([&] { make_optimizer(name, o, a)->load_state(SectionReader(path)); }, "holds optimizer state for");
  make_optimizer(name, o, a, s.owned)->load_state(SectionReader(path));
}

}  // namespace optim_test
