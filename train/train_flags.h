// The flags every training program shares (optimizer, schedule, batch and steps, evaluation cadence,
// checkpoints, logging, learned-optimizer weights, CUDA graphs, seed), their range checks, and the
// optimizer options they make. A program adds its own flags (data, model, sampling) beside these.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cli.h"
#include "core/chunks.h"
#include "optim/options.h"
#include "train/flags.h"

struct TrainFlags {
  std::string optimizer = "adamw", schedule = "cosine", log, ckpt_dir, resume, lopt_weights, nccl_id_file;
  std::string grad_comm = "fp32";
  std::string grad_sum = "auto";   // auto, nccl or copy (train/peer_sum.h)
  std::string attention = "ours";  // ours, cudnn or cudnn-nondet (kernels/attention_kind.h)
  int B = 8, val_every = 100, val_batches = 10, ckpt_every = 0;
  int64_t steps = 1000, total_batch = 0, warmup = -1, seed = 1337;
  double lr = 6e-4, wd = 0.1, final_frac = 0.0, clip = 1.0, dropout = 0.0;
  double nccl_timeout = 300;  // seconds; NcclComm::kDefaultTimeout
  bool lr_given = false;      // -l was given: the learned optimizers take it as their multiplier only then
  bool lopt_random = false, cuda_graph = false, overlap = false, nccl = false, shard = false;
  std::vector<std::string> sets;
  // What -d counts and what makes one micro-batch, for the help and the messages: GPT-2's tokens of -b * -t
  // sequences, ViT's images of -b.
  std::string batch_unit = "tokens", micro_batch = "-b * -t";
  bool val_all = false;  // -m 0 means the whole validation set (train_vit)
  // The program's recipe where no flag reaches, as data for optimizer_defaults (one function for every
  // program): AdamW's beta2 (GPT-2 pretraining's, llm.c's, here), and whether -c decays Muon's AdamW part
  // too (else it keeps Keller's 0).
  double adamw_beta2 = 0.95;
  bool muon_aux_decay = false;
};

// The sections of a training program's --help (Cli::section), in this order; a program adds its data and
// model flags to kData before add_train_flags, and may add its own flags to the others after it.
namespace help_section {
constexpr const char* kData = "data and model";
constexpr const char* kOptimizer = "optimizer (the -o names and each one's --set options follow the flags)";
constexpr const char* kBatch = "batch and steps";
constexpr const char* kEval = "evaluation, checkpoints and log";
constexpr const char* kSpeed = "speed and several GPUs";
}  // namespace help_section

// Adds the shared flags to cli, section by section (-o, -l, -c, -k, -u, -q, --clip, --set, --lopt-weights,
// --lopt-random; -x, -b, -d, --dropout, --seed; -v, -m, -n, --ckpt-dir, --resume, --log; --cuda-graph,
// --attention, --overlap, --nccl-id-file, --nccl, --shard); `optimizers` is the -o help. The help's epilogue lists the
// optimizers' options at the values the program starts from (optimizer_defaults of f's defaults, before
// -l, -c and --set).
void add_train_flags(Cli& cli, TrainFlags* f, const std::string& optimizers);
// Every shared flag's range, before any file or GPU work: one sentence per mistake. A flag that the
// other flags make pointless (-u with -k constant) is refused too, rather than ignored.
void check_train_flags(const TrainFlags& f);
// --log, --ckpt-dir and --nccl-id-file can be written, creating nothing: a run refused by a later check
// (a bad shard, no GPU) leaves no empty log or folder. The trainer makes the folder (prepare_ckpt_dir) and
// TrainLog opens the log only after every check.
void check_output_paths(const TrainFlags& f);
// Fills the defaults -1 (-u) and 0 (-d) in; returns the micro-batches per step for micro-batches of
// micro_tokens tokens.
int resolve_batching(TrainFlags* f, int64_t micro_tokens);
// The optimizers' settings before the schedule and --set, for every program: optim/options.h's defaults,
// the program's recipe (above) and -l, -c, -x and --lopt-weights.
OptimOptions optimizer_defaults(const TrainFlags& f);
// optimizer_defaults with the schedule of the flags and --set applied: what the optimizer is made with.
OptimOptions train_optimizer_options(const TrainFlags& f);
// The optimizer's name, --set options and learned-optimizer weights, before any GPU work.
void check_train_optimizer(const TrainFlags& f, const OptimOptions& o);
bool is_learned(const std::string& optimizer);

class Arena;
class Optimizer;
// The optimizer of the flags over the whole arena; with --overlap a GroupedOptimizer over `hook_groups` (the
// model's, models/block_table.h). --lopt-random: random meta-weights written to a temporary folder only
// now, after every check, and removed as soon as the optimizer has read them.
// owned: the tensors it steps (empty: all; a rank's share in the sharded data-parallel mode, with the
// other ranks behind `cross`, optim/cross_rank.h).
class CrossRank;
std::unique_ptr<Optimizer> make_train_optimizer(const TrainFlags& f, const OptimOptions& o, Arena& arena,
                                                const std::vector<std::vector<int>>& hook_groups,
                                                const Owned& owned = {}, CrossRank* cross = nullptr);
