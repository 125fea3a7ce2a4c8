#include <cstdio>

#include "common/cuda_check.h"
#include "optim/step_cost.h"
#include "train/data_parallel.h"
#include "train/peer_sum.h"

void DataParallel::set_up(const TrainFlags& f, const OptimOptions& o, const ParamTable& table) {
  sharded_ = f.shard;
  timeout_s_ = f.nccl_timeout;
  bf16_sums_ = f.grad_comm == "bf16";
  grad_sum_ = f.grad_sum;
  on_ = group_.world > 1 || f.nccl || f.shard;
  if (group_.world > 1 && f.nccl_id_file.empty())
    user_error(group_.world, " processes need --nccl-id-file, a fresh path on a folder that every process sees.");
  if (f.grad_comm == "bf16" && !on_)
    user_error(
        "--grad-comm bf16 rounds the gradients that processes send each other, and this run is one process "
        "without NCCL; launch several processes (or add --nccl 1) or leave out --grad-comm.");
  if (grad_sum_ == "copy" && !on_)
    user_error(
        "--grad-sum copy sums the gradients of several processes, and this run is one process without NCCL; "
        "launch several processes (or add --nccl 1) or leave out --grad-sum.");
  if (sharded_ && f.overlap)
    user_error("--shard 1 steps each process's tensors after backward, --overlap during it; leave out one of them.");
  if (!sharded_) return;
  const int pieces = int(table.pieces().size());
  if (group_.world > pieces)
    user_error("--shard 1 gives every process whole tensors, and this model has ", pieces,
               " (q, k and v count as one) for ", group_.world,
               " processes; use fewer processes or leave out --shard.");
  plan_ = plan_shards(
      table, group_.world, [&](const TensorInfo& t) { return shard_step_cost(f.optimizer, t); },
      [&](const TensorInfo& t) { return shard_cut_unit(f.optimizer, o, t); });
}

void DataParallel::connect(const std::string& id_file) {
  if (!on_) return;
  select_gpu(group_.local_rank);  // before anything makes a context on another GPU
  comm_ = std::make_unique<NcclComm>(group_, id_file, timeout_s_);
  flags_.alloc(2, "data-parallel flags");
  choose_grad_sum();
  if (group_.rank > 0 && !std::freopen("/dev/null", "w", stdout))  // rank 0 alone prints
    user_error("cannot send rank ", group_.rank, "'s output to /dev/null.");
}

// --grad-sum: copy where asked, or by default (auto) where every process maps every other's GPU memory and
// the sums are fp32; NCCL otherwise. The same answer on every process.
void DataParallel::choose_grad_sum() {
  const bool want = grad_sum_ == "copy" || (grad_sum_ == "auto" && group_.world > 1 && !bf16_sums_);
  if (!want) return;
  copy_sums_ = PeerSum::reachable(group_.rank, group_.world, nccl_exchange(*comm_));
  if (!copy_sums_ && grad_sum_ == "copy")
    user_error(
        "--grad-sum copy needs every process on one machine, on GPUs that map each other's memory "
        "(NVLink or PCIe peer access), and these processes cannot; use --grad-sum nccl.");
}

ParamTable DataParallel::layout(const ParamTable& t) const { return sharded_ ? sharded_table(t, plan_) : t; }

Owned DataParallel::owned() const { return sharded_ ? plan_.owned(group_.rank) : Owned(); }

DpRecord DataParallel::record() const {
  DpRecord r;
  r.world = group_.world;
  if (sharded_) r.owner = plan_.owner;
  if (sharded_ && plan_.any_cut()) r.cut = plan_.cut;
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
  if (bf16_sums_) s += "gradients in bf16, ";
  const std::string by = copy_sums_ ? "by the copy engines" : "through NCCL";
  if (!sharded_) return s + "gradients all-reduced " + by + " during backward, every process steps every tensor";
  char load[64];
  double most = 0, total = 0;
  for (double l : plan_.load) {
    most = std::max(most, l);
    total += l;
  }
  std::snprintf(load, sizeof load, "%.3f", total > 0 ? most * plan_.world / total : 1.0);
  int cuts = 0;
  for (int64_t c : plan_.cut) cuts += c > 0;
  return s + "sharded: gradients reduced onto each tensor's owner " + by + " during backward, each process steps its " +
         std::to_string(plan_.owned(group_.rank).parts.size()) + " of " + std::to_string(plan_.owner.size()) +
         " tensors (" + std::to_string(cuts) + " cut between two processes; busiest process at " + load +
         "x the mean cost), their bf16 copy all-gathered";
}

void DataParallel::gather_params(Arena& arena) {
  if (!sharded_ || group_.world == 1 || !arena.params_bf16()) return;
  comm_->all_gather(arena.params(), size_t(plan_.shard_elems), 0);
  CUDA_CHECK(cudaDeviceSynchronize());
}

DataParallel::StepEnd DataParallel::step_end(bool stop, uint64_t digest) {
  if (!comm_ || group_.world == 1) return {stop, digest};
  const uint64_t v[2] = {stop ? 1u : 0u, digest};
  flags_.upload(v, 2);
  comm_->sum(flags_.get(), 2, 0);
  const std::vector<uint64_t> got = flags_.download(2);
  comm_->beat();  // the answer needed every process: each has finished this step
  return {got[0] > 0, got[1]};
}
