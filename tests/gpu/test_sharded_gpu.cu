// The sharded data-parallel optimizer step (train/data_parallel.h) on one GPU: W ranks as W host threads,
// each with a stream of its own, its share of the tensors (core/shard_plan.h) in one rank-by-rank arena,
// its own optimizer and grad-norm clipper, and their cross-rank sums and maxima (optim/cross_rank.h)
// through host memory - NCCL will not put two ranks on one GPU, so ThreadRanks stands in for it here.
// Sharing one arena stands in for the all-gather: each rank writes only its own tensors.
//
// Checked against the whole-table optimizer on one arena, over clipped steps, for every optimizer: every
// rank's global norm equals one GPU's bit for bit (the chunk partition is the same, and the ranks' partial
// sums add exactly), and so do the parameters and their bf16 copy (VeLO's GEMMs take as many rows on a
// rank as on one GPU, so cuBLAS rounds alike); each rank keeps only its share of the state.
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/cuda_check.h"
#include "core/shard_plan.h"
#include "models/gpt2.h"
#include "optim/grad_clip.h"
#include "optim/lopt/celo2_weights.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/step_cost.h"
#include "tests/gpu/optimizer_test_util.h"
#include "tests/test_util.h"

namespace {
class ShardedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

// W ranks meeting in host memory: each hands in its vector, each gets the element-wise sum or maximum
// over the ranks, taken in rank order.
class ThreadRanks {
 public:
  explicit ThreadRanks(int world) : world_(world), in_(size_t(world)) {}
  std::vector<double> combine(int rank, std::vector<double> mine, bool max) {
    std::unique_lock<std::mutex> lk(m_);
    in_[size_t(rank)] = std::move(mine);
    arrive(lk);  // every rank's vector is in
    std::vector<double> out = in_[0];
    for (int r = 1; r < world_; r++)
      for (size_t i = 0; i < out.size(); i++)
        out[i] = max ? std::max(out[i], in_[size_t(r)][i]) : out[i] + in_[size_t(r)][i];
    arrive(lk);  // every rank has read them
    return out;
  }

 private:
  void arrive(std::unique_lock<std::mutex>& lk) {
    const int64_t gen = gen_;
    if (++count_ == world_) {
      count_ = 0;
      gen_++;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return gen_ != gen; });
    }
  }
  int world_, count_ = 0;
  int64_t gen_ = 0;
  std::vector<std::vector<double>> in_;
  std::mutex m_;
  std::condition_variable cv_;
};

class ThreadCrossRank : public CrossRank {
 public:
  ThreadCrossRank(ThreadRanks& t, int rank) : t_(t), rank_(rank) {}
  void sum(float* d, size_t n, cudaStream_t s) override { run(d, n, s, false); }
  void sum(double* d, size_t n, cudaStream_t s) override { run(d, n, s, false); }
  void max(float* d, size_t n, cudaStream_t s) override { run(d, n, s, true); }
  int calls = 0;

