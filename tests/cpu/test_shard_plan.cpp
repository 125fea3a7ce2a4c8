// The shard plan of the sharded data-parallel step (core/shard_plan.h): every tensor owned once, each
// rank's tensors one contiguous aligned range inside its share, the shares equal, the load balanced, and
// one rank laid out exactly as the single-GPU arena.
#include <algorithm>
#include <set>

#include "core/shard_plan.h"
#include "models/model_tables.h"
#include "optim/step_cost.h"
#include "tests/test_util.h"
#include "train/flags.h"

namespace {
ParamTable gpt2_124m() { return gpt2_param_table(gpt2_shape("d12")); }

std::function<double(const TensorInfo&)> cost_of(const std::string& opt) {
  return [opt](const TensorInfo& t) { return shard_step_cost(opt, t); };
}

// The invariants every plan must hold, whatever the cost.
void expect_valid(const ParamTable& t, const ShardPlan& p) {
  ASSERT_EQ(int(p.owner.size()), t.size());
  ASSERT_EQ(int(p.order.size()), t.size());
  std::vector<int> sorted = p.order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < t.size(); i++) ASSERT_EQ(sorted[size_t(i)], i) << "order is not a permutation";
  EXPECT_EQ(p.shard_elems % ParamTable::kAlignElems, 0);
  for (int r = 0; r < p.world; r++) {
    EXPECT_LE(p.used[size_t(r)], p.shard_elems);
    // The rank's tensors, in layout order, tile [begin(r), begin(r) + used[r]) without gaps or overlap.
    int64_t next = p.begin(r);
    for (int i : p.order) {
      if (p.owner[size_t(i)] != r) continue;
      EXPECT_EQ(p.offset[size_t(i)], next) << t[i].name;
      EXPECT_EQ(p.offset[size_t(i)] % ParamTable::kAlignElems, 0) << t[i].name;
      next += shard_slot_elems(t[i]);
    }
    EXPECT_EQ(next, p.begin(r) + p.used[size_t(r)]);
  }
  // Layout order is rank by rank.
  for (size_t k = 1; k < p.order.size(); k++) EXPECT_LE(p.owner[size_t(p.order[k - 1])], p.owner[size_t(p.order[k])]);
}
}  // namespace

TEST(ShardPlan, OneRankIsTheSingleGpuArena) {
  const ParamTable t = gpt2_124m();
  const ShardPlan p = plan_shards(t, 1, cost_of("adamw"));
  expect_valid(t, p);
  for (int i = 0; i < t.size(); i++) {
    EXPECT_EQ(p.order[size_t(i)], i);
    EXPECT_EQ(p.offset[size_t(i)], t[i].offset) << t[i].name;
  }
  EXPECT_EQ(p.total_elems(), t.total_elems());
}

TEST(ShardPlan, EveryOptimizerEveryWorldIsValidAndBalanced) {
  const ParamTable t = gpt2_124m();
  for (const std::string opt : {"adamw", "adafactor", "muon", "small_fc_lopt", "velo", "elo", "celo2", "elo_celo2"})
    for (int world : {1, 2, 3, 4, 8}) {
      SCOPED_TRACE(opt + " x" + std::to_string(world));
      const ShardPlan p = plan_shards(t, world, cost_of(opt));
      expect_valid(t, p);
      double total = 0, largest = 0;  // largest: one piece's (separate q, k, v go together)
      for (const ParamTable::Piece& pc : t.pieces()) {
        double c = 0;
        for (int i = pc.first; i < pc.first + pc.count; i++) c += shard_step_cost(opt, t[i]);
        total += c;
        largest = std::max(largest, c);
      }
      const double most = *std::max_element(p.load.begin(), p.load.end());
      // Greedy list scheduling: no rank exceeds the mean by more than one piece's cost.
      EXPECT_LE(most, total / world + largest + 1e-12);
      // GPT-2's tensors are many and similar (except wte): at 2 and 4 ranks, within 10% of perfect or
      // bounded by the embedding alone.
      if (world == 2 || world == 4) {
        EXPECT_LE(most, std::max(1.10 * total / world, largest + 1e-12));
      }
    }
}

// Muon's cost is mostly its Newton-Schulz: a plan balanced by bytes alone (AdamW's costs) leaves one rank
// with clearly more Newton-Schulz work than the plan made with Muon's costs.
TEST(ShardPlan, MuonBalancesNewtonSchulzNotJustBytes) {
  const ParamTable t = gpt2_124m();
  for (int world : {2, 4}) {
    SCOPED_TRACE(world);
    auto most_muon_load = [&](const ShardPlan& p) {
      std::vector<double> load(size_t(world), 0.0);
      for (const auto& ti : t.tensors()) load[size_t(p.owner[size_t(ti.index)])] += shard_step_cost("muon", ti);
      return *std::max_element(load.begin(), load.end());
    };
    const double by_muon = most_muon_load(plan_shards(t, world, cost_of("muon")));
    const double by_bytes = most_muon_load(plan_shards(t, world, cost_of("adamw")));
    EXPECT_LT(by_muon, 0.9 * by_bytes);
  }
}

