#include "train/train_flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "kernels/attention_kind.h"
#include "optim/groupable.h"
#include "optim/options.h"

void add_train_flags(Cli& cli, TrainFlags* f, const std::string& optimizers) {
  cli.section(help_section::kOptimizer);
  flags::add_optimizer(cli, &f->optimizer, optimizers);
  cli.add('l', "lr", &f->lr,
          "learning rate (AdamW; Muon's AdamW part; for Adafactor and learned optimizers only if given)");
  cli.add('c', "wd", &f->wd, "AdamW weight decay (matrices and embeddings only)");
  cli.add('k', "schedule", &f->schedule, "LR schedule: constant | warmup | cosine | wsd");
  cli.add('u', "warmup", &f->warmup, "LR warmup steps (-1 = min(100, steps / 10); not with -k constant)");
  cli.add('q', "final-lr-frac", &f->final_frac, "LR at the end of cosine / wsd, as a fraction");
  flags::add_clip(cli, &f->clip);
  flags::add_set(cli, &f->sets);
  cli.add(0, "lopt-weights", &f->lopt_weights,
          "learned-optimizer weights folder or file (velo, small_fc_lopt, celo2, elo, elo_celo2; no effect on the "
          "others)");
  cli.add(0, "lopt-random", &f->lopt_random,
          "random meta-weights of the published shapes for velo / small_fc_lopt / celo2 / elo / elo_celo2 (throughput "
          "tests only: they do not train well)");

  cli.section(help_section::kBatch);
  flags::add_steps(cli, &f->steps, "optimizer steps");
  cli.add('b', "batch", &f->B, "micro-batch size");
  cli.add('d', "total-batch", &f->total_batch,
          f->batch_unit + " per step (0 = " + f->micro_batch + "; else a multiple of it: gradient accumulation)");
  cli.add(0, "dropout", &f->dropout,
          "dropout probability in training (embeddings, attention, residual branches; 0 = off)");
  cli.add(0, "seed", &f->seed, "initialisation and sampling seed");

  cli.section(help_section::kEval);
  cli.add('v', "val-every", &f->val_every, "validate every N steps (0 = never)");
  cli.add('m', "val-batches", &f->val_batches, f->val_all ? "validation batches (0 = all)" : "validation batches");
  cli.add('n', "ckpt-every", &f->ckpt_every, "checkpoint every N steps (0 = only at the end and on a signal)");
  cli.add(0, "ckpt-dir", &f->ckpt_dir, "checkpoint folder (empty = no checkpoints)");
  cli.add(0, "resume", &f->resume, "checkpoint file to resume from (llm.c's -y 1 resumes from its output folder)");
  cli.add(0, "log", &f->log, "JSON-lines log file (one line per step)");

  cli.section(help_section::kSpeed);
  cli.add(0, "cuda-graph", &f->cuda_graph,
          "replay each step (micro-batches; clipping and optimizer) as captured CUDA graphs");
  cli.add(0, "attention", &f->attention,
          "ours (our flash attention), cudnn (cuDNN's fused attention, deterministic backward with a B*heads*T*T bf16 "
          "workspace) or cudnn-nondet (cuDNN's usual backward: dQ summed with atomics, so reruns may differ in the "
          "last bits); "
          "cuDNN's in bf16 only, without --dropout");
  cli.add(0, "overlap", &f->overlap,
          "step each block's tensors during backward, as soon as their gradients are final (needs --clip 0; "
          "adamw, adafactor, small_fc_lopt, elo; same results)");
  cli.add(0, "nccl-id-file", &f->nccl_id_file,
          "data parallel: the file through which the processes share NCCL's id (a fresh path each run, on a "
          "folder every process sees); the processes come from mpirun or RANK / WORLD_SIZE / LOCAL_RANK");
  cli.add(0, "nccl", &f->nccl, "sum gradients through NCCL even as one process (a check of that path)");
  cli.add(0, "shard", &f->shard,
          "data parallel, sharded: each process keeps the optimizer state of and steps only its share of the "
          "tensors (whole tensors, balanced by step cost); gradients reduced onto owners, the bf16 weights "
          "all-gathered");
  cli.add(0, "nccl-timeout", &f->nccl_timeout,
          "data parallel: seconds to wait for the other processes (to join; between two finished steps) before "
          "stopping with a sentence when one died or hangs (0 = wait forever)");
  cli.add(0, "grad-comm", &f->grad_comm,
          "data parallel: fp32, or bf16 (gradients rounded to bf16 and summed in bf16 through NCCL: half the bytes, "
          "as llm.c does; changes the results)");
  cli.add(0, "grad-sum", &f->grad_sum,
          "data parallel: what sums the gradients: copy (each GPU's copy engines pull the others' gradients over "
          "NVLink and a small kernel adds them, leaving backward its SMs; GPUs of one machine that map each other's "
          "memory), nccl (NCCL's kernels: several machines, --grad-comm bf16), or auto (copy where it can run, "
          "else nccl)");
  cli.set_epilogue(options_help(optimizer_defaults(*f)));
}

