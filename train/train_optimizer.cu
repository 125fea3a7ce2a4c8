#include "common/temp_dir.h"
#include "optim/grouped_optimizer.h"
#include "optim/lopt/celo2_weights.h"
#include "optim/optimizer.h"
#include "train/train_flags.h"

std::unique_ptr<Optimizer> make_train_optimizer(const TrainFlags& f, const OptimOptions& oo, Arena& arena,
                                                const std::vector<std::vector<int>>& hook_groups, const Owned& owned,
                                                CrossRank* cross) {
  OptimOptions o = oo;
  std::unique_ptr<TempDir> random_weights;
  if (f.lopt_random && is_learned(f.optimizer))
    random_weights = write_random_lopt_weights({f.optimizer}, o, uint64_t(f.seed));
  if (f.lopt_random && f.optimizer == "celo2") {  // CELO2's real weights ship, so the helper above skips it
    random_weights = std::make_unique<TempDir>("lopt_random_weights_");
    o.celo2.weights = random_weights->path() + "/celo2";
    save_celo2_weights(o.celo2.weights, random_celo2_weights(uint64_t(f.seed)));
  }
  if (f.overlap) return std::make_unique<GroupedOptimizer>(f.optimizer, o, arena, hook_groups);
  return make_optimizer(f.optimizer, o, arena, owned, cross);
}
