// optim_replay: runs one of our optimizers (the GPU one, or with --ref its CPU reference) on tensors,
// gradients and losses given in files (tests/tools/replay_io.h), and writes the parameters after every
// step. The PyTorch and PyLO cross-checks (tests/torch_crosscheck.py, tests/pylo_crosscheck.py) drive it;
// build/ref_replay runs the CPU references without CUDA.
#include <cstdio>
#include <fstream>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/tool_errors.h"
#include "optim/optimizer.h"
#include "tests/tools/replay_io.h"

namespace {
void run(const Replay& r) {
  if (r.ref) return run_reference(r);
  int steps = 0;
  ParamTable table = read_manifest(r.dir, &steps);
  OptimOptions oo;
  for (const auto& s : r.sets) set_option(oo, s);
  const size_t n = size_t(table.num_params());
  std::vector<float> init = read_floats(r.dir + "/init.bin", n),
                     grads = read_floats(r.dir + "/grads.bin", n * size_t(steps));
  std::vector<float> losses(size_t(steps), 0.0f);
  if (std::ifstream(r.dir + "/losses.bin")) losses = read_floats(r.dir + "/losses.bin", size_t(steps));
  std::ofstream out(replay_out_path(r), std::ios::binary);
  Arena arena(table, false);
  auto load = [&](const float* src, bool g) {
    for (const auto& t : table.tensors()) {
      if (g)
        arena.set_grad(t.index, src);
      else
        arena.set_param(t.index, src);
      src += t.numel;
    }
  };
  load(init.data(), false);
  auto o = make_optimizer(r.opt, oo, arena);
  DeviceBuffer<float> d_loss(1, "loss");
  for (int s = 0; s < steps; s++) {
    load(grads.data() + size_t(s) * n, true);
    d_loss.upload(&losses[size_t(s)], 1);
    StepInfo info;
    info.d_loss = d_loss.get();
    o->step(info, 0);
    for (const auto& t : table.tensors()) {
      auto p = arena.get_param(t.index);
      out.write(reinterpret_cast<const char*>(p.data()), std::streamsize(p.size() * 4));
    }
  }
  if (!out) user_error("writing the output in '", r.dir, "' failed.");
}
}  // namespace

int main(int argc, char** argv) {
  Replay r;
  Cli cli("optim_replay",
          "Replays gradients from files through one optimizer (for the PyTorch and PyLO cross-checks).");
  cli.add('d', "dir", &r.dir, "folder with manifest.txt, init.bin, grads.bin (and losses.bin)");
  cli.add('o', "optimizer", &r.opt,
          "adamw | adafactor | muon | small_fc_lopt | velo | celo2 | elo | elo_celo2 (GPU; --ref: the CPU reference)");
  cli.add('s', "set", &r.sets, "optimizer option key=value (repeatable)");
  cli.add(0, "out", &r.out, "output file name inside the folder (default out_<optimizer>.bin)");
  cli.add(0, "ref", &r.ref, "run the CPU reference instead of the GPU optimizer");
  cli.add(0, "trace", &r.trace, "with --ref and velo: also write the first step's intermediate values (<out>.trace)");
  cli.set_epilogue(options_help(OptimOptions()));
  try {
    if (!cli.parse(argc, argv)) return 0;
    run(r);
  } catch (const CudaError& e) {
    std::fprintf(stderr, "optim_replay: CUDA error: %s\n", e.what());
    return 2;
  } catch (...) {
    return report_tool_error("optim_replay");
  }
  return 0;
}
