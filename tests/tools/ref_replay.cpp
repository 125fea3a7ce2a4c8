// ref_replay: optim_replay --ref without CUDA: one optimizer's CPU reference over the replay files of
// tests/tools/replay_io.h, for the cross-checks on machines without a GPU (tests/pylo_crosscheck.py --cpu).
#include <cstdio>

#include "common/cli.h"
#include "common/tool_errors.h"
#include "tests/tools/replay_io.h"

int main(int argc, char** argv) {
  Replay r;
  r.ref = true;
  Cli cli("ref_replay", "Replays gradients from files through one optimizer's CPU reference (no GPU needed).");
  cli.add('d', "dir", &r.dir, "folder with manifest.txt, init.bin, grads.bin (and losses.bin)");
  cli.add('o', "optimizer", &r.opt, "adamw | adafactor | muon | small_fc_lopt | velo | celo2 | elo | elo_celo2");
  cli.add('s', "set", &r.sets, "optimizer option key=value (repeatable)");
  cli.add(0, "out", &r.out, "output file name inside the folder (default out_<optimizer>.bin)");
  cli.add(0, "trace", &r.trace, "with velo: also write the first step's intermediate values (<out>.trace)");
  cli.set_epilogue(options_help(OptimOptions()));
  try {
    if (!cli.parse(argc, argv)) return 0;
    run_reference(r);
  } catch (...) {
    return report_tool_error("ref_replay");
  }
  return 0;
}
