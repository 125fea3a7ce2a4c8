#include <cstdio>

#include "train/checkpointer.h"

std::string Checkpointer::save(int64_t step, TrainState& state) const {
  if (dir_.empty()) return std::string();
  state.step = step;
  const std::string path = checkpoint_path(dir_, step);
  const DpRecord rec = dp_ ? dp_->record() : DpRecord{};
  if (dp_) dp_->gather_params(arena_);  // collective: every process saves
  NcclComm* comm = dp_ ? dp_->comm() : nullptr;
  if (dp_ && dp_->world() > 1) {
    if (dp_->rank() > 0) {
      comm->set_local_work(true);  // the watchdog must not end this process halfway through its file
      save_rank_checkpoint(rank_checkpoint_path(path, dp_->rank()), arena_, dp_->sharded() ? &opt_ : nullptr, state,
                           rec);
      comm->set_local_work(false);
    }
    dp_->barrier();  // every rank file is in place before rank 0's file makes the checkpoint
    if (dp_->rank() > 0) return path;
  }
  if (comm) comm->set_local_work(true);
  save_checkpoint(path, arena_, model_, opt_, state, rec);
  if (comm) comm->set_local_work(false);
  std::printf("checkpoint %s\n", path.c_str());
  return path;
}
