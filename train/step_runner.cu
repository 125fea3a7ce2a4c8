#include <algorithm>
#include <cstring>

#include "common/cuda_check.h"
#include "kernels/convert.h"
#include "kernels/reduce.h"
#include "train/step_runner.h"

namespace {
// Field sizes in bytes, each rounded up to 16 so that every staged field stays aligned.
size_t padded(int64_t n, size_t elem) { return (size_t(n) * elem + 15) / 16 * 16; }
}  // namespace

StepRunner::StepRunner(Model& model, Optimizer& opt, GradClipper& clipper, bool clip, int accum, bool cuda_graph,
                       bool overlap, NcclComm* comm, const std::vector<std::vector<int>>& hook_groups,
                       const ShardPlan* plan, bool bf16_sums, bool copy_sums,
                       const std::vector<std::vector<int>>& mlp_groups)
    : model_(model),
      opt_(opt),
      clipper_(clipper),
      clip_(clip),
      graphs_(cuda_graph),
      accum_(accum),
      shape_(model.batch_shape()),
      loss_(1, "loss") {
  micro_bytes_ = padded(shape_.tokens, 4) + padded(shape_.targets, 4) + padded(shape_.pixels, 1) +
                 padded(shape_.soft_targets, 4) + padded(1, sizeof(ImageMix));
  if (overlap) {
    grouped_ = dynamic_cast<GroupedOptimizer*>(&opt);
    CHECK(grouped_ && !clip);
  }
  comm_ = comm;
  plan_ = plan;
  CHECK(!plan_ || (comm_ && !grouped_ && plan_->world == comm_->world()));
  // The learned optimizers' pass A reads every matrix's gradient anyway: there the clipper's sums come free.
  clip_taken_ = !grouped_ && opt_.take_clip(&clipper_);
  if (comm_) plan_sums(model, hook_groups, mlp_groups, bf16_sums, copy_sums);
  try {  // the destructor frees what was made if a later call throws
    if (overlap || comm_) {
      // The optimizer's stream first: on the H100 this made GPT-2 124M's step at 4 x 1024 tokens 2% shorter
      // than a low-priority optimizer stream did (README, "The step at the PyLO paper's batch").
      int least = 0, greatest = 0;
      CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking, as below
      CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, greatest));
      CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&gathered_, cudaEventDisableTiming));
      if (peer_) CUDA_CHECK(cudaStreamCreateWithPriority(&early_side_, cudaStreamNonBlocking, greatest));
    } else if (graphs_) {
      CUDA_CHECK(cudaStreamCreate(&stream_));  // blocking: ordered with the default stream's work
    }
    if (graphs_) CUDA_CHECK(cudaMallocHost(&staged_, size_t(accum) * micro_bytes_));
    CUDA_CHECK(cudaMallocHost(&host_, 2 * sizeof(float)));
    for (auto& e : ev_) CUDA_CHECK(cudaEventCreate(&e));
    if (comm_ && !graphs_) trace_ = std::make_unique<StepTrace>(int(ranges_.size()), comm_->rank());
  } catch (...) {
    free_resources();  // a throwing constructor runs no destructor
    throw;
  }
}

StepRunner::~StepRunner() { free_resources(); }

