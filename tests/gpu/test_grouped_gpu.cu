// Stepping an optimizer in groups (optim/grouped_optimizer.h) and overlapping it with backward
// (train/step_runner.h, --overlap): the same bits as the whole-set step, whatever the groups' order and
// streams; exact resume of grouped state; refusals. The trainer-level check (train_gpt2 and train_vit logs
// with and without --overlap) is scripts/device_overlap_check.sh.
#include <cstring>
#include <random>

#include "common/cuda_check.h"
#include "models/block_table.h"
#include "models/gpt2.h"
#include "models/gpt2_ref.h"
#include "optim/grad_clip.h"
#include "optim/grouped_optimizer.h"
#include "optim/lopt/lopt_weights.h"
#include "tests/gpu/optimizer_test_util.h"
#include "tests/test_util.h"
#include "train/step_runner.h"

namespace {
class GroupedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

using optim_test::make_grads;
using optim_test::upload;

// Random small_fc_lopt / ELO meta-weights (the same layout), written once per test binary run.
const std::string& grouped_weight_dir() {
  static const std::string dir = [] {
    std::string d = make_temp_dir() + "/mulo";
    save_small_fc_weights(d, random_small_fc_weights(23, 1.0f));
    return d;
  }();
  return dir;
}

// The optimizers that can be grouped, as (name, options) with learned weights and the fast variants.
std::vector<std::pair<std::string, OptimOptions>> groupable_cases() {
  OptimOptions o;
  o.schedule = make_schedule("cosine", 2, 12, 0.1, 0.2);
  o.adamw.weight_decay = 0.1;
  o.small_fc.weights = o.elo.weights = grouped_weight_dir();
  std::vector<std::pair<std::string, OptimOptions>> cases = {
      {"adamw", o}, {"adafactor", o}, {"small_fc_lopt", o}, {"elo", o}};
  OptimOptions fast = o;
  fast.small_fc.fast = fast.elo.fast = true;
  cases.push_back({"small_fc_lopt", fast});
  cases.push_back({"elo", fast});
  OptimOptions rec16 = fast;  // the draws hang on the tensor's index in the table, whichever group steps it
  rec16.small_fc.bf16_record = true;
  cases.push_back({"small_fc_lopt", rec16});
  return cases;
}

// A GPT-2 table of 3 blocks (separate q/k/v) and its hook groups: 4 groups of shapes a learned optimizer
// runs in tiles, flat runs and vectors.
struct SmallGpt2 {
  Gpt2Shape s;
  ParamTable table;
  std::vector<std::vector<int>> groups;
  SmallGpt2() {
    s.layers = 3, s.channels = 128, s.heads = 2, s.vocab = 301, s.max_seq = 64;
    table = gpt2_param_table(s);
    groups = hook_groups(table, gpt2_tensors(table, s).blocks);
  }
};

std::vector<float> params_of(const Arena& a) { return a.get_params_flat(); }

// Steps `steps` times from the same parameters and gradients: `whole` over the whole table on the legacy
// stream, `grouped` group by group in the hook's order (blocks L-1 ... 0, then the rest) on a second
// stream, each group after an event, as --overlap does.
void step_both(Optimizer& whole, GroupedOptimizer& grouped, Arena& a, Arena& b, int steps, int seed0) {
  cudaStream_t side;
  CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  for (int s = 0; s < steps; s++) {
    const std::vector<float> g = make_grads(a.table(), uint32_t(seed0 + s));
    upload(a, g, true);
    upload(b, g, true);
    whole.step(StepInfo{}, 0);
    CUDA_CHECK(cudaEventRecord(ev, 0));
    CUDA_CHECK(cudaStreamWaitEvent(side, ev, 0));
    const int n = grouped.groups();
    for (int k = n - 2; k >= -1; k--) grouped.step_group(k >= 0 ? k : n - 1, StepInfo{}, side);
    CUDA_CHECK(cudaEventRecord(ev, side));
    CUDA_CHECK(cudaStreamWaitEvent(0, ev, 0));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaEventDestroy(ev));
  CUDA_CHECK(cudaStreamDestroy(side));
}

void expect_same_params(const Arena& a, const Arena& b, const std::string& what) {
  const std::vector<float> pa = params_of(a), pb = params_of(b);
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * 4), 0) << what << ": the parameters differ";
  std::vector<uint16_t> ba(pa.size()), bb(pb.size());
  CUDA_CHECK(cudaMemcpy(ba.data(), a.params_bf16(), ba.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(bb.data(), b.params_bf16(), bb.size() * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(ba.data(), bb.data(), ba.size() * 2), 0) << what << ": the bf16 copies differ";
}
}  // namespace

TEST_F(GroupedGpu, GroupsStepLikeTheWholeSetBitForBit) {
  const SmallGpt2 m;
  const std::vector<float> p0 = optim_test::random_params(m.table, 5);
  for (const auto& [name, o] : groupable_cases()) {
    SCOPED_TRACE(name + (o.small_fc.fast ? " fast" : "") + (o.small_fc.bf16_record ? " bf16_record" : ""));
    Arena a(m.table, true), b(m.table, true);
    upload(a, p0, false);
    upload(b, p0, false);
    auto whole = make_optimizer(name, o, a);
    GroupedOptimizer grouped(name, o, b, m.groups);
    ASSERT_EQ(grouped.groups(), m.s.layers + 1);
    ASSERT_EQ(grouped.name(), whole->name());
    step_both(*whole, grouped, a, b, 6, 100);
    expect_same_params(a, b, name);
    EXPECT_EQ(grouped.steps_done(), 6);
    const std::vector<float> p = params_of(b);
    EXPECT_NE(std::memcmp(p.data(), p0.data(), p.size() * 4), 0) << "the parameters did not move";
  }
}