void check_train_flags(const TrainFlags& f) {
  if (f.total_batch < 0)
    user_error("-d must be 0 (one micro-batch of ", f.micro_batch, " ", f.batch_unit, ") or a positive multiple of ",
               f.micro_batch, " (got ", f.total_batch, ").");
  if (!(f.clip >= 0))
    user_error("--clip (grad-norm clip) must be >= 0, where 0 turns clipping off (got ", f.clip, ").");
  if (!(f.wd >= 0)) user_error("-c (weight decay) must be >= 0 (got ", f.wd, ").");
  if (f.val_every < 0)
    user_error("-v (validate every N steps) must be >= 0, where 0 means never (got ", f.val_every, ").");
  if (f.val_batches < (f.val_all ? 0 : 1))
    user_error("-m (validation batches) must be >= ", f.val_all ? 0 : 1, " (got ", f.val_batches, ").");
  if (f.ckpt_every < 0)
    user_error("-n (checkpoint every N steps) must be >= 0, where 0 means only at the end (got ", f.ckpt_every, ").");
  if (f.warmup < -1) user_error("-u (warmup steps) must be >= 0, or -1 for the default (got ", f.warmup, ").");
  if (f.schedule != "constant" && f.schedule != "warmup" && f.schedule != "cosine" && f.schedule != "wsd")
    user_error("-k (LR schedule) must be constant, warmup, cosine or wsd (got '", f.schedule,
               "'); sample every N steps is -s, as in llm.c.");
  if (f.schedule == "warmup" && f.warmup == 0)
    user_error("-k warmup needs -u >= 1 warmup steps (or -1 for the default).");
  if (f.schedule == "constant" && f.warmup > 0)
    user_error("-u ", f.warmup,
               " has no effect with -k constant, which has no warmup; use -k warmup, cosine or wsd, or leave out -u.");
  if (!(f.final_frac >= 0 && f.final_frac <= 1))
    user_error("-q (final LR fraction) must be in [0, 1] (got ", f.final_frac, ").");
  if ((f.schedule == "constant" || f.schedule == "warmup") && f.final_frac != 0)
    user_error("-q ", f.final_frac, " has no effect with -k ", f.schedule,
               ", which does not decay; use -k cosine or wsd, or leave out -q.");
  if (!(f.dropout >= 0 && f.dropout < 1)) user_error("--dropout must be at least 0 and below 1 (got ", f.dropout, ").");
  if (!(f.nccl_timeout >= 0))
    user_error("--nccl-timeout must be >= 0 seconds, where 0 waits forever (got ", f.nccl_timeout, ").");
  if (f.grad_comm != "fp32" && f.grad_comm != "bf16")
    user_error("--grad-comm must be fp32 or bf16 (got '", f.grad_comm, "').");
  if (f.grad_sum != "auto" && f.grad_sum != "nccl" && f.grad_sum != "copy")
    user_error("--grad-sum must be auto, nccl or copy (got '", f.grad_sum, "').");
  if (f.grad_sum == "copy" && f.grad_comm == "bf16")
    user_error("--grad-sum copy sums the fp32 gradients; leave out --grad-comm bf16 or use --grad-sum nccl.");
  if (attention_by_name(f.attention) != Attention::kOurs && f.dropout > 0)
    user_error("--attention ", f.attention, " has no attention dropout; use --attention ours with --dropout ",
               f.dropout, ", or leave out --dropout.");
  if (f.overlap && f.clip > 0)
    user_error("--overlap steps each block during backward, but --clip ", f.clip,
               " needs the norm of every gradient before any tensor moves; add --clip 0 or leave out --overlap.");
}

