#include <cstdio>

#include "train/checkpointer.h"

std::string Checkpointer::save(int64_t step, TrainState& state) const {
  if (dir_.empty()) return std::string();
  state.step = step;
  const std::string path = checkpoint_path(dir_, step);
  const DpRecord rec = dp_ ? dp_->record() : DpRecord{};
  if (dp_) dp_->gather_params(arena_);  // collective: every process saves
  if (dp_ && dp_->world() > 1) {
    if (dp_->rank() > 0)
      save_rank_checkpoint(rank_checkpoint_path(path, dp_->rank()), arena_, dp_->sharded() ? &opt_ : nullptr, state,
                           rec);
    dp_->barrier();  // every rank file is in place before rank 0's file makes the checkpoint
    if (dp_->rank() > 0) return path;
  }
  save_checkpoint(path, arena_, model_, opt_, state, rec);
  std::printf("checkpoint %s\n", path.c_str());
  return path;
}
