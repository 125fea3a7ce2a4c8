#include "common/temp_dir.h"
#include "optim/optimizer.h"
#include "train/train_flags.h"

std::unique_ptr<Optimizer> make_train_optimizer(const TrainFlags& f, const OptimOptions& oo, Arena& arena) {
  OptimOptions o = oo;
  std::unique_ptr<TempDir> random_weights;
  if (f.lopt_random && is_learned(f.optimizer))
    random_weights = write_random_lopt_weights({f.optimizer}, o, uint64_t(f.seed));
  return make_optimizer(f.optimizer, o, arena);
}
