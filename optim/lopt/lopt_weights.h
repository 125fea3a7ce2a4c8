// Meta-weights of the learned optimizers, in PyLO's (torch) layout, read from the published files:
//  - small_fc_lopt / μLO: btherien/mulo  model.safetensors (+ config.json)        small_fc_lopt.md 6.1
//  - ELO: DiamondXL/elo, the same MetaMLP layout                                  celo2.md 7.3
//  - CELO2, ELO_CELO2: celo2_weights.h
//  - VeLO: Pauljanson002/VeLO_RNN and Pauljanson002/VeLO_MLP safetensors, or the original JAX/flax
//    msgpack "params" checkpoint (converted on load)                              velo.md 8.1-8.3
// Every name, shape and dtype is checked; a missing or wrong file is one sentence that says what to run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct SmallFcWeights {                       // MetaMLP(39, 32, hidden_layers=1): torch Linear layout (out, in)
  std::vector<float> w0, b0, w1, b1, w2, b2;  // 32x39, 32, 32x32, 32, 2x32, 2
};

struct VeloWeights {
  static constexpr int kIn = 30, kCand = 256, kMlp = 159;
  // LSTM / hypernetwork (torch layout, weight = out x in)
  std::vector<float> mix1_w, mix1_b;    // dead layer "linear" (loaded, unused)  512x30
  std::vector<float> mix2_w, mix2_b;    // max-pooled branch ("linear_1")        512x30
  std::vector<float> final_w, final_b;  // direct branch ("linear_2")             512x30
  std::vector<float> lstm_w, lstm_b;    // 2048x1024 (gate rows i,g,f,o; cols [U, h]), 2048
  std::vector<float> ctrl_w, ctrl_b;    // 256x512, 256
  std::vector<float> ss_w, ss_b;        // 1x512, 1
  std::vector<float> init_h, init_c;    // 512 each
  // The 256 candidate MLPs (30 -> 4 -> 4 -> 3), one row of 159 per candidate:
  // W0 (4x30) | b0 (4) | W1 (4x4) | b1 (4) | W2 (3x4) | b2 (3), torch (out, in) order, at these offsets:
  static constexpr int kW0 = 0, kB0 = 120, kW1 = 124, kB1 = 140, kW2 = 144, kB2 = 156;
  std::vector<float> cand;  // 256 x 159
};

// path: a folder holding model.safetensors, or the file itself; empty = "weights/mulo".
SmallFcWeights load_small_fc_weights(const std::string& path);
// ELO's network is small_fc_lopt's (MetaMLP 39-32-32-2, same names and shapes); empty = "weights/elo".
SmallFcWeights load_elo_weights(const std::string& path);
// path: a folder with VeLO_RNN/ and VeLO_MLP/ (each model.safetensors), or a flax msgpack params file;
// empty = "weights".
VeloWeights load_velo_weights(const std::string& path);

// Writers in the published formats (tests and benchmarks make their own files: nothing is downloaded).
void save_small_fc_weights(const std::string& dir, const SmallFcWeights& w);  // dir/model.safetensors + config.json
void save_velo_weights_pylo(const std::string& dir, const VeloWeights& w);    // dir/VeLO_RNN, dir/VeLO_MLP
void save_velo_weights_jax(const std::string& file, const VeloWeights& w);    // flax msgpack params tree
SmallFcWeights random_small_fc_weights(uint64_t seed, float scale = 1.0f);    // N(0, scale^2/fan_in)
VeloWeights random_velo_weights(uint64_t seed, float scale = 0.05f);          // N(0, scale^2)
