// optim_replay: runs one of our GPU optimizers on tensors and gradients given in files, and writes the
// parameters after every step. The PyTorch cross-check (tests/torch_crosscheck.py) drives it.
//
//   DIR/manifest.txt   "steps S" then one line per tensor: "tensor NAME ROLE DECAY NDIM d0 d1 ..."
//   DIR/init.bin       float32 parameters, tensors back to back in manifest order
//   DIR/grads.bin      S x the same layout
//   -> DIR/out_<opt>.bin  S x the same layout: parameters after each step
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "optim/optimizer.h"

namespace {
Role parse_role(const std::string& s) {
  for (Role r : {Role::Embedding, Role::PosEmbedding, Role::InputProj, Role::Hidden, Role::Head, Role::Bias, Role::NormGain,
                 Role::NormBias})
    if (s == role_name(r)) return r;
  user_error("unknown role '", s, "' in the manifest.");
}

std::vector<float> read_floats(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v(n);
  if (!f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4))) user_error("cannot read ", n, " floats from '", path, "'.");
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir, opt = "adamw";
  std::vector<std::string> sets;
  Cli cli("optim_replay", "Replays gradients from files through one GPU optimizer (for tests/torch_crosscheck.py).");
  cli.add('d', "dir", &dir, "folder with manifest.txt, init.bin, grads.bin");
  cli.add('o', "optimizer", &opt, "adamw | adafactor | muon");
  cli.add('s', "set", &sets, "optimizer option key=value (repeatable)");
  try {
    if (!cli.parse(argc, argv)) return 0;
    std::ifstream mf(dir + "/manifest.txt");
    if (!mf) user_error("cannot open '", dir, "/manifest.txt'.");
    std::string word;
    int steps = 0;
    mf >> word >> steps;
    if (word != "steps" || steps <= 0) user_error("manifest must start with 'steps S'.");
    ParamTable table;
    while (mf >> word) {
      if (word != "tensor") user_error("bad manifest line starting with '", word, "'.");
      TensorSpec s;
      std::string role;
      int decay = 0, ndim = 0;
      mf >> s.name >> role >> decay >> ndim;
      s.role = parse_role(role);
      s.decay = decay != 0;
      s.shape.resize(size_t(ndim));
      for (auto& d : s.shape) mf >> d;
      table.add(s);
    }
    OptimOptions oo;
    for (const auto& s : sets) set_option(oo, s);
    Arena arena(table, false);
    const size_t n = size_t(table.num_params());
    std::vector<float> init = read_floats(dir + "/init.bin", n), grads = read_floats(dir + "/grads.bin", n * size_t(steps));
    auto load = [&](const float* src, bool g) {
      size_t at = 0;
      for (const auto& t : table.tensors()) {
        if (g) arena.set_grad(t.index, src + at);
        else arena.set_param(t.index, src + at);
        at += size_t(t.numel);
      }
    };
    load(init.data(), false);
    auto o = make_optimizer(opt, oo, arena);
    std::ofstream out(dir + "/out_" + opt + ".bin", std::ios::binary);
    for (int s = 0; s < steps; s++) {
      load(grads.data() + size_t(s) * n, true);
      o->step(StepInfo{}, 0);
      for (const auto& t : table.tensors()) {
        auto p = arena.get_param(t.index);
        out.write(reinterpret_cast<const char*>(p.data()), std::streamsize(p.size() * 4));
      }
    }
    if (!out) user_error("writing the output in '", dir, "' failed.");
  } catch (const UserError& e) {
    std::fprintf(stderr, "optim_replay: %s\n", e.what());
    return 1;
  }
  return 0;
}
