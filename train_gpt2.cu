// train_gpt2: GPT-2 pretraining on llm.c token shards with any of the eight optimizers.
//
//   make train_gpt2 && ./train_gpt2 -o adamw          (defaults: d12 on data/kjv, see --help)
//
// The loop, top to bottom: validation every -v steps, a sample every -s steps, checkpoints every -n
// steps (and on SIGINT/SIGTERM), then per step: micro-batches with gradient accumulation, global
// grad-norm clipping, one optimizer step over the whole arena, one log line. What every trainer shares
// (flags, checkpoints, the step, the log) is in train/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "common/cuda_check.h"
#include "data/gpt2_tokenizer.h"
#include "data/prefetcher.h"
#include "data/token_shards.h"
#include "kernels/reduce.h"
#include "models/gpt2.h"
#include "optim/grad_clip.h"
#include "train/checkpoint.h"
#include "train/data_error.h"
#include "train/data_parallel.h"
#include "train/program.h"
#include "train/step_runner.h"
#include "train/train_flags.h"
#include "train/train_log.h"

namespace {
struct Args : TrainFlags {  // train_gpt2's own flags beside the shared ones
  std::string train = "data/kjv/kjv_train_*.bin", val = "data/kjv/kjv_val_*.bin", model = "d12", qkv = "separate";
  std::string precision = "bf16", tokenizer = "tokenizer/r50k_base.tiktoken";
  int T = 1024, sample_every = 200, sample_tokens = 64;
  bool tokenizer_given = false;  // --tokenizer was given: a missing file is an error, not "print token ids"
};

const unsigned kTrainModels = kGpt2Sizes | kGpt2Tiny;  // tiny: quick experiments and tests

void add_flags(Cli& cli, Args* a) {
  cli.section(help_section::kData);
  cli.add('i', "train", &a->train, "training shards (glob)");
  cli.add('j', "val", &a->val, "validation shards (glob); empty = no validation");
  flags::add_model(cli, &a->model, kTrainModels, false);
  cli.add(0, "qkv", &a->qkv, "separate (q, k, v matrices, the PyLO paper's setting) or fused");
  cli.add(0, "precision", &a->precision, "bf16 (mixed precision, fast) or fp32 (exact, slow)");
  add_train_flags(cli, a, "adamw | adafactor | muon | velo | small_fc_lopt | celo2 | elo | elo_celo2");
  cli.section(help_section::kBatch);
  flags::add_seq(cli, &a->T, "sequence length (at most the model's context, 1024)");
  cli.section(help_section::kEval);
  cli.add('s', "sample-every", &a->sample_every, "print a sample every N steps (0 = never)");
  cli.add('g', "sample-tokens", &a->sample_tokens, "tokens per sample (llm.c's genT)");
  flags::add_tokenizer(cli, &a->tokenizer, "r50k_base.tiktoken for decoding samples");
  flags::add_flag_notes(cli, "train_gpt2");
}

// train_gpt2's checks beside the shared ones (check_train_flags), before any file or GPU work.
void check_flags(const Args& a) {
  if (a.B < 1 || a.T < 2 || a.steps < 1) user_error("-b must be >= 1, -t >= 2 and -x >= 1.");
  check_train_flags(a);
  if (a.sample_every < 0)
    user_error("-s (sample every N steps) must be >= 0, where 0 means never (got ", a.sample_every, ").");
  if (a.sample_tokens < 1)
    user_error("-g (tokens per sample) must be >= 1 (got ", a.sample_tokens, "); the grad-norm clip is --clip.");
  if (a.precision != "bf16" && a.precision != "fp32")
    user_error("--precision must be bf16 or fp32 (got '", a.precision, "').");
  if (a.cuda_graph && std::getenv("GPT2_PROFILE") && std::string(std::getenv("GPT2_PROFILE")) == "1")
    user_error(
        "GPT2_PROFILE=1 times each kernel on the host and cannot run inside --cuda-graph; use one or the other.");
}

Gpt2Shape model_shape(const Args& a) {
  Gpt2Shape s = model_by_name(a.model, kTrainModels).gpt2;
  if (a.qkv != "separate" && a.qkv != "fused") user_error("--qkv must be separate or fused (got '", a.qkv, "').");
  s.separate_qkv = a.qkv == "separate";
  if (a.T > s.max_seq) user_error("-t (", a.T, ") must be at most the model's context length (", s.max_seq, ").");
  return s;
}

// The optimizers' settings before the schedule and --set: GPT-2 pretraining's defaults and the flags.
OptimOptions gpt2_optimizer_defaults(const TrainFlags& a) {
  OptimOptions o;
  o.adamw.beta2 = 0.95;  // GPT-2 pretraining practice (llm.c); --set adamw.beta2=... overrides
  o.adamw.lr = a.lr;
  o.adamw.weight_decay = a.wd;
  o.adafactor.weight_decay = 0.0;
  o.muon.lr = 0.02;  // Muon: Keller's lr for the matrices, -l for the rest
  o.muon.aux.lr = a.lr;
  o.muon.aux.beta2 = 0.95;
  // Adafactor's and the learned optimizers' lr (1 = as meta-trained for the latter) change only when -l is given.
  if (a.lr_given) o.adafactor.lr = o.small_fc.lr = o.velo.lr = o.celo2.lr = o.elo.lr = o.elo_celo2.lr = a.lr;
  o.velo.num_steps = a.steps;
  if (!a.lopt_weights.empty())
    o.small_fc.weights = o.velo.weights = o.celo2.weights = o.elo.weights = o.elo_celo2.weights = a.lopt_weights;
  return o;
}

// targets.md's count (the one llm.c's MFU figures use): 6 per parameter plus 6 * L * C * T for attention.
double flops_per_token(const Gpt2Shape& s, const ParamTable& t, int T) {
  return 6.0 * double(t.num_params()) + 6.0 * s.layers * s.channels * double(T);
}

std::string sample_text(Gpt2& m, const Gpt2Shape& s, const Gpt2Tokenizer* tok, int n, std::mt19937_64& rng) {
  const int T = m.T();
  std::vector<int> x(size_t(T), Gpt2Tokenizer::kEot), out;
  std::vector<float> row(size_t(s.vocab));
  for (int i = 0; i < n && i + 1 < T; i++) {
    m.set_batch(x.data(), nullptr, 0);
    m.forward(0);
    m.logits_to_host(i, 1, row.data());
    const float mx = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (auto& v : row) sum += v = std::exp(v - mx);
    double u = std::uniform_real_distribution<double>(0, sum)(rng);
    int id = 0;
    while (id + 1 < s.vocab && (u -= row[size_t(id)]) > 0) id++;
    x[size_t(i + 1)] = id;
    out.push_back(id);
  }
  if (!tok) return "(tokenizer missing; ids) " + std::to_string(out.size()) + " tokens";
  std::string text;
  for (int id : out) text += id == Gpt2Tokenizer::kEot ? std::string("<|endoftext|>") : tok->token_bytes(id);
  return text;
}

// Mean loss over the first `batches` validation batches (no dropout).
float validation_loss(Gpt2& model, TokenLoader& val, int batches, DeviceBuffer<float>& acc) {
  std::vector<int32_t> x(size_t(model.B()) * size_t(model.T())), y(x.size());
  read_data([&] { val.seek({}); });
  model.set_dropout(0.0f, 0);
  for (int i = 0; i < batches; i++) {
    read_data([&] { val.next(x.data(), y.data()); });
    model.set_batch(x.data(), y.data(), 0);
    model.forward(0);
    model.loss_and_dlogits(1.0f, 0);
    scale_add(acc.get(), model.d_loss(), 1.0f / float(batches), i > 0, 0);
  }
  return acc.download(1)[0];
}

// What run() reads and checks before it touches the GPU: a mistake costs no GPU time and shows on any
// machine.
struct Inputs {
  std::unique_ptr<DataParallel> dp;  // this process among the others (one process without a launcher)
  int accum = 1;
  Gpt2Shape shape;
  OptimOptions options;
  ParamTable table;  // in its natural layout (the arena's is dp->layout(table))
  std::unique_ptr<TokenLoader> train, val;
  std::unique_ptr<Gpt2Tokenizer> tok;
  std::unique_ptr<SectionReader> resume;       // opened, checksums verified, model and data position checked
  std::unique_ptr<SectionReader> rank_resume;  // data parallel, ranks > 0: the rank's own file
  TrainState state;
};

// Nothing is created before the last check (the GPU's).
Inputs prepare(Args& a) {
  Inputs in;
  check_flags(a);
  const ProcessGroup g = process_group_from_env();
  if (g.rank > 0) {  // rank 0 alone logs, validates and samples; every rank writes its part of a checkpoint
    a.log.clear();
    a.val_every = a.sample_every = 0;
  }
  check_output_paths(a);
  if (g.world > 1) a.micro_batch = "-b * -t * " + std::to_string(g.world) + " processes";
  in.accum = resolve_batching(&a, int64_t(a.B) * a.T * g.world);
  in.shape = model_shape(a);
  in.options = train_optimizer_options(a, gpt2_optimizer_defaults(a));
  check_train_optimizer(a, in.options);
  in.table = gpt2_param_table(in.shape);
  in.dp = std::make_unique<DataParallel>(a, in.table);
  in.train = std::make_unique<TokenLoader>(glob_files(a.train), a.B, a.T, g.rank, g.world, in.shape.vocab, true,
                                           uint64_t(a.seed));
  if (!a.val.empty() && a.val_every > 0)
    in.val = std::make_unique<TokenLoader>(glob_files(a.val), a.B, a.T, 0, 1, in.shape.vocab, false, 0);
  if (std::FILE* f = std::fopen(a.tokenizer.c_str(), "r")) {
    std::fclose(f);
    in.tok = std::make_unique<Gpt2Tokenizer>(a.tokenizer);
  } else if (a.tokenizer_given) {  // the default may be missing (samples then show token ids), a path given may not
    user_error("cannot open the tokenizer '", a.tokenizer, "' given by --tokenizer; run scripts/download_tokenizer.sh ",
               "or leave out --tokenizer.");
  }
  in.state.rng.seed(uint64_t(a.seed) + 1);  // samples only; saved in checkpoints
  if (!a.resume.empty()) {
    in.resume = open_checkpoint(a.resume);
    check_checkpoint_params(*in.resume, in.table, "-e and --qkv");
    check_checkpoint_optimizer(*in.resume, a.optimizer, a.overlap);
    in.state = read_train_state(*in.resume, a.steps);
    in.rank_resume = in.dp->check_resume(*in.resume, in.table, &in.state);
    const std::vector<int64_t>& d = in.state.data;
    if (d.size() != 3) user_error("'", a.resume, "' holds no token-loader position; is it a train_vit checkpoint?");
    in.train->seek({d[0], d[1], d[2]});
  }
  require_cuda_gpu();  // the last check; then what the run writes (TrainLog opens the log after this)
  if (!a.ckpt_dir.empty()) prepare_ckpt_dir(a.ckpt_dir);
  return in;
}

void print_header(const Args& a, const Inputs& in, const DevicePeak& peak, const Gpt2& model) {
  std::printf(
      "train_gpt2 | %s | %s %s q/k/v %s, %.1fM params | %s | batch %d x %d x %d accum = %lld tokens/step | %lld "
      "steps\n",
      peak.name.c_str(), a.model.c_str(), a.qkv.c_str(), a.precision.c_str(), in.table.num_params() / 1e6,
      a.optimizer.c_str(), a.B, a.T, in.accum, (long long)a.total_batch, (long long)a.steps);
  std::printf("MFU against %.0f TFLOP/s bf16 (%s)\n", peak.flops / 1e12, peak.how.c_str());
  if (!model.kernel_choices().empty()) std::printf("kernels: %s\n", model.kernel_choices().c_str());
  if (a.dropout > 0) std::printf("dropout: %g in training\n", a.dropout);
  if (a.cuda_graph)
    std::printf(
        "each step replays %s (captured at the second step)\n",
        a.overlap ? "one CUDA graph, gradients with the optimizer" : "two CUDA graphs, gradients and optimizer");
  if (a.overlap) std::printf("optimizer: each block's tensors step during backward (--overlap)\n");
  if (in.dp->on()) std::printf("data parallel: %s\n", in.dp->describe().c_str());
}

int run(Args& a) {
  Inputs in = prepare(a);
  DataParallel& dp = *in.dp;
  dp.connect(a.nccl_id_file);  // before anything makes a context on another GPU
  const Gpt2Shape& shape = in.shape;
  const ParamTable table = dp.layout(in.table);
  const OptimOptions& oo = in.options;
  TrainState& state = in.state;
  const DevicePeak peak = cuda_device_available() ? device_peak_bf16() : DevicePeak{};
  TrainLog log(a.log, peak.flops * dp.world(), flops_per_token(shape, table, a.T) * double(a.total_batch),
               double(a.total_batch), "tok");
  if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");

  Arena arena(table, a.precision == "bf16");
  const std::vector<float> init = init_params(table, uint64_t(a.seed));
  for (const auto& t : table.tensors()) arena.set_param(t.index, &init[size_t(t.offset)]);
  std::unique_ptr<Gpt2> model = make_gpt2(a.precision, shape, arena, a.B, a.T);
  const std::vector<std::vector<int>> groups = hook_groups(table, gpt2_tensors(table, shape).blocks);
  std::unique_ptr<Optimizer> opt = make_train_optimizer(a, oo, arena, groups, dp.owned(), dp.cross());
  GradClipper clipper(arena, float(a.clip), dp.owned(), dp.cross());
  if (in.resume) {
    load_checkpoint(*in.resume, arena, *model, *opt, dp.sharded() ? in.rank_resume.get() : nullptr);
    std::printf("resumed from %s at step %lld\n", a.resume.c_str(), (long long)state.step);
  }
  catch_stop_signals();
  print_header(a, in, peak, *model);

  BatchPrefetcher batches(*in.train, a.B, a.T);
  const BatchSource source{[&] {
                             const BatchPrefetcher::Batch b = read_data([&] { return batches.next(); });
                             Batch out{b.x, b.y};
                             out.digest = b.digest;
                             return out;
                           },
                           [&](cudaStream_t s) { batches.release(s); }};
  StepRunner runner(*model, *opt, clipper, a.clip > 0, in.accum, a.cuda_graph, a.overlap, dp.comm(), groups, dp.plan(),
                    dp.bf16_sums());
  DeviceBuffer<float> val_loss(1, "loss");
  std::unique_ptr<Gpt2> sampler;
  const Checkpointer ckpt(a.ckpt_dir, arena, *model, *opt, &dp);
  auto checkpoint = [&](int64_t step) { return ckpt.save(step, state); };
  const uint64_t dropout_seed = uint64_t(a.seed) + 2;
  const int64_t step0 = state.step;
  for (int64_t step = step0; step < a.steps; step++) {
    const TrainState start = state;  // a data error saves the state at the step's start
    DataParallel::StepEnd end{};
    try {
      if (in.val && (step % a.val_every == 0 || step + 1 == a.steps))
        log.validation(step, validation_loss(*model, *in.val, a.val_batches, val_loss));
      if (a.sample_every > 0 && step > step0 && step % a.sample_every == 0) {
        if (!sampler)
          sampler = make_gpt2(a.precision, shape, arena, 1, int(std::min<int64_t>(a.T, int64_t(a.sample_tokens) + 1)));
        std::printf("--- sample ---\n%s\n--------------\n",
                    sample_text(*sampler, shape, in.tok.get(), a.sample_tokens, state.rng).c_str());
      }
      model->set_dropout(float(a.dropout), dropout_seed);
      const StepRunner::Result r = runner.run(source);
      end = dp.step_end(stop_requested(), r.digest);  // every process stops after the same step
      if (!std::isfinite(r.loss))
        user_error("the loss became ", r.loss, " at step ", step, "; lower the learning rate (-l).");
      log.step({step + 1, a.steps, r.loss, r.grad_norm, oo.schedule.factor(step), r.ms, r.opt_ms, end.digest});
    } catch (const DataError& e) {
      // The failed step's micro-batches changed only gradients, which a checkpoint does not keep, so the
      // state at its start is the run's progress. Nothing to keep when this run has done no step. With
      // several processes the others are already in the next collective: exit, and the launcher ends them.
      if (a.ckpt_dir.empty() || step == step0 || dp.world() > 1) throw;
      state = start;
      user_error(data_error_saved(e.what(), step, checkpoint(step)));
    }
    const TokenLoader::Position at = batches.position();
    state.data = {at.epoch, at.shard, at.sample};
    if (a.dropout > 0) state.dropout_counter = model->dropout_counter();  // it advances only with dropout on
    if (end.stop) std::printf("signal received: stopping after step %lld\n", (long long)step + 1);
    if (end.stop || (a.ckpt_every > 0 && (step + 1) % a.ckpt_every == 0)) checkpoint(step + 1);
    if (end.stop) return 0;
  }
  checkpoint(a.steps);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli("train_gpt2",
          "Pretrains GPT-2 on llm.c token shards (prepare the default corpus with scripts/prepare_kjv.sh).");
  add_flags(cli, &a);
  cli.set_epilogue(
      options_help(gpt2_optimizer_defaults(a)));  // the values train_gpt2 starts from, before -l, -c and --set
  return run_program("train_gpt2", cli, argc, argv, [&] {
    a.lr_given = cli.given("lr");
    a.tokenizer_given = cli.given("tokenizer");
    return run(a);
  });
}
