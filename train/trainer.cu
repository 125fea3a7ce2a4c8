#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/cudnn_attention.h"
#include "train/data_error.h"
#include "train/nccl_comm.h"
#include "train/peer_sum.h"
#include "train/process_group.h"
#include "train/program.h"
#include "train/trainer.h"

namespace {
// Every process runs rank 0's kernel choices. They are timed when the model is built (Model::kernel_choices),
// on each process, and a choice near its threshold goes either way, so processes could compute their
// gradients with different kernels: bits that depend on each GPU's timing.
void share_kernel_choices(Model& model, NcclComm& comm) {
  constexpr size_t kMax = 256;
  const std::string mine = model.kernel_choices();
  CHECK(mine.size() < kMax);
  char buf[kMax] = {};
  std::memcpy(buf, mine.data(), mine.size());
  std::vector<char> all(size_t(comm.world()) * kMax);
  nccl_exchange(comm)(buf, all.data(), kMax);
  const std::string first(all.data());
  if (!first.empty() && first != mine) model.set_kernel_choices(first);
}
}  // namespace

void TrainPlan::start(TrainFlags* f, int64_t micro_units) {
  dp = std::make_unique<DataParallel>(process_group_from_env());
  const int world = dp->world();
  if (dp->rank() > 0) {  // rank 0 alone logs and validates; every rank writes its part of a checkpoint
    f->log.clear();
    f->val_every = 0;
  }
  check_output_paths(*f);
  if (world > 1) f->micro_batch += " * " + std::to_string(world) + " processes";
  accum = resolve_batching(f, micro_units * world);
}

void TrainPlan::set_model(const TrainFlags& f, ParamTable model_table) {
  options = train_optimizer_options(f);
  check_train_optimizer(f, options);
  table = std::move(model_table);
  dp->set_up(f, options, table);
}

bool TrainPlan::open_resume(const TrainFlags& f, const std::string& model_flags) {
  if (f.resume.empty()) return false;
  resume = open_checkpoint(f.resume);
  check_checkpoint_params(*resume, table, model_flags);
  check_checkpoint_optimizer(*resume, f.optimizer, f.overlap);
  state = read_train_state(*resume, f.steps);
  rank_resume = dp->check_resume(*resume, table, &state);
  return true;
}

void TrainPlan::finish(const TrainFlags& f) const {
  require_cuda_gpu();  // the last check; then what the run writes (the Trainer opens the log after this)
  if (!f.ckpt_dir.empty()) prepare_ckpt_dir(f.ckpt_dir);
}

Trainer::Trainer(const TrainFlags& f, TrainPlan& plan, double work_per_step, const char* unit, bool bf16)
    : f_(f), plan_(plan), dp_(*plan.dp) {
  dp_.connect(f.nccl_id_file);  // before anything makes a context on another GPU
  const ParamTable table = dp_.layout(plan.table);
  peak_ = cuda_device_available() ? device_peak_bf16() : DevicePeak{};
  log_ = std::make_unique<TrainLog>(f.log, peak_.flops * dp_.world(), work_per_step, double(f.total_batch), unit);
  require_cuda_gpu();
  arena_ = std::make_unique<Arena>(table, bf16);
  const std::unique_ptr<float[]> init(new float[size_t(table.total_elems())]);  // written whole, by its threads
  init_params_into(table, uint64_t(f.seed), init.get());
  for (const auto& t : table.tensors()) arena_->set_param(t.index, &init[size_t(t.offset)]);
}

void Trainer::set_model(Model& model, const std::vector<BlockTensors>& blocks) {
  model_ = &model;
  if (dp_.comm()) share_kernel_choices(model, *dp_.comm());
  groups_ = hook_groups(table(), blocks);
  for (const BlockTensors& b : blocks) mlp_groups_.push_back(block_mlp_list(b));
  opt_ = make_train_optimizer(f_, plan_.options, *arena_, groups_, dp_.owned(), dp_.cross());
  clipper_ = std::make_unique<GradClipper>(*arena_, float(f_.clip), dp_.owned(), dp_.cross());
  if (plan_.resume) {
    load_checkpoint(*plan_.resume, *arena_, model, *opt_, dp_.sharded() ? plan_.rank_resume.get() : nullptr);
    std::printf("resumed from %s at step %lld\n", f_.resume.c_str(), (long long)plan_.state.step);
  }
  catch_stop_signals();
}

void Trainer::start(BatchSource batches) {
  source_ = std::move(batches);
  runner_ =
      std::make_unique<StepRunner>(*model_, *opt_, *clipper_, f_.clip > 0, plan_.accum, f_.cuda_graph, f_.overlap,
                                   dp_.comm(), groups_, dp_.plan(), dp_.bf16_sums(), dp_.copy_sums(), mlp_groups_);
  ckpt_ = std::make_unique<Checkpointer>(f_.ckpt_dir, *arena_, *model_, *opt_, &dp_);
  first_step_ = plan_.state.step;
}

void Trainer::print_step_setup() const {
  if (f_.attention != "ours")
    std::printf("attention: cuDNN %d's fused flash attention, %s backward (--attention %s)\n",
                CudnnAttention::version(), f_.attention == "cudnn" ? "deterministic" : "atomic (nondeterministic)",
                f_.attention.c_str());
  if (f_.overlap) std::printf("optimizer: each block's tensors step during backward (--overlap)\n");
  if (dp_.on()) std::printf("data parallel: %s\n", dp_.describe().c_str());
}

bool Trainer::guard(int64_t step, const std::function<bool()>& body) {
  const TrainState start = plan_.state;  // what a data error saves
  try {
    return body();
  } catch (const DataError& e) {
    // The failed step's micro-batches changed only gradients, which a checkpoint does not keep, so the
    // state at its start is the run's progress. Nothing to keep when this run has done no step. With
    // several processes the others are already in the next collective: exit; the launcher or the others'
    // watchdog (train/nccl_comm.h, --nccl-timeout) ends them.
    if (f_.ckpt_dir.empty() || step == first_step_ || dp_.world() > 1) throw;
    plan_.state = start;
    user_error(data_error_saved(e.what(), step, checkpoint(step)));
  }
}

bool Trainer::step(int64_t step) {
  const StepRunner::Result r = runner_->run(source_);
  const DataParallel::StepEnd end =
      dp_.step_end(stop_requested(), r.digest);  // every process stops after the same step
  if (!std::isfinite(r.loss))
    user_error("the loss became ", r.loss, " at step ", step, "; lower the learning rate (-l).");
  log_->step(
      {step + 1, f_.steps, r.loss, r.grad_norm, plan_.options.schedule.factor(step), r.ms, r.opt_ms, end.digest});
  return end.stop;
}

bool Trainer::end_step(int64_t step, bool stop) {
  if (stop) std::printf("signal received: stopping after step %lld\n", (long long)step + 1);
  if (stop || (f_.ckpt_every > 0 && (step + 1) % f_.ckpt_every == 0)) checkpoint(step + 1);
  return stop;
}

std::string Trainer::checkpoint(int64_t step) { return ckpt_->save(step, plan_.state); }
