// train_gpt2: GPT-2 pretraining on llm.c token shards with any of the eight optimizers.
//
//   make train_gpt2 && ./train_gpt2 -o adamw          (defaults: d12 on data/kjv, see --help)
//
// The loop, top to bottom: validation every -v steps, a sample every -s steps, checkpoints every -n
// steps (and on SIGINT/SIGTERM), then per step: micro-batches with gradient accumulation, global
// grad-norm clipping, one optimizer step over the whole arena, one log line. What every trainer shares
// (flags, the set-up of train/trainer.h, checkpoints, the step, the log) is in train/.
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
#include "train/data_error.h"
#include "train/program.h"
#include "train/trainer.h"

namespace {
struct Args : TrainFlags {  // train_gpt2's own flags beside the shared ones
  std::string train = "data/kjv/kjv_train_*.bin", val = "data/kjv/kjv_val_*.bin", model = "d12", qkv = "separate";
  std::string precision = "bf16", tokenizer = "tokenizer/r50k_base.tiktoken";
  std::string kernels;  // --kernels: the timed choices given instead (Model::kernel_choices' form)
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
  cli.add(0, "kernels", &a->kernels,
          "bf16: the GELU backward's place, gelu_backward=epilogue or gelu_backward=kernel, instead of the faster "
          "one timed at start-up (the log's `kernels:` line): runs of one command then repeat each other");
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
  if (!a.kernels.empty() && a.kernels != "gelu_backward=epilogue" && a.kernels != "gelu_backward=kernel")
    user_error("--kernels must be gelu_backward=epilogue or gelu_backward=kernel (got '", a.kernels, "').");
  if (!a.kernels.empty() && a.precision != "bf16")
    user_error("--kernels chooses among the bf16 model's kernels; leave it out with --precision ", a.precision, ".");
  if (!a.kernels.empty() && !a.resume.empty())
    user_error("a resumed run takes its checkpoint's kernel choices; leave out --kernels.");
  if (a.precision == "fp32" && a.attention != "ours")
    user_error("--attention ", a.attention, " runs in the bf16 model only; use --precision bf16 or --attention ours.");
  check_attention_shape(a.attention, a.T, true);
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
  TrainPlan plan;  // what every trainer reads and checks (train/trainer.h)
  Gpt2Shape shape;
  std::unique_ptr<TokenLoader> train, val;
  std::unique_ptr<Gpt2Tokenizer> tok;
};

// Nothing is created before the last check (the GPU's).
Inputs prepare(Args& a) {
  Inputs in;
  TrainPlan& p = in.plan;
  check_flags(a);
  p.start(&a, int64_t(a.B) * a.T);
  if (p.dp->rank() > 0) a.sample_every = 0;  // rank 0 alone samples
  in.shape = model_shape(a);
  p.set_model(a, gpt2_param_table(in.shape));
  in.train = std::make_unique<TokenLoader>(glob_files(a.train), a.B, a.T, p.dp->rank(), p.dp->world(), in.shape.vocab,
                                           true, uint64_t(a.seed));
  if (!a.val.empty() && a.val_every > 0)
    in.val = std::make_unique<TokenLoader>(glob_files(a.val), a.B, a.T, 0, 1, in.shape.vocab, false, 0);
  if (std::FILE* f = std::fopen(a.tokenizer.c_str(), "r")) {
    std::fclose(f);
    in.tok = std::make_unique<Gpt2Tokenizer>(a.tokenizer);
  } else if (a.tokenizer_given) {  // the default may be missing (samples then show token ids), a path given may not
    user_error("cannot open the tokenizer '", a.tokenizer, "' given by --tokenizer; run scripts/download_tokenizer.sh ",
               "or leave out --tokenizer.");
  }
  p.state.rng.seed(uint64_t(a.seed) + 1);  // samples only; saved in checkpoints
  if (p.open_resume(a, "-e and --qkv")) {
    const std::vector<int64_t>& d = p.state.data;
    if (d.size() != 3) user_error("'", a.resume, "' holds no token-loader position; is it a train_vit checkpoint?");
    in.train->seek({d[0], d[1], d[2]});
  }
  p.finish(a);
  return in;
}

void print_header(const Args& a, const Inputs& in, const Trainer& t, const Gpt2& model) {
  const DevicePeak& peak = t.peak();
  std::printf(
      "train_gpt2 | %s | %s %s q/k/v %s, %.1fM params | %s | batch %d x %d x %d accum = %lld tokens/step | %lld "
      "steps\n",
      peak.name.c_str(), a.model.c_str(), a.qkv.c_str(), a.precision.c_str(), in.plan.table.num_params() / 1e6,
      a.optimizer.c_str(), a.B, a.T, in.plan.accum, (long long)a.total_batch, (long long)a.steps);
  std::printf("MFU against %.0f TFLOP/s bf16 (%s)\n", peak.flops / 1e12, peak.how.c_str());
  if (!model.kernel_choices().empty()) std::printf("kernels: %s\n", model.kernel_choices().c_str());
  if (a.dropout > 0) std::printf("dropout: %g in training\n", a.dropout);
  if (a.cuda_graph)
    std::printf(
        "each step replays %s (captured at the second step)\n",
        a.overlap ? "one CUDA graph, gradients with the optimizer" : "two CUDA graphs, gradients and optimizer");
  t.print_step_setup();
}

int run(Args& a) {
  Inputs in = prepare(a);
  const Gpt2Shape& shape = in.shape;
  const double step_flops = flops_per_token(shape, in.plan.table, a.T) * double(a.total_batch);
  Trainer t(a, in.plan, step_flops, "tok", a.precision == "bf16");  // the processes joined, the log, the arena
  const Attention attention = attention_by_name(a.attention);
  std::unique_ptr<Gpt2> model = make_gpt2(a.precision, shape, t.arena(), a.B, a.T, attention);
  if (!a.kernels.empty()) model->set_kernel_choices(a.kernels);
  t.set_model(*model, gpt2_tensors(t.table(), shape).blocks);  // optimizer, clipper, --resume, signals
  print_header(a, in, t, *model);

  BatchPrefetcher batches(*in.train, a.B, a.T);
  t.start({[&] {
             const BatchPrefetcher::Batch b = read_data([&] { return batches.next(); });
             Batch out{b.x, b.y};
             out.digest = b.digest;
             return out;
           },
           [&](cudaStream_t s) { batches.release(s); }});
  DeviceBuffer<float> val_loss(1, "loss");
  std::unique_ptr<Gpt2> sampler;
  TrainState& state = t.state();
  const uint64_t dropout_seed = uint64_t(a.seed) + 2;
  for (int64_t step = t.first_step(); step < a.steps; step++) {
    const bool stop = t.guard(step, [&] {  // a bad shard: the steps done are saved
      if (in.val && (step % a.val_every == 0 || step + 1 == a.steps))
        t.log().validation(step, validation_loss(*model, *in.val, a.val_batches, val_loss));
      if (a.sample_every > 0 && step > t.first_step() && step % a.sample_every == 0) {
        if (!sampler)
          sampler = make_gpt2(a.precision, shape, t.arena(), 1,
                              int(std::min<int64_t>(a.T, int64_t(a.sample_tokens) + 1)), attention);
        std::printf("--- sample ---\n%s\n--------------\n",
                    sample_text(*sampler, shape, in.tok.get(), a.sample_tokens, state.rng).c_str());
      }
      model->set_dropout(float(a.dropout), dropout_seed);
      return t.step(step);  // micro-batches, clip, update, log
    });
    const TokenLoader::Position at = batches.position();
    state.data = {at.epoch, at.shard, at.sample};
    if (a.dropout > 0) state.dropout_counter = model->dropout_counter();  // it advances only with dropout on
    if (t.end_step(step, stop)) return 0;  // a checkpoint every -n steps; a signal: checkpoint and stop
  }
  t.checkpoint(a.steps);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli("train_gpt2",
          "Pretrains GPT-2 on llm.c token shards (prepare the default corpus with scripts/prepare_kjv.sh).");
  add_flags(cli, &a);
  return run_program("train_gpt2", cli, argc, argv, [&] {
    a.lr_given = cli.given("lr");
    a.tokenizer_given = cli.given("tokenizer");
    return run(a);
  });
}