TEST_F(GroupedGpu, GroupedStateResumesBitForBitAndIsRefusedByAWholeSetRun) {
  const SmallGpt2 m;
  const std::vector<float> p0 = optim_test::random_params(m.table, 6);
  const std::string dir = make_temp_dir();
  for (const auto& [name, o] : groupable_cases()) {
    SCOPED_TRACE(name);
    Arena a(m.table, true), b(m.table, true);
    upload(a, p0, false);
    upload(b, p0, false);
    auto whole = make_optimizer(name, o, a);
    GroupedOptimizer first(name, o, b, m.groups);
    step_both(*whole, first, a, b, 3, 200);
    const std::string path = dir + "/" + name + ".state";
    {
      SectionWriter w(path);
      first.save_state(w);
      w.commit();
    }
    // A fresh grouped optimizer loads the state and goes on as the first would have.
    GroupedOptimizer resumed(name, o, b, m.groups);
    resumed.load_state(SectionReader(path));
    EXPECT_EQ(resumed.steps_done(), 3);
    EXPECT_EQ(resumed.state_bytes(), first.state_bytes());
    step_both(*whole, resumed, a, b, 3, 300);
    expect_same_params(a, b, name + " resumed");
    // A whole-set optimizer refuses it with a sentence naming --overlap, and keeps its own state.
    auto other = make_optimizer(name, o, a);
    try {
      other->load_state(SectionReader(path));
      ADD_FAILURE() << "a whole-set optimizer loaded grouped state";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("--overlap"), std::string::npos) << e.what();
    }
    EXPECT_EQ(other->steps_done(), 0);
  }
}

TEST_F(GroupedGpu, OptimizersThatReadOtherTensorsAreRefused) {
  const SmallGpt2 m;
  Arena a(m.table, true);
  OptimOptions o;
  o.elo.clip_grad = true;
  for (const std::string name : {"velo", "muon", "celo2", "elo_celo2", "elo"}) {
    EXPECT_FALSE(why_not_groupable(name, o).empty()) << name;
    try {
      GroupedOptimizer g(name, o, a, m.groups);
      ADD_FAILURE() << name << " was grouped";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("block by block"), std::string::npos) << e.what();
    }
  }
  o.elo.clip_grad = false;
  EXPECT_TRUE(why_not_groupable("elo", o).empty());
}

// The training step itself: a bf16 GPT-2 of 3 blocks trained 4 steps with the optimizer after backward,
// and with --overlap (eager and as a CUDA graph; one and two micro-batches a step), ends on the same bits.
TEST_F(GroupedGpu, OverlappedTrainingStepEqualsTheStepAfterBackward) {
  const SmallGpt2 m;
  const int B = 2, T = 32, steps = 4;
  std::mt19937 rng(3);
  std::vector<std::vector<int>> x(8), y(8);
  for (int k = 0; k < 8; k++)
    for (int i = 0; i < B * T; i++) x[size_t(k)].push_back(int(rng() % 301)), y[size_t(k)].push_back(int(rng() % 301));
  const std::vector<float> p0 = gpt2_init(m.table, m.s, 9);
  std::string kernels;  // the first model's timed kernel choices, given to every later one
  for (const auto& c : groupable_cases()) {
    const std::string& name = c.first;
    const OptimOptions& o = c.second;
    if (o.small_fc.fast) continue;  // the exact variants suffice here; the first test covers fast
    for (int accum : {1, 2}) {
      auto train = [&](bool overlap, bool graph, std::vector<float>* losses) {
        Arena arena(m.table, true);
        upload(arena, p0, false);
        auto model = make_gpt2("bf16", m.s, arena, B, T);
        if (kernels.empty()) kernels = model->kernel_choices();
        if (!kernels.empty()) model->set_kernel_choices(kernels);
        std::unique_ptr<Optimizer> opt =
            overlap ? std::make_unique<GroupedOptimizer>(name, o, arena, m.groups) : make_optimizer(name, o, arena);
        GradClipper clipper(arena, 0.0f);
        StepRunner runner(*model, *opt, clipper, false, accum, graph, overlap);
        int next = 0;
        const BatchSource src{[&] {
                                const int k = next++ % 8;
                                return Batch{x[size_t(k)].data(), y[size_t(k)].data()};
                              },
                              [](cudaStream_t) {}};
        for (int s = 0; s < steps; s++) losses->push_back(runner.run(src).loss);
        CUDA_CHECK(cudaDeviceSynchronize());
        return params_of(arena);
      };
      std::vector<float> l0, l1, l2;
      const std::vector<float> want = train(false, false, &l0);
      const std::vector<float> eager = train(true, false, &l1);
      const std::vector<float> graph = train(true, true, &l2);
      const std::string what = name + " accum " + std::to_string(accum);
      EXPECT_EQ(std::memcmp(want.data(), eager.data(), want.size() * 4), 0) << what << ": overlap differs";
      EXPECT_EQ(std::memcmp(want.data(), graph.data(), want.size() * 4), 0) << what << ": overlap in a graph differs";
      EXPECT_EQ(l0, l1) << what;
      EXPECT_EQ(l0, l2) << what;
      EXPECT_NE(std::memcmp(want.data(), p0.data(), want.size() * 4), 0) << what << ": nothing moved";
    }
  }
}
