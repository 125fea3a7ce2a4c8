#include <cstdio>

#include "common/cuda_check.h"
#include "train/data_parallel.h"

DataParallel::DataParallel(const TrainFlags& f, const ParamTable& table) : group_(process_group_from_env()) {
  sharded_ = f.shard;
  on_ = group_.world > 1 || f.nccl || f.shard;
  if (group_.world > 1 && f.nccl_id_file.empty())
    user_error(group_.world, " processes need --nccl-id-file, a fresh path on a folder that every process sees.");
  if (sharded_ && f.overlap)
    user_error("--shard 1 steps each process's tensors after backward, --overlap during it; leave out one of them.");
  if (!sharded_) return;
  if (group_.world > table.size())
    user_error("--shard 1 gives every process whole tensors, and this model has ", table.size(), " for ", group_.world,
               " processes; use fewer processes or leave out --shard.");
  plan_ = plan_shards(table, group_.world, [&](const TensorInfo& t) { return shard_step_cost(f.optimizer, t); });
}

void DataParallel::connect(const std::string& id_file) {
  if (!on_) return;
  select_gpu(group_.local_rank);  // before anything makes a context on another GPU
  comm_ = std::make_unique<NcclComm>(group_, id_file);
  flag_.alloc(1, "data-parallel flag");
  if (group_.rank > 0 && !std::freopen("/dev/null", "w", stdout))  // rank 0 alone prints
    user_error("cannot send rank ", group_.rank, "'s output to /dev/null.");
}

ParamTable DataParallel::layout(const ParamTable& t) const { return sharded_ ? sharded_table(t, plan_) : t; }

std::vector<int> DataParallel::owned() const { return sharded_ ? plan_.owned(group_.rank) : std::vector<int>{}; }

DpRecord DataParallel::record() const {
  DpRecord r;
  r.world = group_.world;
  if (sharded_) r.owner = plan_.owner;
  return r;
}

std::unique_ptr<SectionReader> DataParallel::check_resume(const SectionReader& main, const ParamTable& table,
                                                          TrainState* state) const {
  check_checkpoint_dp(main, record());
  if (group_.rank == 0) return nullptr;
  auto r = std::make_unique<SectionReader>(rank_checkpoint_path(main.path(), group_.rank));
  state->data = read_rank_position(*r, table, record(), state->step);
  return r;
}

std::string DataParallel::describe() const {
  std::string s =
      std::to_string(group_.world) + (group_.world > 1 ? " processes (" : " process (") + group_.launcher + "), ";
  if (!sharded_) return s + "gradients all-reduced through NCCL during backward, every process steps every tensor";
  char load[64];
  double most = 0, total = 0;
  for (double l : plan_.load) {
    most = std::max(most, l);
    total += l;
  }
  std::snprintf(load, sizeof load, "%.3f", total > 0 ? most * plan_.world / total : 1.0);
  return s + "sharded: gradients reduced onto each tensor's owner during backward, each process steps its " +
         std::to_string(plan_.owned(group_.rank).size()) + " of " + std::to_string(plan_.owner.size()) +
         " tensors (busiest process at " + load + "x the mean cost), weights all-gathered";
}

bool DataParallel::any(bool flag) {
  if (!comm_ || group_.world == 1) return flag;
  const float v = flag ? 1.0f : 0.0f;
  flag_.upload(&v, 1);
  comm_->sum(flag_.get(), 1, 0);
  return flag_.download(1)[0] > 0.0f;
}
