// The optimizer options the trainers make from their flags (train/train_flags.h): one function for both
// programs, each program's recipe given as data. The values pinned here are the ones each program made
// with a function of its own before, so that a recipe cannot change unnoticed.
#include "optim/options.h"
#include "tests/test_util.h"
#include "train/train_flags.h"

namespace {
TrainFlags vit_flags() {  // train_vit's Args: its defaults and its recipe (timm / DeiT)
  TrainFlags f;
  f.lr = 5e-4;
  f.wd = 0.05;
  f.steps = 9400;
  f.adamw_beta2 = AdamWOptions().beta2;
  f.muon_aux_decay = true;
  return f;
}
}  // namespace

TEST(TrainOptions, Gpt2Recipe) {
  const OptimOptions o = optimizer_defaults(TrainFlags{});  // train_gpt2's: -l 6e-4, -c 0.1, -x 1000
  const OptimOptions base;                                  // optim/options.h's: torch's, Keller's, PyLO's
  EXPECT_EQ(o.adamw.lr, 6e-4);
  EXPECT_EQ(o.adamw.beta2, 0.95);  // llm.c's
  EXPECT_EQ(o.adamw.beta1, base.adamw.beta1);
  EXPECT_EQ(o.adamw.weight_decay, 0.1);
  EXPECT_EQ(o.muon.lr, 0.02);
  EXPECT_EQ(o.muon.aux.lr, 6e-4);
  EXPECT_EQ(o.muon.aux.beta2, 0.95);
  EXPECT_EQ(o.muon.aux.weight_decay, 0.0);       // -c does not reach Muon's AdamW part
  EXPECT_EQ(o.adafactor.lr, base.adafactor.lr);  // -l not given
  EXPECT_EQ(o.adafactor.weight_decay, 0.0);
  EXPECT_EQ(o.small_fc.lr, 1.0);  // as meta-trained
  EXPECT_EQ(o.velo.lr, 1.0);
  EXPECT_EQ(o.celo2.lr, base.celo2.lr);
  EXPECT_EQ(o.elo.lr, base.elo.lr);
  EXPECT_EQ(o.elo_celo2.lr, base.elo_celo2.lr);
  EXPECT_EQ(o.velo.num_steps, 1000);
  EXPECT_EQ(o.velo.weights, "");
}

TEST(TrainOptions, VitRecipe) {
  const OptimOptions o = optimizer_defaults(vit_flags());
  EXPECT_EQ(o.adamw.lr, 5e-4);
  EXPECT_EQ(o.adamw.beta2, 0.999);  // torch's
  EXPECT_EQ(o.adamw.weight_decay, 0.05);
  EXPECT_EQ(o.muon.lr, 0.02);
  EXPECT_EQ(o.muon.aux.lr, 5e-4);
  EXPECT_EQ(o.muon.aux.beta2, 0.95);
  EXPECT_EQ(o.muon.aux.weight_decay, 0.05);  // -c decays Muon's AdamW part too
  EXPECT_EQ(o.adafactor.weight_decay, 0.0);
  EXPECT_EQ(o.velo.num_steps, 9400);
}

// -l reaches Adafactor and the learned optimizers only when given; --lopt-weights every learned one.
TEST(TrainOptions, LrGivenAndWeightsReachEveryOptimizer) {
  TrainFlags f = vit_flags();
  f.lr = 0.25;
  f.lr_given = true;
  f.lopt_weights = "weights/x";
  const OptimOptions o = optimizer_defaults(f);
  for (double lr :
       {o.adamw.lr, o.muon.aux.lr, o.adafactor.lr, o.small_fc.lr, o.velo.lr, o.celo2.lr, o.elo.lr, o.elo_celo2.lr})
    EXPECT_EQ(lr, 0.25);
  EXPECT_EQ(o.muon.lr, 0.02);
  for (const std::string& w : {o.small_fc.weights, o.velo.weights, o.celo2.weights, o.elo.weights, o.elo_celo2.weights})
    EXPECT_EQ(w, "weights/x");
}

// The schedule of -k, -u, -q, -x, then --set over everything, the recipe included.
TEST(TrainOptions, ScheduleAndSetComeLast) {
  TrainFlags f;
  f.schedule = "warmup";
  f.warmup = 10;
  f.sets = {"adamw.beta2=0.99", "muon.aux.wd=0.5"};
  const OptimOptions o = train_optimizer_options(f);
  EXPECT_EQ(o.adamw.beta2, 0.99);
  EXPECT_EQ(o.muon.aux.weight_decay, 0.5);
  EXPECT_EQ(o.adamw.lr, 6e-4);
  EXPECT_LT(o.schedule.factor(0), 0.5);
  EXPECT_EQ(o.schedule.factor(10), 1.0);
  EXPECT_EQ(o.schedule.factor(999), 1.0);
}