TEST(ShardPlan, DeterministicAndRefusesNoRanks) {
  const ParamTable t = gpt2_124m();
  const ShardPlan a = plan_shards(t, 4, cost_of("velo")), b = plan_shards(t, 4, cost_of("velo"));
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.offset, b.offset);
  expect_user_error([&] { plan_shards(t, 0, cost_of("adamw")); }, "at least 1");
  expect_user_error([&] { shard_step_cost("sgd", t[0]); }, "no step cost is known");
}

namespace {
struct ModelCase {
  std::string name;
  ParamTable table;
  std::vector<BlockTensors> blocks;
};

// Every model a user can train, with separate and with fused q/k/v.
std::vector<ModelCase> every_model() {
  std::vector<ModelCase> v;
  for (bool separate : {true, false}) {
    const std::string qkv = separate ? " separate" : " fused";
    for (const char* name : {"d12", "d24", "d36", "d48", "tiny"}) {
      Gpt2Shape s = model_by_name(name, kGpt2Sizes | kGpt2Tiny).gpt2;
      s.separate_qkv = separate;
      ParamTable t = gpt2_param_table(s);
      v.push_back({name + qkv, t, gpt2_tensors(t, s).blocks});
    }
    for (const char* name : {"vit-ti16", "vit-s16", "vit-b16", "vit-l16", "vit-test", "vit-ti4"}) {
      VitShape s = vit_shape(name);
      if (std::string(name) == "vit-ti4") {  // train_vit's default: Fashion-MNIST
        s.image = 28;
        s.in_chans = 1;
        s.classes = 10;
      }
      s.separate_qkv = separate;
      ParamTable t = vit_param_table(s);
      v.push_back({name + qkv, t, vit_tensors(t, s).blocks});
    }
  }
  return v;
}
}  // namespace

// The plan of every model x optimizer x N = 1...8 that DataParallel accepts lays out what the GPU block
// reads as one piece (separate q, k, v: one (3C, C) matrix and one (3C) bias) back to back, in order, on
// one rank: the check TransformerBlock makes (qkv_is_one_piece) holds for the arena every rank builds.
TEST(ShardPlan, EveryPlanKeepsWhatTheKernelsReadAsOnePiece) {
  int checked = 0;
  for (const ModelCase& m : every_model())
    for (const std::string opt : {"adamw", "adafactor", "muon", "small_fc_lopt", "velo", "elo", "celo2", "elo_celo2"})
      for (int world = 1; world <= 8; world++) {
        SCOPED_TRACE(m.name + " " + opt + " x" + std::to_string(world));
        ASSERT_LE(world, m.table.size());
        const ShardPlan p = plan_shards(m.table, world, cost_of(opt));
        expect_valid(m.table, p);
        ParamTable laid;
        ASSERT_NO_THROW(laid = sharded_table(m.table, p));  // set_layout refuses a split piece
        for (const BlockTensors& b : m.blocks) {
          ASSERT_TRUE(qkv_is_one_piece(laid, b)) << "block tensors " << b.qkvw[0];
          if (b.qkvw[1] < 0) continue;
          for (int k = 1; k < 3; k++) {
            EXPECT_EQ(p.owner[size_t(b.qkvw[k])], p.owner[size_t(b.qkvw[0])]);
            EXPECT_EQ(p.owner[size_t(b.qkvb[k])], p.owner[size_t(b.qkvb[0])]);
          }
        }
        checked++;
      }
  EXPECT_EQ(checked, 22 * 8 * 8);
}

// The pieces are what add_block marks: with separate q/k/v each block has two pieces of three (weights,
// biases), fused none; and a layout that splits a piece is refused.
TEST(ShardPlan, PiecesAreTheSeparateQkvTrios) {
  for (bool separate : {true, false}) {
    Gpt2Shape s = gpt2_shape("d12");
    s.separate_qkv = separate;
    const ParamTable t = gpt2_param_table(s);
    int trios = 0;
    for (const ParamTable::Piece& pc : t.pieces()) {
      ASSERT_TRUE(pc.count == 1 || pc.count == 3) << t[pc.first].name;
      if (pc.count == 3) trios++;
    }
    EXPECT_EQ(trios, separate ? 2 * s.layers : 0);
  }
  Gpt2Shape s = gpt2_shape("d12");
  ParamTable t = gpt2_param_table(s);
  const BlockTensors b = gpt2_tensors(t, s).blocks[0];
  std::vector<int64_t> off(size_t(t.size()));
  for (int i = 0; i < t.size(); i++) off[size_t(i)] = t[i].offset;
  std::swap(off[size_t(b.qkvw[1])], off[size_t(b.qkvw[2])]);  // k and v swapped: same slots, wrong order
  EXPECT_THROW(t.set_layout(off, t.total_elems()), std::exception);
}
