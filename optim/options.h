// Hyperparameters of every optimizer, with torch's defaults, settable by "key=value" strings (CLI
// --opt flags, test scripts) through one table that also prints the help, so the two cannot drift.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/temp_dir.h"
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
  std::string adjust_lr = "original";             // "original" (Keller) | "match_rms_adamw" (Moonshot)
  double ns_workspace_mb = 1024;                  // cap on Newton-Schulz scratch; larger = bigger batched GEMMs
  AdamWOptions aux{3e-4, 0.9, 0.95, 1e-10, 0.0};  // Keller's MuonWithAuxAdam defaults
};

struct OptimOptions {
  AdamWOptions adamw;
  AdafactorOptions adafactor;
  MuonOptions muon;
  SmallFcOptions small_fc;
  VeloOptions velo;
  Celo2Options celo2;
  Celo2Options elo_celo2 = elo_celo2_defaults();
  EloOptions elo;
  LrSchedule schedule;
};

// Sets one option: "adamw.lr=3e-4", "muon.aux.beta2=0.95", "muon.nesterov=false". UserError on an unknown
// key or a value that does not parse; ranges are checked by validate_options.
void set_option(OptimOptions& o, const std::string& key_eq_value);
// Every key with its current value and a one-line description (for --help).
std::vector<std::string> describe_options(const OptimOptions& o);
// For --help (Cli::set_epilogue): every optimizer with one line on what it is, then each one's options
// (describe_options) under a heading of its own.
std::string options_help(const OptimOptions& o);
// Each -o name with one line on what it is, in the order of optimizer_names().
const std::vector<std::pair<std::string, std::string>>& optimizer_summaries();
// The optimizer an option key belongs to: its first component ("muon" for muon.aux.lr).
std::string option_optimizer(const std::string& key);
// Refuses a "key=value" option whose optimizer is not one of `selected`: it would have no effect, and an
// expert who sets muon.lr with -o adamw expects it to matter. Call after set_option accepted them all.
void check_options_apply(const std::vector<std::string>& sets, const std::vector<std::string>& selected);
// Range checks for the named optimizer; UserError names the bad hyperparameter and its allowed range.
void validate_options(const std::string& optimizer, const OptimOptions& o);
// Reads the meta-weights a learned optimizer (small_fc_lopt, velo, celo2, elo, elo_celo2) will load, so that a missing
// or wrong file is refused before any GPU work; does nothing for the other optimizers.
void check_lopt_weights(const std::string& optimizer, const OptimOptions& o);
// Random meta-weights of the published shapes (for timing; they do not train well) for each learned
// optimizer in `optimizers` whose weights are not set in `o`, which then names them (not CELO2, whose
// real weights ship with the repository). They are written to
// a temporary folder ($TMPDIR) that is removed with the returned object: keep it until the optimizers are
// made, which read the files. Null when no optimizer needs them.
std::unique_ptr<TempDir> write_random_lopt_weights(const std::vector<std::string>& optimizers, OptimOptions& o,
                                                   uint64_t seed);
// The optimizer names the factory knows, for messages.
const std::vector<std::string>& optimizer_names();
void check_optimizer_name(const std::string& name);
