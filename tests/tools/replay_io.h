// The files of the optimizer replay tools (optim_replay: GPU optimizers and CPU references; ref_replay:
// the CPU references alone, built without CUDA), and the CPU-reference replay both of them run.
//
//   DIR/manifest.txt   "steps S" then one line per tensor: "tensor NAME ROLE DECAY NDIM d0 d1 ..."
//   DIR/init.bin       float32 parameters, tensors back to back in manifest order
//   DIR/grads.bin      S x the same layout
//   DIR/losses.bin     S float32 training losses (optional; VeLO needs them)
//   -> DIR/OUT         S x the same layout: parameters after each step
//   -> DIR/OUT.trace   with --trace and VeLO: each step's intermediate values, float32: loss-EMA decays (10),
//                      fraction (9), loss features (9), LSTM inputs (tensors x 30), lr_mult (tensors), and
//                      for the first step only, then direction, magnitude and step, each per element in the
//                      layout above
#pragma once
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "core/param_table.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/options.h"
#include "optim/ref/ref_optim.h"
#include "optim/ref/ref_velo.h"

struct Replay {
  std::string dir, opt = "adamw", out;
  std::vector<std::string> sets;
  bool ref = false, trace = false;
};

inline Role parse_role(const std::string& s) {
  for (Role r : {Role::Embedding, Role::PosEmbedding, Role::InputProj, Role::Hidden, Role::Head, Role::Bias,
                 Role::NormGain, Role::NormBias})
    if (s == role_name(r)) return r;
  user_error("unknown role '", s, "' in the manifest.");
}

// The file must hold exactly n floats: checked before the buffer is allocated.
inline std::vector<float> read_floats(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) user_error("cannot open '", path, "'.");
  if (uint64_t(f.tellg()) != uint64_t(n) * 4)
    user_error("'", path, "' holds ", uint64_t(f.tellg()), " bytes, but the manifest needs ", n, " floats (",
               uint64_t(n) * 4, " bytes).");
  f.seekg(0);
  std::vector<float> v(n);
  if (!f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4)))
    user_error("cannot read ", n, " floats from '", path, "'.");
  return v;
}

inline ParamTable read_manifest(const std::string& dir, int* steps) {
  std::ifstream mf(dir + "/manifest.txt");
  if (!mf) user_error("cannot open '", dir, "/manifest.txt'.");
  std::string word;
  mf >> word >> *steps;
  if (!mf || word != "steps" || *steps <= 0 || *steps > 1000000)
    user_error("manifest must start with 'steps S' (1 <= S <= 1000000).");
  ParamTable table;
  while (mf >> word) {
    if (word != "tensor") user_error("bad manifest line starting with '", word, "'.");
    TensorSpec s;
    std::string role;
    int decay = 0, ndim = 0;
    mf >> s.name >> role >> decay >> ndim;
    if (!mf || ndim < 1 || ndim > 4)
      user_error("manifest line of tensor '", s.name,
                 "' is not 'tensor NAME ROLE DECAY NDIM d0 ...' with 1 to 4 dims.");
    s.role = parse_role(role);
    s.decay = decay != 0;
    s.shape.resize(size_t(ndim));
    for (auto& d : s.shape)
      if (!(mf >> d) || d < 1 || d > (int64_t(1) << 31))
        user_error("tensor '", s.name, "' in the manifest has a dimension that is not in [1, 2^31].");
    table.add(s);
  }
  return table;
}

// Packed (manifest order, no padding) <-> the table's padded flat layout.
inline std::vector<float> to_table(const ParamTable& t, const float* packed) {
  std::vector<float> flat(size_t(t.total_elems()), 0.0f);
  for (const auto& ti : t.tensors()) {
    std::copy(packed, packed + ti.numel, flat.begin() + ti.offset);
    packed += ti.numel;
  }
  return flat;
}
inline void write_packed(std::ofstream& out, const ParamTable& t, const std::vector<float>& flat) {
  for (const auto& ti : t.tensors())
    out.write(reinterpret_cast<const char*>(flat.data() + ti.offset), std::streamsize(ti.numel * 4));
}

inline void write_velo_trace(std::ofstream& out, const ParamTable& t, const VeloTrace& tr, bool elements) {
  out.write(reinterpret_cast<const char*>(tr.loss_decays), sizeof tr.loss_decays);
  out.write(reinterpret_cast<const char*>(tr.fraction), sizeof tr.fraction);
  out.write(reinterpret_cast<const char*>(tr.loss_features), sizeof tr.loss_features);
  out.write(reinterpret_cast<const char*>(tr.lstm_in.data()), std::streamsize(tr.lstm_in.size() * 4));
  out.write(reinterpret_cast<const char*>(tr.lr_mult.data()), std::streamsize(tr.lr_mult.size() * 4));
  if (elements)
    for (const auto* v : {&tr.direction, &tr.magnitude, &tr.step}) write_packed(out, t, *v);
}

inline std::string replay_out_path(const Replay& r) {
  return r.dir + "/" + (r.out.empty() ? "out_" + r.opt + ".bin" : r.out);
}

// The CPU reference of r.opt over the replay files.
inline void run_reference(const Replay& r) {
  int steps = 0;
  const ParamTable table = read_manifest(r.dir, &steps);
  OptimOptions oo;
  for (const auto& s : r.sets) set_option(oo, s);
  validate_options(r.opt, oo);
  const size_t n = size_t(table.num_params());
  const std::vector<float> init = read_floats(r.dir + "/init.bin", n),
                           grads = read_floats(r.dir + "/grads.bin", n * size_t(steps));
  std::vector<float> losses(size_t(steps), 0.0f);
  if (std::ifstream(r.dir + "/losses.bin")) losses = read_floats(r.dir + "/losses.bin", size_t(steps));
  const std::string out_path = replay_out_path(r);
  std::ofstream out(out_path, std::ios::binary);
  VeloTrace tr;
  const bool traced = r.trace && r.opt == "velo";
  auto o = traced ? make_ref_velo_traced(table, oo, load_velo_weights(oo.velo.weights), &tr)
                  : make_ref_optimizer(r.opt, oo, table);
  std::vector<float> p = to_table(table, init.data());
  std::ofstream trace_out;
  if (traced) trace_out.open(out_path + ".trace", std::ios::binary);
  for (int s = 0; s < steps; s++) {
    o->step(p, to_table(table, grads.data() + size_t(s) * n), 1.0f, losses[size_t(s)]);
    if (traced) write_velo_trace(trace_out, table, tr, s == 0);
    write_packed(out, table, p);
  }
  if (traced && !trace_out) user_error("writing '", out_path, ".trace' failed.");
  if (!out) user_error("writing the output in '", r.dir, "' failed.");
}