namespace {
// errno's sentence for a path that cannot be used: "No such file or directory", "Not a directory", ...
std::string why(int err) { return std::strerror(err); }

// The nearest folder at or above `path` that exists ("." for a relative path with none), and errno of
// the first stat that failed other than for a missing entry (0 when none did).
std::string existing_ancestor(const std::string& path, int* err) {
  namespace fs = std::filesystem;
  *err = 0;
  fs::path p = fs::path(path).lexically_normal();
  for (;;) {
    struct stat st;
    if (stat(p.empty() ? "." : p.c_str(), &st) == 0) return p.empty() ? "." : p.string();
    if (errno != ENOENT) {
      *err = errno;
      return p.string();
    }
    if (!p.has_relative_path() || p.parent_path() == p) return ".";
    p = p.parent_path();
  }
}

// The checkpoint folder: an existing writable folder, or one that can be made (its nearest existing
// parent is a writable folder). Nothing is created: prepare_ckpt_dir makes it after every check.
void check_ckpt_dir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) user_error("--ckpt-dir '", dir, "' is a file, not a folder; choose a folder.");
    if (access(dir.c_str(), W_OK | X_OK) != 0)
      user_error("cannot write in the checkpoint folder '", dir, "' (", why(errno), "); choose another --ckpt-dir.");
    return;
  }
  int err = errno == ENOENT ? 0 : errno;
  const std::string base = err ? dir : existing_ancestor(dir, &err);
  if (!err && stat(base.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) err = ENOTDIR;
  if (!err && access(base.c_str(), W_OK | X_OK) != 0) err = errno;
  if (err) user_error("cannot create the checkpoint folder '", dir, "' (", why(err), "); choose another --ckpt-dir.");
}

// The log file: an existing writable file, or a new one in an existing writable folder. Not created here:
// TrainLog opens it after every check, so a refused run leaves no empty log.
void check_log_file(const std::string& path) {
  struct stat st;
  int err = 0;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      err = EISDIR;
    else if (access(path.c_str(), W_OK) != 0)
      err = errno;
  } else if (errno != ENOENT) {
    err = errno;
  } else {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    if (stat(dir.empty() ? "." : dir.c_str(), &st) != 0)
      err = errno;
    else if (!S_ISDIR(st.st_mode))
      err = ENOTDIR;
    else if (access(dir.empty() ? "." : dir.c_str(), W_OK | X_OK) != 0)
      err = errno;
  }
  if (err) user_error("cannot open the log file '", path, "' (", why(err), "); choose another --log.");
}
}  // namespace

