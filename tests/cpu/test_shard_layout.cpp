// The sharded data-parallel step's host side: the arena laid out rank by rank (ParamTable::set_layout,
// sharded_table), the whole-table chunk partition whose per-rank partial sums add up to one GPU's
// (plan_table_chunks), and what a checkpoint records of the set-up (train/checkpoint.h).
#include <algorithm>

#include "common/sections.h"
#include "common/temp_dir.h"
#include "core/chunks.h"
#include "core/shard_plan.h"
#include "models/model_tables.h"
#include "optim/step_cost.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"

namespace {
ParamTable small_gpt2() {
  Gpt2Shape s;
  s.layers = 2;
  s.channels = 64;
  s.heads = 2;
  s.vocab = 100;  // the head reserves padded rows: a tensor whose slot is longer than its numel
  s.max_seq = 16;
  return gpt2_param_table(s);
}

ShardPlan plan_of(const ParamTable& t, int world) {
  return plan_shards(t, world, [](const TensorInfo& ti) { return shard_step_cost("adamw", ti); });
}
}  // namespace

TEST(ShardLayout, TensorsMoveAndKeepTheirNaturalPlace) {
  const ParamTable t = small_gpt2();
  for (int world : {1, 2, 3}) {
    const ShardPlan p = plan_of(t, world);
    const ParamTable s = sharded_table(t, p);
    ASSERT_EQ(s.size(), t.size());
    EXPECT_EQ(s.total_elems(), p.total_elems());
    EXPECT_EQ(s.natural_total(), t.total_elems());
    EXPECT_EQ(s.fingerprint(), t.fingerprint());  // the same model
    for (int i = 0; i < t.size(); i++) {
      EXPECT_EQ(s[i].offset, p.offset[size_t(i)]) << s[i].name;
      EXPECT_EQ(s[i].natural, t[i].offset) << s[i].name;
      // Rank r's tensors lie in its range.
      const int r = p.owner[size_t(i)];
      EXPECT_GE(s[i].offset, p.begin(r));
      EXPECT_LE(s[i].offset + s[i].numel, p.begin(r) + p.shard_elems);
    }
    if (world == 1) {
      for (int i = 0; i < t.size(); i++) EXPECT_EQ(s[i].offset, t[i].offset);
    }
  }
}

TEST(ShardLayout, InitialisationAndCheckpointLayoutDoNotDependOnTheLayout) {
  const ParamTable t = small_gpt2();
  const ParamTable s = sharded_table(t, plan_of(t, 3));
  const std::vector<float> a = init_params(t, 7), b = init_params(s, 7);
  ASSERT_EQ(int64_t(b.size()), s.total_elems());
  // Every tensor gets the same values wherever it lies; the natural layout of the sharded arena is the
  // single-GPU arena, bit for bit (padding zero), and back.
  EXPECT_EQ(to_natural_layout(s, b), a);
  EXPECT_EQ(from_natural_layout(s, a), b);
  EXPECT_EQ(to_natural_layout(t, a), a);
  int moved = 0;
  for (int i = 0; i < t.size(); i++) moved += s[i].offset != t[i].offset;
  EXPECT_GT(moved, t.size() / 2);  // the test means something: most tensors did move
}

TEST(ShardLayout, OverlappingOrMisalignedLayoutsAreRefused) {
  ParamTable t = small_gpt2();
  std::vector<int64_t> off;
  for (const auto& ti : t.tensors()) off.push_back(ti.natural);
  std::vector<int64_t> overlap = off;
  overlap[1] = overlap[0];
  EXPECT_ANY_THROW(t.set_layout(overlap, t.total_elems()));
  std::vector<int64_t> odd = off;
  odd.back() += 1;
  EXPECT_ANY_THROW(t.set_layout(odd, t.total_elems() + 32));
  EXPECT_ANY_THROW(t.set_layout(off, t.total_elems() - 32));  // the last tensor would not fit
  t.set_layout(off, t.total_elems() + 64);                    // room at the end is fine
  EXPECT_EQ(t.total_elems(), t.natural_total() + 64);
}

