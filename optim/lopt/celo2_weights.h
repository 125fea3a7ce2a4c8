// Meta-weights of CELO2 and ELO_CELO2: PyLO's CELO2MLP (celo2.md 5.8, 7.1), read from its Hub layout
// (model.safetensors + config.json, DiamondXL/celo2 and DiamondXL/elo-celo2). Every matrix is stored
// (in, out) and applied as x . W, unlike torch's Linear: nothing is transposed on load.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct Celo2Weights {
  static constexpr int kIn = 30, kHidden = 8, kGroups = 14;
  static constexpr int kGroupDims[kGroups] = {1, 1, 1, 3, 1, 3, 1, 3, 1, 3, 3, 3, 3, 3};
  int out = 3;            // outputs: 0 direction, 1 magnitude, the rest unused (PyLO ships 3)
  std::vector<float> w0;  // 30 x 8: w0.0 ... w0.13 stacked by rows; row c = input channel c (celo2.md 5.6)
  std::vector<float> b0;  // 8
  std::vector<float> w1;  // 8 x 8   (dense_w.0)
  std::vector<float> b1;  // 8       (dense_b.0)
  std::vector<float> w2;  // 8 x out (dense_w.1)
  std::vector<float> b2;  // out     (dense_b.1)
};

// The real CELO2 weights ship with the repository (Apache-2.0, see the folder's PROVENANCE.md), so the
// default needs no download; paths are relative to the repository root.
constexpr const char* kCelo2DefaultWeights = "optim/lopt/weights/celo2";
constexpr const char* kEloCelo2DefaultWeights = "weights/elo-celo2";

// path: a folder holding model.safetensors (and config.json, checked when present) or the file itself;
// empty = the default above. Every tensor's name, shape and dtype is checked, and no other tensor may
// be in the file: a wrong file is one UserError sentence.
Celo2Weights load_celo2_weights(const std::string& path);
Celo2Weights load_elo_celo2_weights(const std::string& path);

// Writes dir/model.safetensors and dir/config.json exactly as PyLO's save_pretrained lays them out.
void save_celo2_weights(const std::string& dir, const Celo2Weights& w);
// J's initialisation scale: N(0, 1/30) for the first layer, N(0, 1/8) after; biases N(0, (0.1 scale)^2)
// rather than 0, so that tests exercise them.
Celo2Weights random_celo2_weights(uint64_t seed, float scale = 1.0f);