// Data parallel: what each hook call sums (the hook groups' runs, less a tied token table's parts) and what
// sums it (NCCL, through a bf16 copy or not, or the copy engines).
void StepRunner::plan_sums(Model& model, const std::vector<std::vector<int>>& hook_groups,
                           const std::vector<std::vector<int>>& mlp_groups, bool bf16_sums, bool copy_sums) {
  // A tied token table is summed in parts where the model can (Model::sum_embedding_in_parts): the
  // head's part beside backward, the lookup's from every process's sums per token or positions; those
  // tensors leave the last hook group, whose sum after backward nothing could hide.
  CHECK(!(bf16_sums && copy_sums));
  if (copy_sums) {  // the tied table's early sum runs beside the blocks' (see sum_early)
    float* grads = opt_.arena().grads();
    peer_ = std::make_unique<PeerSum>(comm_->rank(), comm_->world(), nccl_exchange(*comm_), grads);
    if (shape_.tokens > kEarlyNcclTokens)
      peer_early_ = std::make_unique<PeerSum>(comm_->rank(), comm_->world(), nccl_exchange(*comm_), grads);
  }
  Model::EmbeddingSum e;
  e.world = comm_->world();
  e.rank = comm_->rank();
  e.early = [this](cudaStream_t s) { sum_early(s); };
  e.gather = [this](const void* mine, void* all, size_t bytes, cudaStream_t s) { gather(mine, all, bytes, s); };
  if (peer_) {
    e.shared = [this](size_t bytes) { return peer_->share(bytes, nccl_exchange(*comm_)); };
    e.barrier = [this](cudaStream_t s) { lookup_barrier(s); };
  }
  const Model::EmbeddingParts parts = model.sum_embedding_in_parts(e);
  std::vector<char> apart(size_t(opt_.arena().table().size()), 0);
  for (const auto* v : {&parts.early, &parts.gathered})
    for (int i : *v) apart[size_t(i)] = 1;
  early_ = runs(parts.early);
  // A block's MLP part summed at the MLP hook, by the copy engines where micro-batches are long (see
  // kSplitTokens; through NCCL it was not measured).
  const bool split = peer_ && model.calls_mlp_hook() && !mlp_groups.empty() && shape_.tokens > kSplitTokens;
  for (size_t g = 0; g < hook_groups.size(); g++) {
    const std::vector<int>* mlp = split && g < mlp_groups.size() ? &mlp_groups[g] : nullptr;
    std::vector<int> first, rest;
    for (int i : hook_groups[g])
      if (!apart[size_t(i)]) (mlp && std::binary_search(mlp->begin(), mlp->end(), i) ? first : rest).push_back(i);
    ranges_.push_back(runs(rest));
    if (mlp) mlp_ranges_.push_back(runs(first));
  }
  CHECK(!ranges_.empty() && (!grouped_ || int(ranges_.size()) == grouped_->groups()));
  if (bf16_sums) grads16_.alloc(size_t(opt_.arena().table().total_elems()), "bf16 gradients for NCCL");
}

// The tensors (ascending table indices) as runs of the arena to sum: those that lie back to back (and have
// one owner) are one run, the padding between them holding zeros on every rank. A tensor the shard plan
// cut is two runs, one onto each owner.
std::vector<StepRunner::Range> StepRunner::runs(const std::vector<int>& tensors) const {
  const ParamTable& t = opt_.arena().table();
  std::vector<Range> rs;
  auto add = [&](int64_t begin, int64_t n, int root, bool joins) {
    if (joins && !rs.empty() && rs.back().root == root)
      rs.back().n = begin + n - rs.back().begin;
    else
      rs.push_back({begin, n, root});
  };
  int64_t end = -1;  // where the previous tensor's slot ends
  for (int i : tensors) {
    const int root = plan_ ? plan_->owner[size_t(i)] : -1;
    const int64_t cut = plan_ ? plan_->cut[size_t(i)] : 0;
    add(t[i].offset, cut > 0 ? cut : t[i].numel, root, t[i].offset == end);
    if (cut > 0) add(t[i].offset + cut, t[i].numel - cut, root + 1, true);
    end = t[i].offset + shard_slot_elems(t[i]);
  }
  return rs;
}

// Each run summed over the processes into every process (all-reduce mode) or its owner (sharded), as one
// NCCL group on the second stream, or by the copy engines; with bf16 sums through the bf16 copy, rounded
// there and widened back.
void StepRunner::sum(const std::vector<Range>& rs) {
  if (peer_) return peer_->sum(rs, side_);
  sum_nccl(rs, side_);
}

