// Whether an optimizer's step of a tensor reads nothing of any other tensor - what stepping it in groups
// (optim/grouped_optimizer.h, --overlap) needs. Host-only, so that the flag checks can ask it.
#pragma once
#include <string>

#include "optim/options.h"

// Empty if `name` with `opts` steps each tensor on its own; else why not, as a clause ("its LSTM ...").
inline std::string why_not_groupable(const std::string& name, const OptimOptions& opts) {
  if (name == "velo") return "its LSTM reads the statistics of every tensor before any tensor moves";
  if (name == "elo" && opts.elo.clip_grad)
    return "elo.clip_grad=1 clips by the norm of every gradient before any tensor moves (set elo.clip_grad=0)";
  if (name == "muon" || name == "celo2" || name == "elo_celo2")
    return "its Newton-Schulz matmuls run batched over every matrix of a shape (a group's smaller batch may get "
           "another cuBLASLt algorithm, so not the same bits), on the tensor cores that backward itself needs";
  return "";
}
