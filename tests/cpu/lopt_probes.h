// Probe meta-weights for the learned optimizers' CPU references: MLPs that pass one input feature
// straight through to the step, so a test reads that feature off the parameters. Shared by the
// every-feature probes (test_lopt_probes.cpp), the tie-rule tests (test_tie_rules.cpp) and the CELO2 tests.
#pragma once
#include <algorithm>
#include <vector>

#include "optim/lopt/celo2_weights.h"
#include "optim/lopt/lopt_weights.h"

// small_fc_lopt: layer-0 rows 0 and 1 read +x_c and -x_c, layer 1 passes both through, and the
// direction output is relu(x_c) - relu(-x_c) = x_c (magnitude 0: factor 1).
inline SmallFcWeights small_fc_probe_weights(int c) {
  SmallFcWeights w;
  w.w0.assign(32 * 39, 0.0f);
  w.b0.assign(32, 0.0f);
  w.w1.assign(1024, 0.0f);
  w.b1.assign(32, 0.0f);
  w.w2.assign(64, 0.0f);
  w.b2.assign(2, 0.0f);
  w.w0[size_t(c)] = 1.0f;
  w.w0[size_t(39 + c)] = -1.0f;
  w.w1[0] = 1.0f;
  w.w1[33] = 1.0f;
  w.w2[0] = 1.0f;
  w.w2[1] = -1.0f;
  return w;
}

// VeLO with every control 0.01 (so each tensor's MLP is the candidate mean, i.e. the probe itself) and
// lr_mult 1.
inline VeloWeights velo_probe_base() {
  VeloWeights w = random_velo_weights(3, 0.05f);
  std::fill(w.ctrl_w.begin(), w.ctrl_w.end(), 0.0f);
  std::fill(w.ctrl_b.begin(), w.ctrl_b.end(), 0.01f);
  std::fill(w.ss_w.begin(), w.ss_w.end(), 0.0f);
  w.ss_b[0] = 1.0f;
  return w;
}

// The per-tensor MLP (159 numbers) that passes feature c through: W0 rows 0 and 1 read +x_c and -x_c,
// W1 = I, W2 row 0 gives the direction relu(x_c) - relu(-x_c) = x_c.
inline std::vector<float> velo_probe_mlp(int c) {
  std::vector<float> th(159, 0.0f);
  th[size_t(c)] = 1.0f;
  th[size_t(30 + c)] = -1.0f;
  for (int k = 0; k < 4; k++) th[size_t(124 + 5 * k)] = 1.0f;
  th[144] = 1.0f;
  th[145] = -1.0f;
  return th;
}

// Every one of the 256 candidates set to the MLP th.
inline void set_velo_candidates(VeloWeights* w, const std::vector<float>& th) {
  for (int j = 0; j < 256; j++) std::copy(th.begin(), th.end(), w->cand.begin() + j * 159);
}

// CELO2 (CELO2MLP layout, (in, out)): channel c feeds +x_c and -x_c to hidden units 0 and 1, the 8x8
// layer passes both through, and the direction is relu(x_c) - relu(-x_c) = x_c (celo2.md 10).
inline Celo2Weights celo2_probe_weights(int c) {
  Celo2Weights w;
  const int H = Celo2Weights::kHidden;
  w.w0.assign(size_t(Celo2Weights::kIn * H), 0.0f);
  w.b0.assign(H, 0.0f);
  w.w1.assign(size_t(H * H), 0.0f);
  w.b1.assign(H, 0.0f);
  w.w2.assign(size_t(H * w.out), 0.0f);
  w.b2.assign(size_t(w.out), 0.0f);
  w.w0[size_t(c * H)] = 1.0f;
  w.w0[size_t(c * H + 1)] = -1.0f;
  w.w1[0] = 1.0f;
  w.w1[size_t(H + 1)] = 1.0f;
  w.w2[0] = 1.0f;
  w.w2[size_t(w.out)] = -1.0f;
  return w;
}