void StepRunner::sum_nccl(const std::vector<Range>& rs, cudaStream_t side) {
  float* grads = opt_.arena().grads();
  __nv_bfloat16* g16 = grads16_.get();
  if (g16)
    for (const Range& r : rs) float_to_bf16(g16 + r.begin, grads + r.begin, size_t(r.n), side);
  comm_->group_begin();
  for (const Range& r : rs) {
    if (g16 && r.root < 0)
      comm_->sum(g16 + r.begin, size_t(r.n), side);
    else if (g16)
      comm_->reduce_sum(g16 + r.begin, size_t(r.n), r.root, side);
    else if (r.root < 0)
      comm_->sum(grads + r.begin, size_t(r.n), side);
    else
      comm_->reduce_sum(grads + r.begin, size_t(r.n), r.root, side);
  }
  comm_->group_end();
  if (g16)
    for (const Range& r : rs)
      if (r.root < 0 || r.root == comm_->rank()) bf16_to_float(grads + r.begin, g16 + r.begin, size_t(r.n), side);
}

// With the copy engines on a third stream, beside the blocks' sums: the tied table's head part is a third
// of GPT-2 124M's gradients, and queued before the blocks' sums it held each of them back by up to
// 1.4 ms, so that the last ended 0.7 ms after backward (4 H200s).
void StepRunner::sum_early(cudaStream_t s) {
  if (peer_) {
    early_used_ = true;
    CUDA_CHECK(cudaEventRecord(fork_, s));
    CUDA_CHECK(cudaStreamWaitEvent(early_side_, fork_, 0));
    if (!peer_early_) return sum_nccl(early_, early_side_);  // short backward: see kEarlyNcclTokens
    return peer_early_->sum(early_, early_side_);
  }
  fork_side(s);
  sum(early_);
}

// After the early sum, which the lookup's part then adds to, on its stream; s waits for it. (Through NCCL
// the blocks' sums share that stream, and this gather waits for them too.)
void StepRunner::gather(const void* mine, void* all, size_t bytes, cudaStream_t s) {
  cudaStream_t g = peer_ ? early_side_ : side_;
  early_used_ = early_used_ || peer_;
  CUDA_CHECK(cudaEventRecord(fork_, s));
  CUDA_CHECK(cudaStreamWaitEvent(g, fork_, 0));
  comm_->all_gather_bytes(mine, all, bytes, g);
  CUDA_CHECK(cudaEventRecord(gathered_, g));
  CUDA_CHECK(cudaStreamWaitEvent(s, gathered_, 0));
}

// The lookup's sums per token (copy sums): s waits for the early sum, which the lookup's part then adds
// to, and for every process's sums (a barrier of the blocks' PeerSum, in the same order on every process).
void StepRunner::lookup_barrier(cudaStream_t s) {
  wait_early_side(s);
  peer_->barrier(s);
}

// s waits for what this step put on early_side_ (none: nothing to wait for).
void StepRunner::wait_early_side(cudaStream_t s) {
  if (!early_used_) return;
  CUDA_CHECK(cudaEventRecord(gathered_, early_side_));
  CUDA_CHECK(cudaStreamWaitEvent(s, gathered_, 0));
}

// side_ waits for the work on s so far.
void StepRunner::fork_side(cudaStream_t s) {
  CUDA_CHECK(cudaEventRecord(fork_, s));
  CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
}

void StepRunner::free_resources() {  // no checks: nothing may throw from here
  trace_.reset();
  peer_.reset();
  peer_early_.reset();
  for (auto& e : ev_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : {fork_, join_, gathered_})
    if (e) cudaEventDestroy(e);
  if (host_) cudaFreeHost(host_);
  if (staged_) cudaFreeHost(staged_);
  for (cudaStream_t s : {stream_, side_, early_side_})
    if (s) cudaStreamDestroy(s);
  host_ = nullptr;
  staged_ = nullptr;
  stream_ = side_ = early_side_ = nullptr;
  fork_ = join_ = gathered_ = nullptr;
}