// Each rank's chunks cover exactly its parts, at the same indices on every rank, so that adding the
// ranks' per-chunk sums gives each chunk's sum once; together they are the single-GPU partition. Also where
// the plan cut a tensor (GPT-2 124M's table under AdamW at 4 ranks, in the grad-norm's 16384-element chunks).
TEST(ShardLayout, TableChunksPartitionTheTableAcrossRanks) {
  struct Case {
    ParamTable table;
    ShardPlan plan;
    int chunk;
  };
  const ParamTable big = gpt2_param_table(gpt2_shape("d12"));
  const ShardPlan cut = plan_shards(
      big, 4, [](const TensorInfo& ti) { return shard_step_cost("adamw", ti); },
      [](const TensorInfo&) { return ShardPlan::kCutElems; });
  ASSERT_TRUE(cut.any_cut());
  for (const Case& cs : {Case{small_gpt2(), plan_of(small_gpt2(), 3), 64}, Case{big, cut, 16384}}) {
    const ParamTable t = sharded_table(cs.table, cs.plan);
    std::vector<int64_t> at;
    for (const auto& ti : t.tensors()) at.push_back(ti.offset);
    const std::vector<Chunk> whole = plan_chunks(t, all_tensors(t), at, cs.chunk);
    std::vector<int> covered(whole.size(), 0);
    for (int r = 0; r < cs.plan.world; r++) {
      const std::vector<Chunk> c = plan_table_chunks(t, cs.plan.owned(r), cs.chunk);
      ASSERT_EQ(c.size(), whole.size());
      for (size_t k = 0; k < c.size(); k++) {
        EXPECT_EQ(c[k].p_begin, whole[k].p_begin);
        EXPECT_EQ(c[k].tensor, whole[k].tensor);
        const int64_t e = c[k].p_begin - t[c[k].tensor].offset, cut_at = cs.plan.cut[size_t(c[k].tensor)];
        const int owner = cs.plan.owner[size_t(c[k].tensor)] + (cut_at > 0 && e >= cut_at ? 1 : 0);
        EXPECT_EQ(c[k].n, owner == r ? whole[k].n : 0);
        covered[k] += c[k].n > 0;
      }
    }
    for (size_t k = 0; k < covered.size(); k++) EXPECT_EQ(covered[k], 1) << "chunk " << k;
    EXPECT_EQ(plan_table_chunks(t, {}, cs.chunk).size(), whole.size());  // empty = every tensor
    for (const Chunk& c : plan_table_chunks(t, {}, cs.chunk)) EXPECT_GT(c.n, 0);
  }
}

// A checkpoint records the world size and the sharded mode's owners; a run with another world size or
// another mode is refused with a sentence, and a rank file of another step or model too.
TEST(ShardLayout, CheckpointsRecordTheDataParallelSetUp) {
  TempDir dir("ckpt_dp_");
  const ParamTable t = small_gpt2();
  const ShardPlan p2 = plan_of(t, 2);
  DpRecord one, ar2, sh2, sh2b;
  ar2.world = sh2.world = sh2b.world = 2;
  sh2.owner = p2.owner;
  sh2b.owner = p2.owner;
  sh2b.owner.front() = 1 - sh2b.owner.front();  // another plan
  ASSERT_NE(sh2b.owner, sh2.owner);
  DpRecord sh2c = sh2;  // the same owners, a tensor cut between the two
  sh2c.cut.assign(size_t(t.size()), 0);
  sh2c.cut.front() = 64;
  auto write = [&](const std::string& name, const DpRecord* dp, int64_t step) {
    SectionWriter w(dir.path() + "/" + name);
    const uint64_t f = t.fingerprint();
    w.put("model.table", &f, sizeof f);
    if (dp) {
      w.put_i64("dp.world", dp->world);
      if (!dp->owner.empty()) w.put_vector("dp.owner", dp->owner);
      if (!dp->cut.empty()) w.put_vector("dp.cut", dp->cut);
    }
    w.put_i64("train.step", step);
    w.put_vector("train.loader", std::vector<int64_t>{1, 2, step});
    w.commit();
    return dir.path() + "/" + name;
  };
  const std::string old = write("old.bin", nullptr, 5), sharded = write("sharded.bin", &sh2, 5),
                    allred = write("allreduce.bin", &ar2, 5), cut = write("cut.bin", &sh2c, 5);
  check_checkpoint_dp(SectionReader(old), one);  // files from before record nothing: one process
  check_checkpoint_dp(SectionReader(sharded), sh2);
  check_checkpoint_dp(SectionReader(allred), ar2);
  expect_user_error([&] { check_checkpoint_dp(SectionReader(old), ar2); },
                    "was written by 1 process, this run has 2; resume it with 1");
  expect_user_error([&] { check_checkpoint_dp(SectionReader(allred), sh2); },
                    "was written without --shard 1; resume it without --shard 1.");
  expect_user_error([&] { check_checkpoint_dp(SectionReader(sharded), ar2); }, "was written with --shard 1");
  expect_user_error([&] { check_checkpoint_dp(SectionReader(sharded), sh2b); },
                    "shares the tensors among the processes differently");
  check_checkpoint_dp(SectionReader(cut), sh2c);
  expect_user_error([&] { check_checkpoint_dp(SectionReader(cut), sh2); },
                    "shares the tensors among the processes differently");
  expect_user_error([&] { check_checkpoint_dp(SectionReader(sharded), sh2c); },
                    "shares the tensors among the processes differently");
  EXPECT_EQ(read_rank_position(SectionReader(sharded), t, sh2, 5), (std::vector<int64_t>{1, 2, 5}));
  expect_user_error([&] { read_rank_position(SectionReader(sharded), t, sh2, 6); },
                    "is of step 5, its rank 0 file of step 6; resume from a complete checkpoint.");
  expect_user_error([&] { read_rank_position(SectionReader(sharded), vit_param_table(vit_shape("vit-test")), sh2, 5); },
                    "holds a different model than its rank 0 file");
  EXPECT_EQ(rank_checkpoint_path("ck/model_00000005.bin", 3), "ck/model_00000005.bin.rank3");
}
