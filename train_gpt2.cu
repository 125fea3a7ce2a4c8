// train_gpt2: GPT-2 pretraining on llm.c token shards with any of the five optimizers.
//
//   make train_gpt2 && ./train_gpt2 -o adamw          (defaults: d12 on data/kjv, see --help)
//
// The loop, top to bottom: validation every -v steps, a sample every -k steps, checkpoints every -n
// steps (and on SIGINT/SIGTERM), then per step: micro-batches with gradient accumulation, global
// grad-norm clipping, one optimizer step over the whole arena, one log line.
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <sys/stat.h>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "data/gpt2_tokenizer.h"
#include "data/prefetcher.h"
#include "data/token_shards.h"
#include "kernels/gpt2_kernels.h"
#include "models/gpt2_net.h"
#include "models/gpt2_ref.h"
#include "optim/grad_clip.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Args {
  std::string train = "data/kjv/kjv_train_*.bin", val = "data/kjv/kjv_val_*.bin", model = "d12", qkv = "separate";
  std::string optimizer = "adamw", schedule = "cosine", log, ckpt_dir, resume, tokenizer = "tokenizer/r50k_base.tiktoken";
  std::string precision = "bf16";
  std::string lopt_weights, lopt_weights_small_fc;
  int B = 8, T = 1024, val_every = 100, val_batches = 10, sample_every = 200, sample_tokens = 64, ckpt_every = 0;
  int64_t steps = 1000, total_batch = 0, warmup = -1, seed = 1337;
  double lr = 6e-4, wd = 0.1, final_frac = 0.0, clip = 1.0, dropout = 0.0;
  bool lr_given = false, lopt_random = false, cuda_graph = false;
  std::vector<std::string> sets;
};

Gpt2Shape model_shape(const Args& a) {
  Gpt2Shape s;
  if (a.model == "tiny") s.layers = 4, s.channels = 128, s.heads = 2;  // quick experiments and tests (64 channels per head)
  else s = gpt2_shape(a.model);
  if (a.qkv != "separate" && a.qkv != "fused") user_error("--qkv must be separate or fused (got '", a.qkv, "').");
  s.separate_qkv = a.qkv == "separate";
  return s;
}

OptimOptions optimizer_options(const Args& a) {
  OptimOptions o;
  o.adamw.beta2 = 0.95;  // GPT-2 pretraining practice (llm.c); --set adamw.beta2=... overrides
  o.adamw.lr = a.lr, o.adamw.weight_decay = a.wd;
  o.adafactor.weight_decay = 0.0;
  if (a.lr_given) o.adafactor.lr = a.lr;
  o.muon.lr = 0.02, o.muon.aux.lr = a.lr, o.muon.aux.beta2 = 0.95;  // Muon: Keller's lr for matrices, -l for the rest
  if (a.lr_given) o.small_fc.lr = a.lr, o.velo.lr = a.lr;           // learned optimizers: 1 = as meta-trained
  o.velo.num_steps = a.steps;
  if (!a.lopt_weights.empty()) o.small_fc.weights = o.velo.weights = a.lopt_weights;
  if (!a.lopt_weights_small_fc.empty()) o.small_fc.weights = a.lopt_weights_small_fc;
  o.schedule = a.schedule == "constant" ? make_schedule("constant", 0, a.steps, 0, 0.2)
                                        : make_schedule(a.schedule, std::max<int64_t>(a.warmup, a.schedule == "warmup"), a.steps,
                                                        a.final_frac, 0.2);
  for (const auto& s : a.sets) set_option(o, s);
  return o;
}

// targets.md's count (the one llm.c's MFU figures use): 6 per parameter plus 6 * L * C * T for attention.
double flops_per_token(const Gpt2Shape& s, const ParamTable& t, int T) {
  return 6.0 * double(t.num_params()) + 6.0 * s.layers * s.channels * double(T);
}

