// Where and when a run writes its checkpoints (the files of train/checkpoint.h): <dir>/model_<step>.bin,
// and with several processes each rank's part first, so that rank 0's file exists only when the whole
// checkpoint does.
#pragma once
#include <cstdint>
#include <string>

#include "train/checkpoint.h"
#include "train/data_parallel.h"

// Writes <dir>/model_<step>.bin (nothing when dir is empty), says so on stdout, and returns its path.
// Data parallel with several processes, every process calls save: the others write their rank files
// (train/checkpoint.h), then rank 0 its own.
class Checkpointer {
 public:
  Checkpointer(std::string dir, Arena& arena, const Model& model, const Optimizer& opt, DataParallel* dp = nullptr)
      : dir_(std::move(dir)), arena_(arena), model_(model), opt_(opt), dp_(dp) {}
  std::string save(int64_t step, TrainState& state) const;

 private:
  std::string dir_;
  Arena& arena_;  // sharded: its fp32 weights are gathered first (DataParallel::gather_params)
  const Model& model_;
  const Optimizer& opt_;
  DataParallel* dp_;
};