// The staged fields of a micro-batch: tokens, targets, pixels, soft targets, then the mix draw; the
// fields are null when the model does not take them, or when the staged batch lacked them.
Batch StepRunner::staged(int micro) const {
  char* p = staged_ + size_t(micro) * micro_bytes_;
  Batch b;
  b.tokens = shape_.tokens ? reinterpret_cast<const int32_t*>(p) : nullptr;
  p += padded(shape_.tokens, 4);
  b.targets = shape_.targets ? reinterpret_cast<const int32_t*>(p) : nullptr;
  p += padded(shape_.targets, 4);
  b.pixels = shape_.pixels ? reinterpret_cast<const uint8_t*>(p) : nullptr;
  p += padded(shape_.pixels, 1);
  b.soft_targets = shape_.soft_targets && soft_ ? reinterpret_cast<const float*>(p) : nullptr;
  p += padded(shape_.soft_targets, 4);
  b.mix = shape_.pixels ? reinterpret_cast<const ImageMix*>(p) : nullptr;
  return b;
}

void StepRunner::enqueue_grads(const BatchSource* batches) {
  early_used_ = false;
  if (peer_) {
    peer_->begin_step();
    if (peer_early_) peer_early_->begin_step();
  }
  opt_.arena().zero_grads(stream_);
  for (int mi = 0; mi < accum_; mi++) {
    if (batches) {
      const Batch b = batches->next();
      digest_ += b.digest;
      soft_ = b.soft_targets != nullptr;  // what a captured step will stage
      model_.set_batch(b, stream_);
      batches->release(stream_);
    } else {
      model_.set_batch(staged(mi), stream_);
    }
    model_.forward(stream_);
    model_.loss_and_dlogits(1.0f / float(accum_ * (comm_ ? comm_->world() : 1)), stream_);
    scale_add(loss_.get(), model_.d_loss(), 1.0f / float(accum_), mi > 0, stream_);  // final before any step
    const bool early = (grouped_ || comm_) && mi == accum_ - 1;  // the last micro-batch makes them final
    const bool mlp = early && !mlp_ranges_.empty();
    if (early) model_.set_block_hook([this](int block, cudaStream_t s) { block_ready(block, s); });
    if (mlp) model_.set_mlp_hook([this](int block, cudaStream_t s) { mlp_ready(block, s); });
    model_.backward(stream_);
    if (early) model_.set_block_hook(nullptr);
    if (mlp) model_.set_mlp_hook(nullptr);
  }
  if (grouped_ || comm_) finish_side_work();
}

// Group `block` (block -1: the last group, every tensor outside the blocks), after the work on s so far:
// its gradients summed over the processes, then its step.
void StepRunner::block_ready(int block, cudaStream_t s) {
  const int last = grouped_ ? grouped_->groups() - 1 : int(ranges_.size()) - 1;
  CHECK(block >= -1 && block < last);
  const int g = block >= 0 ? block : last;
  fork_side(s);
  if (trace_) trace_->ready(s);
  if (comm_) {
    sum(ranges_[size_t(g)]);
    if (trace_) trace_->summed(side_);
  }
  if (grouped_) {
    StepInfo info;
    info.d_loss = loss_.get();  // this process's loss; only VeLO reads it, and VeLO is never grouped
    grouped_->step_group(g, info, side_);
  }
}

void StepRunner::mlp_ready(int block, cudaStream_t s) {
  CHECK(block >= 0 && block < int(mlp_ranges_.size()));
  fork_side(s);
  sum(mlp_ranges_[size_t(block)]);
}

// The loss summed over the processes (on the second stream, after the gradients: one order of NCCL calls
// on every process), the join, the mean loss; the norm (for the log when grouped: clipping is then off)
// beside the last groups' steps when nothing was summed, else of the summed gradients.
void StepRunner::finish_side_work() {
  if (trace_) trace_->backward_end(stream_);
  wait_early_side(side_);  // the gathers' NCCL calls come before the loss's on every process
  if (comm_) comm_->sum(loss_.get(), 1, side_);
  if (trace_) trace_->comm_end(side_);
  if (grouped_ && !comm_) clipper_.run(stream_);
  CUDA_CHECK(cudaEventRecord(join_, side_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, join_, 0));
  if (comm_ && comm_->world() > 1) scale_add(loss_.get(), loss_.get(), 1.0f / float(comm_->world()), false, stream_);
  if (grouped_ && comm_) clipper_.run(stream_);
}