 private:
  template <typename T>
  void run(T* d, size_t n, cudaStream_t s, bool max) {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    const std::vector<double> all = t_.combine(rank_, std::vector<double>(h.begin(), h.end()), max);
    for (size_t i = 0; i < n; i++) h[i] = T(all[i]);  // sums of one value and zeros, or maxima: exact
    CUDA_CHECK(cudaMemcpyAsync(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    calls++;
  }
  ThreadRanks& t_;
  int rank_;
};

const std::string& weights_dir() {
  static const std::string dir = [] {
    std::string d = make_temp_dir();
    save_small_fc_weights(d + "/mulo", random_small_fc_weights(31, 1.0f));
    save_velo_weights_pylo(d + "/velo", random_velo_weights(32, 0.05f));
    save_celo2_weights(d + "/celo2", random_celo2_weights(33));
    return d;
  }();
  return dir;
}

struct Case {
  std::string name, label;
  OptimOptions o;
  bool take_clip = false;  // the optimizer runs the clipper inside its step (Optimizer::take_clip)
};

std::vector<Case> cases() {
  OptimOptions o;
  o.schedule = make_schedule("cosine", 1, 10, 0.1, 0.2);
  o.adamw.weight_decay = 0.1;
  o.small_fc.weights = o.elo.weights = weights_dir() + "/mulo";
  o.velo.weights = weights_dir() + "/velo";
  o.velo.num_steps = 10;
  o.celo2.weights = o.elo_celo2.weights = weights_dir() + "/celo2";
  OptimOptions fast = o, clip = o, rec16 = o;
  fast.small_fc.fast = fast.elo.fast = true;
  rec16.velo.bf16_record = true;  // the draws hang on the tensor and element, not the rank: the cut table too
  rec16.small_fc.bf16_record = rec16.small_fc.fast = true;
  rec16.celo2.bf16_record = rec16.celo2.fast = true;
  clip.elo.clip_grad = true;  // ELO's own global norm, across ranks
  clip.celo2.clip_grad = true;
  return {{"adamw", "adamw", o},
          {"adafactor", "adafactor", o},
          {"muon", "muon", o},
          {"small_fc_lopt", "small_fc_lopt", o},
          {"small_fc_lopt", "small_fc_lopt fast", fast},
          {"small_fc_lopt", "small_fc_lopt fast bf16_record", rec16},
          {"elo", "elo clip_grad", clip},
          {"velo", "velo", o},
          {"velo", "velo bf16_record", rec16},
          {"celo2", "celo2 clip_grad", clip},
          {"celo2", "celo2 bf16_record", rec16},
          {"elo_celo2", "elo_celo2", o},
          {"small_fc_lopt", "small_fc_lopt clip in A", fast, true},  // the cut table's tiles on two ranks
          {"velo", "velo clip in A", o, true}};
}

struct SmallGpt2 {
  Gpt2Shape s;
  ParamTable table;
  SmallGpt2() {
    // The token table (32001 x 128) is more than one rank's share of every optimizer's work but
    // Adafactor's at 2 and 3 ranks (as GPT-2 124M's is at 4): their plans cut it between two ranks.
    s.layers = 3, s.channels = 128, s.heads = 2, s.vocab = 32001, s.max_seq = 64;
    table = gpt2_param_table(s);
  }
};

// A tensor-by-tensor upload of a natural-layout vector into an arena of any layout.
void set_all(Arena& a, const ParamTable& natural, const std::vector<float>& v, bool grads) {
  for (const auto& t : natural.tensors()) {
    if (grads)
      a.set_grad(t.index, &v[size_t(t.offset)]);
    else
      a.set_param(t.index, &v[size_t(t.offset)]);
  }
}

std::vector<float> bf16_natural(const Arena& a) {  // the bf16 copy, widened, in the natural layout
  std::vector<uint16_t> h(size_t(a.total()));
  CUDA_CHECK(cudaMemcpy(h.data(), a.params_bf16(), h.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); i++) {
    const uint32_t u = uint32_t(h[i]) << 16;
    std::memcpy(&f[i], &u, 4);
  }
  return to_natural_layout(a.table(), f);
}

float read1(const float* d) {
  float h = 0;
  CUDA_CHECK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  return h;
}

void run_case(const Case& c, int world) {
  SCOPED_TRACE(c.label + " over " + std::to_string(world) + " ranks");
  const SmallGpt2 m;
  const ParamTable& t = m.table;
  const ShardPlan plan = plan_shards(
      t, world, [&](const TensorInfo& ti) { return shard_step_cost(c.name, ti); },
      [&](const TensorInfo& ti) { return shard_cut_unit(c.name, c.o, ti); });
  // Where the optimizer can step a tensor in parts, the plan cuts one between two ranks: the cut tensor's
  // parts must step as the whole does (the learned optimizers summing its statistics over the ranks).
  const bool cuts = world > 1 && c.name != "adafactor";
  EXPECT_EQ(plan.any_cut(), cuts);
  const ParamTable st = sharded_table(t, plan);
  const std::vector<float> p0 = optim_test::random_params(t, 5);
  Arena one(t, true), shared(st, true);
  set_all(one, t, p0, false);
  set_all(shared, t, p0, false);
  DeviceBuffer<float> loss(1, "loss");

  auto whole = make_optimizer(c.name, c.o, one);
  const float max_norm = 0.05f;  // the gradients' norm is well above: every step is clipped
  GradClipper clip_one(one, max_norm);
  if (c.take_clip) ASSERT_TRUE(whole->take_clip(&clip_one));
  ThreadRanks ranks(world);
  std::vector<std::unique_ptr<ThreadCrossRank>> cross;
  std::vector<std::unique_ptr<Optimizer>> opt;
  std::vector<std::unique_ptr<GradClipper>> clip;
  std::vector<cudaStream_t> stream(static_cast<size_t>(world), nullptr);
  size_t state_sum = 0;
  for (int r = 0; r < world; r++) {
    cross.push_back(std::make_unique<ThreadCrossRank>(ranks, r));
    opt.push_back(make_optimizer(c.name, c.o, shared, plan.owned(r), cross.back().get()));
    clip.push_back(std::make_unique<GradClipper>(shared, max_norm, plan.owned(r), cross.back().get()));
    if (c.take_clip) ASSERT_TRUE(opt.back()->take_clip(clip.back().get())) << "rank " << r;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream[size_t(r)], cudaStreamNonBlocking));
    if (world > 1)
      EXPECT_LT(opt.back()->state_bytes(), whole->state_bytes()) << "rank " << r << " keeps more than its share";
    state_sum += opt.back()->state_bytes();
  }
  for (int step = 0; step < 4; step++) {
    const std::vector<float> g = optim_test::make_grads(t, uint32_t(40 + step));
    const float l = 3.0f - 0.25f * float(step);
    loss.upload(&l, 1);
    set_all(one, t, g, true);
    set_all(shared, t, g, true);
    if (!c.take_clip) clip_one.run(0);
    whole->step(StepInfo{loss.get(), clip_one.d_scale()}, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::thread> th;
    for (int r = 0; r < world; r++)
      th.emplace_back([&, r] {
        cudaStream_t s = stream[size_t(r)];
        if (!c.take_clip) clip[size_t(r)]->run(s);
        opt[size_t(r)]->step(StepInfo{loss.get(), clip[size_t(r)]->d_scale()}, s);
        CUDA_CHECK(cudaStreamSynchronize(s));
      });
    for (auto& x : th) x.join();
    const float norm = read1(clip_one.d_norm());
    ASSERT_LT(read1(clip_one.d_scale()), 1.0f) << "the test meant the steps to be clipped";
    for (int r = 0; r < world; r++)
      EXPECT_EQ(read1(clip[size_t(r)]->d_norm()), norm) << "rank " << r << " step " << step;
  }
  for (int r = 0; r < world; r++) {
    CUDA_CHECK(cudaStreamDestroy(stream[size_t(r)]));
    EXPECT_GT(cross[size_t(r)]->calls, 0);
  }
  EXPECT_GE(state_sum, whole->state_bytes());  // nothing is lost (VeLO's and CELO2's small per-rank parts repeat)
  const std::vector<float> a = one.get_params_flat(), b = to_natural_layout(st, shared.get_params_flat());
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, moved = 0;
  for (const auto& ti : t.tensors())
    for (int64_t i = 0; i < ti.numel; i++) {
      const size_t k = size_t(ti.offset + i);
      diff = std::max(diff, double(std::fabs(a[k] - b[k])));
      moved = std::max(moved, double(std::fabs(a[k] - p0[k])));
    }
  ASSERT_GT(moved, 0.0) << "the parameters did not move";
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "parameters differ by up to " << diff;
  EXPECT_EQ(bf16_natural(one), bf16_natural(shared)) << "the bf16 copies differ";
  std::printf("[ sharded  ] %-20s world %d: max |difference| %.3g, max |move| %.3g, state per rank %zu of %zu bytes\n",
              c.label.c_str(), world, diff, moved, state_sum / size_t(world), whole->state_bytes());
}
}  // namespace

TEST_F(ShardedGpu, EveryOptimizerStepsItsShardLikeOneGpu) {
  for (const Case& c : cases())
    for (int world : {2, 3}) run_case(c, world);
}

// One rank owns every tensor and combines with nobody: the sharded path at world size 1 (what
// train_gpt2 --shard 1 runs on one GPU) is the whole-table optimizer, bit for bit.
TEST_F(ShardedGpu, OneRankIsTheWholeTableBitForBit) {
  for (const Case& c : cases()) run_case(c, 1);
}
