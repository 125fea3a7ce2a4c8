// The per-tensor step costs (optim/step_cost.h) over the benchmarked models give exactly what bench_optim
// printed on the H100 (results/h100_bench_optim.jsonl: bytes_per_param and ns_tflop, defaults: no bf16
// copy, no clipping, CELO2's Newton-Schulz in bf16), so its floors and the shard plan's balance agree.
#include <cmath>

#include "models/model_tables.h"
#include "optim/step_cost.h"
#include "tests/test_util.h"

namespace {
double bytes_per_param(const std::string& opt, const ParamTable& t, const StepBytesFlags& f = {}) {
  double b = 0;
  for (const auto& ti : t.tensors()) b += step_bytes_per_elem(opt, ti, f) * double(ti.numel);
  return b / double(t.num_params());
}

double ns_tflop(const std::string& opt, const ParamTable& t) {
  double f = 0;
  for (const auto& ti : t.tensors()) f += ns_step_flops(opt, ti, 5);
  return f / 1e12;
}
}  // namespace

TEST(StepCost, MatchesWhatBenchOptimPrintedOnTheH100) {
  struct Row {
    const char* model;
    const char* opt;
    double bytes, tflop;
  };
  // Without the flags' bytes: with --bf16 1 --clip 1 (6 more) the H100 printed each of these plus 6
  // (results/velo_pass_b_p for VeLO, results/learned_psq for CELO2 and the fast small_fc_lopt / ELO).
  const Row rows[] = {
      {"d12", "adamw", 28.00, 0},         {"d12", "adafactor", 24.02, 0},  {"d12", "muon", 28.00, 1.631},
      {"d12", "velo", 68.03, 0},          {"d12", "elo", 72.03, 0},        {"d12", "celo2", 64.86, 1.631},
      {"d24", "small_fc_lopt", 72.03, 0}, {"d24", "celo2", 73.96, 7.731},  {"d24", "elo_celo2", 73.96, 7.731},
      {"d24", "muon", 28.00, 7.731},      {"d48", "celo2", 79.12, 58.982}, {"d48", "adafactor", 24.01, 0},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(r.model) + " " + r.opt);
    const ParamTable t = gpt2_param_table(gpt2_shape(r.model));
    EXPECT_NEAR(bytes_per_param(r.opt, t), r.bytes, 0.005);
    EXPECT_NEAR(ns_tflop(r.opt, t), r.tflop, 0.0005);
  }
  const ParamTable vit = vit_param_table(VitShape{});
  EXPECT_NEAR(bytes_per_param("celo2", vit), 80.98, 0.005);
  EXPECT_NEAR(ns_tflop("celo2", vit), 1.522, 0.0005);
  EXPECT_NEAR(ns_tflop("muon", vit), 1.522, 0.0005);
}

TEST(StepCost, FlagsAddTheirBytesAndUnknownNamesAreRefused) {
  const ParamTable t = gpt2_param_table(gpt2_shape("d12"));
  StepBytesFlags f;
  f.bf16_copy = f.trainer_clip = f.own_clip = true;
  EXPECT_NEAR(bytes_per_param("adamw", t, f), 38.0, 1e-9);
  f = StepBytesFlags{};
  f.dx_bf16 = false;  // CELO2's fp32 direction buffer: 10 more bytes on each learned element
  EXPECT_GT(bytes_per_param("celo2", t, f), bytes_per_param("celo2", t) + 5);
  f = StepBytesFlags{};
  f.lopt_fast = true;  // 4 bytes less on the matrices' elements, none on the rest
  int64_t in_matrices = 0;
  for (const auto& ti : t.tensors()) in_matrices += ti.ndim() == 2 ? ti.numel : 0;
  const double less = 4.0 * double(in_matrices) / double(t.num_params());
  EXPECT_GT(less, 3.9);
  EXPECT_NEAR(bytes_per_param("small_fc_lopt", t, f), bytes_per_param("small_fc_lopt", t) - less, 1e-9);
  EXPECT_NEAR(bytes_per_param("elo", t, f), bytes_per_param("elo", t) - less, 1e-9);
  f = StepBytesFlags{};
  f.lopt_rec16 = true;  // bf16 records: 24 bytes less on every element, nothing for the others
  EXPECT_NEAR(bytes_per_param("velo", t, f), bytes_per_param("velo", t) - 24, 1e-9);
  EXPECT_NEAR(bytes_per_param("small_fc_lopt", t, f), bytes_per_param("small_fc_lopt", t) - 24, 1e-9);
  EXPECT_EQ(bytes_per_param("adamw", t, f), bytes_per_param("adamw", t));
  for (const auto& ti : t.tensors()) {  // CELO2: its learned tensors (hidden matrices) only
    const double d = step_bytes_per_elem("celo2", ti) - step_bytes_per_elem("celo2", ti, f);
    EXPECT_EQ(d, ti.ndim() == 2 && ti.role == Role::Hidden ? 24.0 : 0.0) << ti.name;
  }
  f = StepBytesFlags{};
  f.trainer_clip = true;  // the clip's read of the matrices taken by pass A: 4 bytes less there, only with a clip
  StepBytesFlags taken = f;
  taken.clip_in_pass_a = true;
  EXPECT_NEAR(bytes_per_param("velo", t, taken), bytes_per_param("velo", t, f) - less, 1e-9);
  for (const auto& ti : t.tensors()) {  // CELO2: on its learned matrices only, the AdamW side keeps the read
    const double d = step_bytes_per_elem("celo2", ti, f) - step_bytes_per_elem("celo2", ti, taken);
    EXPECT_EQ(d, ti.ndim() == 2 && ti.role == Role::Hidden ? 4.0 : 0.0) << ti.name;
  }
  taken.trainer_clip = false;
  EXPECT_EQ(bytes_per_param("velo", t, taken), bytes_per_param("velo", t));
  expect_user_error([&] { step_bytes_per_elem("sgd", t[0]); }, "no step cost is known");
}