void StepRunner::enqueue_optimizer() {
  if (grouped_) return;  // stepped in enqueue_grads
  StepInfo info;
  info.d_loss = loss_.get();
  if (trace_) trace_->optimizer_begin(stream_);
  if (!clip_taken_) clipper_.run(stream_);  // else the optimizer runs it after its pass A
  if (clip_) info.d_grad_scale = clipper_.d_scale();
  opt_.step(info, stream_);
  if (trace_) trace_->optimizer_end(stream_);
  if (plan_) {  // every rank's refreshed tensors to every rank: the copy the model reads
    // With a bf16 copy, the fp32 weights of other ranks' tensors are gathered only when a checkpoint
    // needs them (DataParallel::gather_params): every step it would move 2/3 of the bytes for nothing.
    Arena& a = opt_.arena();
    if (a.params_bf16())
      comm_->all_gather(a.params_bf16(), size_t(plan_->shard_elems), stream_);
    else
      comm_->all_gather(a.params(), size_t(plan_->shard_elems), stream_);
  }
}

// The previous replay has finished reading the staging buffers: run() waited for it. A captured step
// replays the fields the first staged batch had, so every batch must bring the same ones.
void StepRunner::stage(const BatchSource& batches) {
  for (int mi = 0; mi < accum_; mi++) {
    const Batch b = batches.next();
    digest_ += b.digest;
    const Batch d = staged(mi);
    CHECK(!d.soft_targets == !b.soft_targets);
    auto copy = [](const void* dst, const void* src, size_t bytes) {
      if (dst && src) std::memcpy(const_cast<void*>(dst), src, bytes);
    };
    copy(d.tokens, b.tokens, size_t(shape_.tokens) * 4);
    copy(d.targets, b.targets, size_t(shape_.targets) * 4);
    copy(d.pixels, b.pixels, size_t(shape_.pixels));
    copy(d.soft_targets, b.soft_targets, size_t(shape_.soft_targets) * 4);
    const ImageMix none;
    if (d.mix) copy(d.mix, b.mix ? b.mix : &none, sizeof(ImageMix));
    batches.release(stream_);
  }
}

StepRunner::Result StepRunner::run(const BatchSource& batches) {
  if (graphs_ && steps_run_ == 1) {  // capture after one eager step, which did the lazy set-ups
    graph_grads_ = CudaGraph::capture(stream_, [&] { enqueue_grads(nullptr); });
    if (!grouped_) graph_opt_ = CudaGraph::capture(stream_, [&] { enqueue_optimizer(); });
  }
  digest_ = 0;
  CUDA_CHECK(cudaEventRecord(ev_[0], stream_));
  if (trace_) trace_->start(stream_);
  if (graph_grads_) {
    stage(batches);
    graph_grads_.launch(stream_);
  } else {
    enqueue_grads(&batches);
  }
  CUDA_CHECK(cudaEventRecord(ev_[1], stream_));
  if (graph_opt_)
    graph_opt_.launch(stream_);
  else
    enqueue_optimizer();
  CUDA_CHECK(cudaEventRecord(ev_[2], stream_));
  CUDA_CHECK(cudaMemcpyAsync(host_, loss_.get(), 4, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaMemcpyAsync(host_ + 1, clipper_.d_norm(), 4, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaEventRecord(ev_[3], stream_));
  if (trace_) trace_->print(stream_);
  CUDA_CHECK(cudaEventSynchronize(ev_[3]));
  Result r{host_[0], host_[1], 0.0f, 0.0f, digest_};
  CUDA_CHECK(cudaEventElapsedTime(&r.ms, ev_[0], ev_[3]));
  CUDA_CHECK(cudaEventElapsedTime(&r.opt_ms, ev_[1], ev_[2]));
  steps_run_++;
  return r;
}
