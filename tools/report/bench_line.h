// `report median`: one training run of scripts/bench_gpt2.sh or bench_vit.sh summarised as one JSON line —
// the medians of its logged steps after the warm-up, or the reason it has none.
#pragma once
#include <string>

namespace report {

struct BenchRun {
  std::string program = "train_gpt2";  // or train_vit: which rate (tok_per_s, img_per_s) and header
  std::string log, out, err;           // the run's --log, its stdout and its stderr (files)
  int exit_status = 0;
  std::string model;
  long long B = 0, T = 0;  // T 0: not written (train_vit)
  int warmup = 3;
  std::string gpu, extra, launch;  // gpu "": read from the program's header line
};

// The line, without a trailing newline:
//   {"model","params_m","B"[,"T"][,"launch","world"],"tok_per_s"|"img_per_s","mfu","step_ms","opt_ms"
//    [,"fwd_ms","bwd_ms","loss_ms","profile_steps"],"gpu","extra","timed_steps"}
// (the profile fields where stderr holds a GPT2_PROFILE=1 table), or, for a failed run,
//   {"model","params_m","B"[,"T"][,...],"gpu","extra","error"[,"exit_status"]}.
// Missing or unreadable files count as empty; it never throws for the run's own output.
std::string bench_line(const BenchRun& r);

// The GPT2_PROFILE=1 table of `stderr_text` (kernels/op_timer.cu) summed by kind: forward ("fwd ..."),
// backward ("bwd ...") and the loss ("crossentropy"), ms per step; false when there is none.
struct ProfileSums {
  double fwd = 0, bwd = 0, loss = 0, other = 0;
  int steps = 0;
};
bool parse_profile(const std::string& stderr_text, ProfileSums* out);

}  // namespace report