std::string sample_text(Gpt2Net& m, const Gpt2Shape& s, const Gpt2Tokenizer* tok, int n, std::mt19937_64& rng) {
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

// Pinned host copies of a step's micro-batches (tokens and targets), at fixed addresses for a CUDA graph.
class PinnedBatches {
 public:
  PinnedBatches(int count, int64_t tokens) : n_(tokens) {
    if (count > 0) CUDA_CHECK(cudaMallocHost(&p_, size_t(count) * 2 * size_t(tokens) * sizeof(int32_t)));
  }
  ~PinnedBatches() { cudaFreeHost(p_); }
  PinnedBatches(const PinnedBatches&) = delete;
  PinnedBatches& operator=(const PinnedBatches&) = delete;
  int32_t* x(int i) const { return p_ + size_t(2 * i) * size_t(n_); }
  int32_t* y(int i) const { return p_ + size_t(2 * i + 1) * size_t(n_); }

 private:
  int64_t n_;
  int32_t* p_ = nullptr;
};

void save_checkpoint(const std::string& path, const Gpt2Shape& s, const Gpt2Net& model, const Arena& arena, const Optimizer& opt, int64_t step,
                     const TokenLoader::Position& pos, const std::mt19937_64& rng) {
  CUDA_CHECK(cudaDeviceSynchronize());
  SectionWriter w(path);
  const int32_t shape[6] = {s.layers, s.channels, s.heads, s.vocab, s.max_seq, s.separate_qkv};
  w.put("model.shape", shape, sizeof shape);
  const std::vector<float> p = arena.get_params_flat();
  w.put_vector("model.params", p);
  w.put_string("model.kernels", model.kernel_choices());
  opt.save_state(w);
  w.put_i64("train.step", step);
  w.put_i64("train.dropout_counter", int64_t(model.dropout_counter()));
  const int64_t lp[3] = {pos.epoch, pos.shard, pos.sample};
  w.put("train.loader", lp, sizeof lp);
  std::ostringstream r;
  r << rng;
  w.put_string("train.sample_rng", r.str());
  w.commit();
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli("train_gpt2", "Pretrains GPT-2 on llm.c token shards (prepare the default corpus with scripts/prepare_kjv.sh).");
  cli.add('i', "train", &a.train, "training shards (glob)");
  cli.add('j', "val", &a.val, "validation shards (glob); empty = no validation");
  cli.add('e', "model", &a.model, "d12 | d24 | d36 | d48 (124M, 355M, 774M, 1558M) or tiny");
  cli.add(0, "qkv", &a.qkv, "separate (q, k, v matrices, the PyLO paper's setting) or fused");
  cli.add(0, "precision", &a.precision, "bf16 (mixed precision, fast) or fp32 (exact, slow)");
  cli.add(0, "dropout", &a.dropout, "dropout probability in training (embeddings, attention, residual branches; 0 = off)");
  cli.add('o', "optimizer", &a.optimizer, "adamw | adafactor | muon | velo | small_fc_lopt");
  cli.add('l', "lr", &a.lr, "learning rate (AdamW; Muon's AdamW part; for learned optimizers only if given)");
  cli.add('c', "wd", &a.wd, "AdamW weight decay (matrices and embeddings only)");
  cli.add('s', "schedule", &a.schedule, "constant | warmup | cosine | wsd");
  cli.add('u', "warmup", &a.warmup, "warmup steps (-1 = min(100, steps / 10))");
  cli.add('q', "final-lr-frac", &a.final_frac, "LR at the end of cosine / wsd, as a fraction");
  cli.add('x', "steps", &a.steps, "optimizer steps");
  cli.add('b', "batch", &a.B, "micro-batch size");
  cli.add('t', "seq", &a.T, "sequence length");
  cli.add('d', "total-batch", &a.total_batch, "tokens per step (0 = b*t; else a multiple of b*t: gradient accumulation)");
  cli.add('g', "clip", &a.clip, "global grad-norm clip (0 = off)");
  cli.add('v', "val-every", &a.val_every, "validate every N steps (0 = never)");
  cli.add('m', "val-batches", &a.val_batches, "validation batches");
  cli.add('k', "sample-every", &a.sample_every, "print a sample every N steps (0 = never)");
  cli.add('z', "sample-tokens", &a.sample_tokens, "tokens per sample");
  cli.add('n', "ckpt-every", &a.ckpt_every, "checkpoint every N steps (0 = only at the end and on a signal)");
  cli.add(0, "ckpt-dir", &a.ckpt_dir, "checkpoint folder (empty = no checkpoints)");
  cli.add('r', "resume", &a.resume, "checkpoint file to resume from");
  cli.add(0, "log", &a.log, "JSON-lines log file (one line per step)");
  cli.add(0, "tokenizer", &a.tokenizer, "r50k_base.tiktoken for decoding samples");
  cli.add(0, "lopt-weights", &a.lopt_weights, "learned-optimizer weights folder or file");
  cli.add(0, "lopt-random", &a.lopt_random, "random meta-weights of the published shapes (throughput tests only: they do not train well)");
  cli.add(0, "cuda-graph", &a.cuda_graph, "replay each step (micro-batches; clipping and optimizer) as captured CUDA graphs");
  cli.add(0, "seed", &a.seed, "initialisation and sampling seed");
  cli.add(0, "set", &a.sets, "optimizer option key=value (repeatable), e.g. --set adamw.beta2=0.99");
  try {
    for (int i = 1; i < argc; i++) a.lr_given |= std::string(argv[i]) == "-l" || std::string(argv[i]).rfind("--lr", 0) == 0;
    if (!cli.parse(argc, argv)) return 0;
    if (a.B < 1 || a.T < 2 || a.steps < 1) user_error("-b must be >= 1, -t >= 2 and -x >= 1.");
    if (a.precision != "bf16" && a.precision != "fp32") user_error("--precision must be bf16 or fp32 (got '", a.precision, "').");
    if (!(a.dropout >= 0 && a.dropout < 1)) user_error("--dropout must be at least 0 and below 1 (got ", a.dropout, ").");
    if (a.cuda_graph && std::getenv("GPT2_PROFILE") && std::string(std::getenv("GPT2_PROFILE")) == "1")
      user_error("GPT2_PROFILE=1 times each kernel on the host and cannot run inside --cuda-graph; use one or the other.");
    if (a.warmup < 0) a.warmup = std::min<int64_t>(100, a.steps / 10);
    const int64_t micro = int64_t(a.B) * a.T;
    if (a.total_batch == 0) a.total_batch = micro;
    if (a.total_batch % micro) user_error("-d (", a.total_batch, ") must be a multiple of -b * -t (", micro, ").");
    const int accum = int(a.total_batch / micro);
    if (a.lopt_random) {
      char tmpl[] = "/tmp/train_gpt2_lopt_XXXXXX";
      if (!mkdtemp(tmpl)) user_error("cannot create a temporary folder for random learned-optimizer weights.");
      a.lopt_weights = tmpl;
      save_small_fc_weights(a.lopt_weights + "/mulo", random_small_fc_weights(uint64_t(a.seed)));
      save_velo_weights_pylo(a.lopt_weights, random_velo_weights(uint64_t(a.seed)));
      a.lopt_weights_small_fc = a.lopt_weights + "/mulo";
    }
    const Gpt2Shape shape = model_shape(a);
    const OptimOptions oo = optimizer_options(a);
    validate_options(a.optimizer, oo);
    TokenLoader train(glob_files(a.train), a.B, a.T, 0, 1, shape.vocab, true, uint64_t(a.seed));
    std::unique_ptr<TokenLoader> val;
    if (!a.val.empty() && a.val_every > 0) val = std::make_unique<TokenLoader>(glob_files(a.val), a.B, a.T, 0, 1, shape.vocab, false, 0);
    std::unique_ptr<Gpt2Tokenizer> tok;
    if (std::FILE* f = std::fopen(a.tokenizer.c_str(), "r")) std::fclose(f), tok = std::make_unique<Gpt2Tokenizer>(a.tokenizer);
    // The checkpoint is opened (and its checksums verified) before any GPU work: a wrong path or a
    // corrupt file fails at once.
    std::unique_ptr<SectionReader> resume;
    if (!a.resume.empty()) resume = std::make_unique<SectionReader>(a.resume);
    if (!cuda_device_available()) user_error("train_gpt2 needs a CUDA GPU and none is visible.");

    ParamTable table = gpt2_param_table(shape);
    Arena arena(table, a.precision == "bf16");
    const std::vector<float> init = gpt2_init(table, shape, uint64_t(a.seed));
    for (const auto& t : table.tensors()) arena.set_param(t.index, &init[size_t(t.offset)]);
    std::unique_ptr<Gpt2Net> model = make_gpt2(a.precision, shape, arena, a.B, a.T);
    const uint64_t dropout_seed = uint64_t(a.seed) + 2;
    auto opt = make_optimizer(a.optimizer, oo, arena);
    GradClipper clipper(arena, float(a.clip));
    std::mt19937_64 rng(uint64_t(a.seed) + 1);  // samples only; saved in checkpoints
    int64_t step0 = 0;
    if (resume) {
      const SectionReader& r = *resume;
      int32_t sh[6];
      r.read("model.shape", sh, sizeof sh);
      if (sh[0] != shape.layers || sh[1] != shape.channels || sh[2] != shape.heads || sh[3] != shape.vocab || sh[5] != shape.separate_qkv)
        user_error("'", a.resume, "' holds a different model; resume with the same -e and --qkv.");
      std::vector<float> p = r.get_vector<float>("model.params");
      if (int64_t(p.size()) != table.total_elems()) user_error("'", a.resume, "' has parameters of another size.");
      for (const auto& t : table.tensors()) arena.set_param(t.index, &p[size_t(t.offset)]);
      // the kernel variants of the run that wrote the checkpoint (absent in older checkpoints: keep ours)
      const std::string kernels = r.has("model.kernels") ? r.get_string("model.kernels") : "";
      if (!kernels.empty() && !model->kernel_choices().empty()) model->set_kernel_choices(kernels);
      opt->load_state(r);
      step0 = r.get_i64("train.step");
      if (r.has("train.dropout_counter")) model->set_dropout_counter(uint64_t(r.get_i64("train.dropout_counter")));
      int64_t lp[3];
      r.read("train.loader", lp, sizeof lp);
      train.seek({lp[0], lp[1], lp[2]});
      std::istringstream rs(r.get_string("train.sample_rng"));
      rs >> rng;
      std::printf("resumed from %s at step %lld\n", a.resume.c_str(), (long long)step0);
    }
    if (!a.ckpt_dir.empty()) mkdir(a.ckpt_dir.c_str(), 0755);
    std::FILE* log = a.log.empty() ? nullptr : std::fopen(a.log.c_str(), "a");
    if (!a.log.empty() && !log) user_error("cannot open the log file '", a.log, "'.");
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("train_gpt2 | %s | %s %s q/k/v %s, %.1fM params | %s | batch %d x %d x %d accum = %lld tokens/step | %lld steps\n",
                prop.name, a.model.c_str(), a.qkv.c_str(), a.precision.c_str(), table.num_params() / 1e6, a.optimizer.c_str(), a.B, a.T, accum,
                (long long)a.total_batch, (long long)a.steps);
    if (!model->kernel_choices().empty()) std::printf("kernels: %s\n", model->kernel_choices().c_str());
    if (a.dropout > 0) std::printf("dropout: %g in training\n", a.dropout);
    if (a.cuda_graph) std::printf("each step replays two CUDA graphs, gradients and optimizer (captured at the second step)\n");
    std::vector<int32_t> x(static_cast<size_t>(micro)), y(static_cast<size_t>(micro));
    DeviceBuffer<float> step_loss(1, "loss"), val_loss(1, "loss");
    float* host = nullptr;
    CUDA_CHECK(cudaMallocHost(&host, 4 * sizeof(float)));
    cudaEvent_t e0, e1, o0, o1;
    for (auto* e : {&e0, &e1, &o0, &o1}) CUDA_CHECK(cudaEventCreate(e));
    const double fpt = flops_per_token(shape, table, a.T);
    double ema_ms = 0;
    std::unique_ptr<Gpt2Net> sampler;
    BatchPrefetcher batches(train, micro);
    auto checkpoint = [&](int64_t step) {
      if (a.ckpt_dir.empty()) return;
      char name[64];
      std::snprintf(name, sizeof name, "/model_%08lld.bin", (long long)step);
      save_checkpoint(a.ckpt_dir + name, shape, *model, arena, *opt, step, batches.position(), rng);
      std::printf("checkpoint %s%s\n", a.ckpt_dir.c_str(), name);
    };
    // A step on stream s, in two parts: the micro-batches with accumulation, then clipping and the
    // optimizer (timed apart). With --cuda-graph each part is captured once and replayed; a capture
    // needs a stream of its own (not the legacy default stream, which the rest of the program uses) and
    // fixed host buffers, `staged`, which each step fills from the prefetcher before the replay.
    const bool graph_mode = a.cuda_graph;
    cudaStream_t st = 0;
    if (graph_mode) CUDA_CHECK(cudaStreamCreate(&st));  // a blocking stream: ordered with the default stream's work
    CudaGraph graph_grads, graph_opt;
    PinnedBatches staged(graph_mode ? accum : 0, micro);
    auto enqueue_grads = [&](cudaStream_t s, bool from_staged) {
      arena.zero_grads(s);
      for (int mi = 0; mi < accum; mi++) {
        if (from_staged) {
          model->set_batch(staged.x(mi), staged.y(mi), s);
        } else {
          const BatchPrefetcher::Batch b = batches.next();
          model->set_batch(b.x, b.y, s);
          batches.release(s);
        }
        model->forward(s);
        model->loss_and_dlogits(1.0f / float(accum), s);
        model->backward(s);
        scale_add(step_loss.get(), model->d_loss(), 1.0f / float(accum), mi > 0, s);
      }
    };
    auto enqueue_optimizer = [&](cudaStream_t s) {
      StepInfo info;
      info.d_loss = step_loss.get();
      clipper.run(s);
      if (a.clip > 0) info.d_grad_scale = clipper.d_scale();
      opt->step(info, s);
    };
    for (int64_t step = step0; step < a.steps; step++) {
      if (val && (step % a.val_every == 0 || step + 1 == a.steps)) {
        val->seek({});
        model->set_dropout(0.0f, 0);  // evaluation: no dropout
        for (int i = 0; i < a.val_batches; i++) {
          val->next(x.data(), y.data());
          model->set_batch(x.data(), y.data(), 0);
          model->forward(0);
          model->loss_and_dlogits(1.0f, 0);
          scale_add(val_loss.get(), model->d_loss(), 1.0f / float(a.val_batches), i > 0, 0);
        }
        CUDA_CHECK(cudaMemcpy(host, val_loss.get(), 4, cudaMemcpyDeviceToHost));
        std::printf("step %lld | val loss %.4f\n", (long long)step, host[0]);
        if (log) std::fprintf(log, "{\"step\":%lld,\"val_loss\":%.6f}\n", (long long)step, host[0]), std::fflush(log);
      }
      if (a.sample_every > 0 && step > step0 && step % a.sample_every == 0) {
        if (!sampler) sampler = make_gpt2(a.precision, shape, arena, 1, std::min(a.T, a.sample_tokens + 1));
        std::printf("--- sample ---\n%s\n--------------\n", sample_text(*sampler, shape, tok.get(), a.sample_tokens, rng).c_str());
      }
      model->set_dropout(float(a.dropout), dropout_seed);
      if (graph_mode && step > step0 && !graph_grads) {  // capture after one eager step, which did the lazy set-ups
        graph_grads = CudaGraph::capture(st, [&] { enqueue_grads(st, true); });
        graph_opt = CudaGraph::capture(st, [&] { enqueue_optimizer(st); });
      }
      CUDA_CHECK(cudaEventRecord(e0, st));
      if (graph_grads) {
        for (int mi = 0; mi < accum; mi++) {  // the previous replay has finished reading the staging buffers
          const BatchPrefetcher::Batch b = batches.next();
          std::memcpy(staged.x(mi), b.x, size_t(micro) * sizeof(int32_t));
          std::memcpy(staged.y(mi), b.y, size_t(micro) * sizeof(int32_t));
          batches.release(st);
        }
        graph_grads.launch(st);
      } else {
        enqueue_grads(st, false);
      }
      CUDA_CHECK(cudaEventRecord(o0, st));
      if (graph_opt) graph_opt.launch(st);
      else enqueue_optimizer(st);
      CUDA_CHECK(cudaEventRecord(o1, st));
      CUDA_CHECK(cudaMemcpyAsync(host, step_loss.get(), 4, cudaMemcpyDeviceToHost, st));
      CUDA_CHECK(cudaMemcpyAsync(host + 1, clipper.d_norm(), 4, cudaMemcpyDeviceToHost, st));
      CUDA_CHECK(cudaEventRecord(e1, st));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0, opt_ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      CUDA_CHECK(cudaEventElapsedTime(&opt_ms, o0, o1));
      if (!std::isfinite(host[0])) user_error("the loss became ", host[0], " at step ", step, "; lower the learning rate (-l).");
      ema_ms = step == step0 ? ms : 0.9 * ema_ms + 0.1 * ms;
      const double tps = double(a.total_batch) / (ms * 1e-3), mfu = fpt * tps / 989e12;
      const double lr = oo.schedule.factor(step);
      std::printf("step %5lld/%lld | loss %.4f | lr x%.3f | norm %.3f | %.1f ms (optimizer %.2f) | %.0f tok/s | MFU %.1f%% | ETA %.1f min\n",
                  (long long)step + 1, (long long)a.steps, host[0], lr, host[1], ms, opt_ms, tps, 100 * mfu,
                  ema_ms * double(a.steps - step - 1) / 60000.0);
      if (log)
        std::fprintf(log, "{\"step\":%lld,\"loss\":%.6f,\"lr_scale\":%.6f,\"grad_norm\":%.5f,\"ms\":%.3f,\"opt_ms\":%.3f,\"tok_per_s\":%.1f,\"mfu\":%.4f}\n",
                     (long long)step + 1, host[0], lr, host[1], ms, opt_ms, tps, mfu),
            std::fflush(log);
      if (a.ckpt_every > 0 && (step + 1) % a.ckpt_every == 0) checkpoint(step + 1);
      if (g_stop) {
        std::printf("signal received: stopping after step %lld\n", (long long)step + 1);
        checkpoint(step + 1);
        return 0;
      }
    }
    checkpoint(a.steps);
    if (log) std::fclose(log);
    if (st) CUDA_CHECK(cudaStreamDestroy(st));
  } catch (const UserError& e) {
    std::fprintf(stderr, "train_gpt2: %s\n", e.what());
    return 1;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "train_gpt2: CUDA error: %s\n", e.what());
    return 2;
  }
  return 0;
}
