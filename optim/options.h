// Hyperparameters of every optimizer, with torch's defaults, settable by "key=value" strings (CLI
// --opt flags, test scripts) through one table that also prints the help, so the two cannot drift.
#pragma once
#include <string>
#include <vector>

#include "optim/lopt/lopt_common.h"
#include "optim/schedule.h"

struct AdamWOptions {  // torch.optim.AdamW defaults
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
};

struct AdafactorOptions {  // torch.optim.Adafactor defaults
  double lr = 1e-2, beta2_decay = -0.8;
  double eps1 = -1;  // < 0: fp32 machine epsilon (torch's None, for fp32 parameters)
  double eps2 = 1e-3, d = 1.0, weight_decay = 0.0;
  double eps1_value() const { return eps1 < 0 ? 1.1920928955078125e-07 : eps1; }
};

struct MuonOptions {  // torch.optim.Muon defaults; `aux` is the AdamW for tensors Muon must not take
  double lr = 1e-3, weight_decay = 0.1, momentum = 0.95, eps = 1e-7;
  bool nesterov = true;
  int ns_steps = 5;
  double ns_a = 3.4445, ns_b = -4.7750, ns_c = 2.0315;
  std::string adjust_lr = "original";  // "original" (Keller) | "match_rms_adamw" (Moonshot)
  double ns_workspace_mb = 1024;       // cap on Newton-Schulz scratch; larger = bigger batched GEMMs
  AdamWOptions aux{3e-4, 0.9, 0.95, 1e-10, 0.0};  // Keller's MuonWithAuxAdam defaults
};

struct OptimOptions {
  AdamWOptions adamw;
  AdafactorOptions adafactor;
  MuonOptions muon;
  SmallFcOptions small_fc;
  VeloOptions velo;
  LrSchedule schedule;
};

// Sets one option: "adamw.lr=3e-4", "muon.aux.beta2=0.95", "muon.nesterov=false". UserError on an unknown
// key or a value that does not parse; ranges are checked by validate_options.
void set_option(OptimOptions& o, const std::string& key_eq_value);
// Every key with its current value and a one-line description (for --help).
std::vector<std::string> describe_options(const OptimOptions& o);
// Range checks for the named optimizer; UserError names the bad hyperparameter and its allowed range.
void validate_options(const std::string& optimizer, const OptimOptions& o);
// The optimizer names the factory knows, for messages.
const std::vector<std::string>& optimizer_names();
void check_optimizer_name(const std::string& name);