void check_output_paths(const TrainFlags& f) {
  if (!f.log.empty()) check_log_file(f.log);
  if (!f.ckpt_dir.empty()) check_ckpt_dir(f.ckpt_dir);
  if (!f.nccl_id_file.empty()) {  // rank 0 writes the id there and every process reads it
    const std::string dir = std::filesystem::path(f.nccl_id_file).parent_path().string();
    struct stat st;
    if (stat(f.nccl_id_file.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      user_error("--nccl-id-file '", f.nccl_id_file, "' is a folder; give a new file's path in it.");
    if (stat(dir.empty() ? "." : dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      user_error("--nccl-id-file '", f.nccl_id_file, "' is not in an existing folder; give a path in a folder that ",
                 "every process sees.");
  }
}

int resolve_batching(TrainFlags* f, int64_t micro_tokens) {
  if (f->warmup < 0) f->warmup = std::min<int64_t>(100, f->steps / 10);
  if (f->total_batch == 0) f->total_batch = micro_tokens;
  if (f->total_batch % micro_tokens)
    user_error("-d (", f->total_batch, ") must be a multiple of ", f->micro_batch, " (", micro_tokens, ").");
  if (f->total_batch / micro_tokens > INT32_MAX)
    user_error("-d (", f->total_batch, ") asks for more than ", INT32_MAX, " micro-batches per step.");
  return int(f->total_batch / micro_tokens);
}

OptimOptions optimizer_defaults(const TrainFlags& f) {
  OptimOptions o;  // torch's defaults (Adafactor keeps its weight decay 0: -c is AdamW's), Keller's for Muon's AdamW
  o.adamw.lr = f.lr;
  o.adamw.beta2 = f.adamw_beta2;
  o.adamw.weight_decay = f.wd;
  o.muon.lr = 0.02;  // Muon: Keller's lr for the hidden matrices, -l for the rest
  o.muon.aux.lr = f.lr;
  if (f.muon_aux_decay) o.muon.aux.weight_decay = f.wd;
  // Adafactor's and the learned optimizers' lr (1 = as meta-trained for the latter) change only when -l is given.
  if (f.lr_given) o.adafactor.lr = o.small_fc.lr = o.velo.lr = o.celo2.lr = o.elo.lr = o.elo_celo2.lr = f.lr;
  o.velo.num_steps = f.steps;
  if (!f.lopt_weights.empty())
    o.small_fc.weights = o.velo.weights = o.celo2.weights = o.elo.weights = o.elo_celo2.weights = f.lopt_weights;
  return o;
}

OptimOptions train_optimizer_options(const TrainFlags& f) {
  OptimOptions o = optimizer_defaults(f);
  o.schedule = f.schedule == "constant" ? make_schedule("constant", 0, f.steps, 0, 0.2)
                                        : make_schedule(f.schedule, std::max<int64_t>(f.warmup, f.schedule == "warmup"),
                                                        f.steps, f.final_frac, 0.2);
  for (const auto& s : f.sets) set_option(o, s);
  return o;
}

bool is_learned(const std::string& optimizer) {
  return optimizer == "velo" || optimizer == "small_fc_lopt" || optimizer == "celo2" || optimizer == "elo" ||
         optimizer == "elo_celo2";
}

// The weights option of a learned optimizer (what --lopt-weights sets).
static const std::string& lopt_weights_of(const std::string& optimizer, const OptimOptions& o) {
  if (optimizer == "velo") return o.velo.weights;
  if (optimizer == "celo2") return o.celo2.weights;
  if (optimizer == "elo_celo2") return o.elo_celo2.weights;
  if (optimizer == "elo") return o.elo.weights;
  return o.small_fc.weights;
}

void check_train_optimizer(const TrainFlags& f, const OptimOptions& o) {
  check_optimizer_name(f.optimizer);
  check_options_apply(f.sets, {f.optimizer});
  validate_options(f.optimizer, o);
  const std::string why = f.overlap ? why_not_groupable(f.optimizer, o) : "";
  if (!why.empty())
    user_error("--overlap cannot step ", f.optimizer, " block by block: ", why,
               "; leave out --overlap (adamw, adafactor, small_fc_lopt and elo can).");
  if (!is_learned(f.optimizer)) return;
  const std::string& given = lopt_weights_of(f.optimizer, o);
  if (f.lopt_random && !given.empty())
    user_error("--lopt-random replaces the weights given by --lopt-weights or --set ", f.optimizer,
               ".weights; use one or the other.");
  if (!f.lopt_random) check_lopt_weights(f.optimizer, o);  // read now: a missing file is found before the GPU check
}
