// train_gpt2: GPT-2 pretraining on llm.c token shards with any of the five optimizers.
//
//   make train_gpt2 && ./train_gpt2 -o adamw          (defaults: d12 on data/kjv, see --help)
//
// The loop, top to bottom: validation every -v steps, a sample every -s steps, checkpoints every -n
// steps (and on SIGINT/SIGTERM), then per step: micro-batches with gradient accumulation, global
// grad-norm clipping, one optimizer step over the whole arena, one log line.
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "common/temp_dir.h"
#include "data/gpt2_tokenizer.h"
#include "data/prefetcher.h"
#include "data/token_shards.h"
#include "kernels/reduce.h"
#include "models/gpt2_net.h"
#include "models/gpt2_ref.h"
#include "optim/grad_clip.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"
#include "train/flags.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Args {
  std::string train = "data/kjv/kjv_train_*.bin", val = "data/kjv/kjv_val_*.bin", model = "d12", qkv = "separate";
  std::string optimizer = "adamw", schedule = "cosine", log, ckpt_dir, resume, tokenizer = "tokenizer/r50k_base.tiktoken";
  std::string precision = "bf16";
  std::string lopt_weights;
  int B = 8, T = 1024, val_every = 100, val_batches = 10, sample_every = 200, sample_tokens = 64, ckpt_every = 0;
  int64_t steps = 1000, total_batch = 0, warmup = -1, seed = 1337;
  double lr = 6e-4, wd = 0.1, final_frac = 0.0, clip = 1.0, dropout = 0.0;
  bool lr_given = false, lopt_random = false, cuda_graph = false;
  std::vector<std::string> sets;
};

const unsigned kTrainModels = kGpt2Sizes | kGpt2Tiny;  // tiny: quick experiments and tests

Gpt2Shape model_shape(const Args& a) {
  Gpt2Shape s = model_by_name(a.model, kTrainModels).gpt2;
  if (a.qkv != "separate" && a.qkv != "fused") user_error("--qkv must be separate or fused (got '", a.qkv, "').");
  s.separate_qkv = a.qkv == "separate";
  return s;
}

// The optimizers' settings before the schedule and --set: train_gpt2's defaults and the flags.
OptimOptions base_options(const Args& a) {
  OptimOptions o;
  o.adamw.beta2 = 0.95;  // GPT-2 pretraining practice (llm.c); --set adamw.beta2=... overrides
  o.adamw.lr = a.lr, o.adamw.weight_decay = a.wd;
  o.adafactor.weight_decay = 0.0;
  if (a.lr_given) o.adafactor.lr = a.lr;
  o.muon.lr = 0.02, o.muon.aux.lr = a.lr, o.muon.aux.beta2 = 0.95;  // Muon: Keller's lr for matrices, -l for the rest
  if (a.lr_given) o.small_fc.lr = a.lr, o.velo.lr = a.lr;           // learned optimizers: 1 = as meta-trained
  o.velo.num_steps = a.steps;
  if (!a.lopt_weights.empty()) o.small_fc.weights = o.velo.weights = a.lopt_weights;
  return o;
}

OptimOptions optimizer_options(const Args& a) {
  OptimOptions o = base_options(a);
  o.schedule = a.schedule == "constant" ? make_schedule("constant", 0, a.steps, 0, 0.2)
                                        : make_schedule(a.schedule, std::max<int64_t>(a.warmup, a.schedule == "warmup"), a.steps,
                                                        a.final_frac, 0.2);
  for (const auto& s : a.sets) set_option(o, s);
  return o;
}

bool is_learned(const std::string& optimizer) { return optimizer == "velo" || optimizer == "small_fc_lopt"; }

// Every flag's range, before any file or GPU work: one sentence per mistake. A flag that the other
// flags make pointless (-u with -k constant) is refused too, rather than ignored.
void check_flags(const Args& a) {
  if (a.B < 1 || a.T < 2 || a.steps < 1) user_error("-b must be >= 1, -t >= 2 and -x >= 1.");
  if (a.total_batch < 0)
    user_error("-d must be 0 (one micro-batch of -b * -t tokens) or a positive multiple of -b * -t (got ", a.total_batch, ").");
  if (!(a.clip >= 0)) user_error("--clip (grad-norm clip) must be >= 0, where 0 turns clipping off (got ", a.clip, ").");
  if (!(a.wd >= 0)) user_error("-c (weight decay) must be >= 0 (got ", a.wd, ").");
  if (a.val_every < 0) user_error("-v (validate every N steps) must be >= 0, where 0 means never (got ", a.val_every, ").");
  if (a.val_batches < 1) user_error("-m (validation batches) must be >= 1 (got ", a.val_batches, ").");
  if (a.sample_every < 0) user_error("-s (sample every N steps) must be >= 0, where 0 means never (got ", a.sample_every, ").");
  if (a.sample_tokens < 1) user_error("-g (tokens per sample) must be >= 1 (got ", a.sample_tokens, "); the grad-norm clip is --clip.");
  if (a.ckpt_every < 0) user_error("-n (checkpoint every N steps) must be >= 0, where 0 means only at the end (got ", a.ckpt_every, ").");
  if (a.warmup < -1) user_error("-u (warmup steps) must be >= 0, or -1 for the default (got ", a.warmup, ").");
  if (a.schedule != "constant" && a.schedule != "warmup" && a.schedule != "cosine" && a.schedule != "wsd")
    user_error("-k (LR schedule) must be constant, warmup, cosine or wsd (got '", a.schedule, "'); sample every N steps is -s, as in llm.c.");
  if (a.schedule == "warmup" && a.warmup == 0) user_error("-k warmup needs -u >= 1 warmup steps (or -1 for the default).");
  if (a.schedule == "constant" && a.warmup > 0)
    user_error("-u ", a.warmup, " has no effect with -k constant, which has no warmup; use -k warmup, cosine or wsd, or leave out -u.");
  if (!(a.final_frac >= 0 && a.final_frac <= 1)) user_error("-q (final LR fraction) must be in [0, 1] (got ", a.final_frac, ").");
  if ((a.schedule == "constant" || a.schedule == "warmup") && a.final_frac != 0)
    user_error("-q ", a.final_frac, " has no effect with -k ", a.schedule, ", which does not decay; use -k cosine or wsd, or leave out -q.");
  if (a.precision != "bf16" && a.precision != "fp32") user_error("--precision must be bf16 or fp32 (got '", a.precision, "').");
  if (!(a.dropout >= 0 && a.dropout < 1)) user_error("--dropout must be at least 0 and below 1 (got ", a.dropout, ").");
  if (a.cuda_graph && std::getenv("GPT2_PROFILE") && std::string(std::getenv("GPT2_PROFILE")) == "1")
    user_error("GPT2_PROFILE=1 times each kernel on the host and cannot run inside --cuda-graph; use one or the other.");
}

// The optimizer's name, --set options and learned-optimizer weights, before any GPU work.
void check_optimizer(const Args& a, const OptimOptions& o) {
  check_optimizer_name(a.optimizer);
  check_options_apply(a.sets, {a.optimizer});
  validate_options(a.optimizer, o);
  if (!is_learned(a.optimizer)) return;
  const std::string& given = a.optimizer == "velo" ? o.velo.weights : o.small_fc.weights;
  if (a.lopt_random && !given.empty())
    user_error("--lopt-random replaces the weights given by --lopt-weights or --set ", a.optimizer, ".weights; use one or the other.");
  if (!a.lopt_random) check_lopt_weights(a.optimizer, o);  // read now: a missing file is found before the GPU check
}

// Makes the checkpoint folder and writes a file in it, so that a path that is a file, or a folder that
// cannot be written, is refused at start and not at the first checkpoint, possibly hours later.
void prepare_ckpt_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) user_error("--ckpt-dir '", dir, "' is a file, not a folder; choose a folder.");
  fs::create_directories(dir, ec);
  if (ec) user_error("cannot create the checkpoint folder '", dir, "' (", ec.message(), "); choose another --ckpt-dir.");
  std::string probe = dir + "/.train_gpt2_write_test_XXXXXX";
  const int fd = mkstemp(&probe[0]);
  if (fd < 0) user_error("cannot write in the checkpoint folder '", dir, "' (", std::strerror(errno), "); choose another --ckpt-dir.");
  close(fd);
  unlink(probe.c_str());
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

// What a checkpoint holds besides the model and the optimizer state: the steps done, where the data
// continues, the sampling generator and the dropout counter.
struct RunState {
  int64_t step;
  TokenLoader::Position data;
  std::mt19937_64 rng;
  uint64_t dropout_counter;
};

void save_checkpoint(const std::string& path, const Gpt2Shape& s, const Gpt2Net& model, const Arena& arena, const Optimizer& opt,
                     const RunState& run) {
  CUDA_CHECK(cudaDeviceSynchronize());
  SectionWriter w(path);
  const int32_t shape[6] = {s.layers, s.channels, s.heads, s.vocab, s.max_seq, s.separate_qkv};
  w.put("model.shape", shape, sizeof shape);
  const std::vector<float> p = arena.get_params_flat();
  w.put_vector("model.params", p);
  w.put_string("model.kernels", model.kernel_choices());
  opt.save_state(w);
  w.put_i64("train.step", run.step);
  w.put_i64("train.dropout_counter", int64_t(run.dropout_counter));
  const int64_t lp[3] = {run.data.epoch, run.data.shard, run.data.sample};
  w.put("train.loader", lp, sizeof lp);
  std::ostringstream r;
  r << run.rng;
  w.put_string("train.sample_rng", r.str());
  w.commit();
}

// Reads the host side of a checkpoint before the GPU check: the model must be the one of the flags, and
// the data position must exist in this dataset (train is moved there). Returns the steps done.
int64_t resume_host(const SectionReader& r, const std::string& path, const Gpt2Shape& shape, TokenLoader& train, std::mt19937_64& rng) {
  int32_t sh[6];
  r.read("model.shape", sh, sizeof sh);
  if (sh[0] != shape.layers || sh[1] != shape.channels || sh[2] != shape.heads || sh[3] != shape.vocab || sh[5] != shape.separate_qkv)
    user_error("'", path, "' holds a different model; resume with the same -e and --qkv.");
  if (r.size("model.params") != uint64_t(gpt2_param_table(shape).total_elems()) * sizeof(float))
    user_error("'", path, "' has parameters of another size.");
  int64_t lp[3];
  r.read("train.loader", lp, sizeof lp);
  train.seek({lp[0], lp[1], lp[2]});
  std::istringstream rs(r.get_string("train.sample_rng"));
  rs >> rng;
  return r.get_i64("train.step");
}

// The device side: parameters, kernel choices, optimizer state, dropout counter.
void resume_device(const SectionReader& r, const ParamTable& table, Arena& arena, Gpt2Net& model, Optimizer& opt) {
  std::vector<float> p = r.get_vector<float>("model.params");
  for (const auto& t : table.tensors()) arena.set_param(t.index, &p[size_t(t.offset)]);
  // the kernel variants of the run that wrote the checkpoint (absent in older checkpoints: keep ours)
  const std::string kernels = r.has("model.kernels") ? r.get_string("model.kernels") : "";
  if (!kernels.empty() && !model.kernel_choices().empty()) model.set_kernel_choices(kernels);
  opt.load_state(r);
  if (r.has("train.dropout_counter")) model.set_dropout_counter(uint64_t(r.get_i64("train.dropout_counter")));
}

// A bad shard found when the loader reaches it, part way through a run (the loader checks only each
// shard's ends at start): train_gpt2 saves the run's progress before it stops on one.
struct DataError : UserError {
  using UserError::UserError;
};

// Runs a read of the data loaders, turning their errors into DataError.
template <class F>
auto read_data(F fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const UserError& e) {
    throw DataError(e.what());
  }
}

// The message for a data error once the state at the start of the failed step is saved at `path`.
std::string data_error_saved(const std::string& error, int64_t step, const std::string& path) {
  const std::string what = !error.empty() && error.back() == '.' ? error.substr(0, error.size() - 1) : error;
  return str_cat(what, "; the ", step, " steps done are saved in ", path, ": fix the data and resume with --resume ", path, ".");
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// --lopt-random: random meta-weights written to a temporary folder only now, after every check, and
// removed as soon as the optimizer has read them (when this function returns).
std::unique_ptr<Optimizer> make_train_optimizer(const Args& a, const OptimOptions& oo, Arena& arena) {
  OptimOptions o = oo;
  std::unique_ptr<TempDir> random_weights;
  if (a.lopt_random && is_learned(a.optimizer)) random_weights = write_random_lopt_weights({a.optimizer}, o, uint64_t(a.seed));
  return make_optimizer(a.optimizer, o, arena);
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli("train_gpt2", "Pretrains GPT-2 on llm.c token shards (prepare the default corpus with scripts/prepare_kjv.sh).");
  // The vocabulary shared with our other programs: train/flags.h.
  cli.add('i', "train", &a.train, "training shards (glob)");
  cli.add('j', "val", &a.val, "validation shards (glob); empty = no validation");
  flags::add_model(cli, &a.model, kTrainModels, false);
  cli.add(0, "qkv", &a.qkv, "separate (q, k, v matrices, the PyLO paper's setting) or fused");
  cli.add(0, "precision", &a.precision, "bf16 (mixed precision, fast) or fp32 (exact, slow)");
  cli.add(0, "dropout", &a.dropout, "dropout probability in training (embeddings, attention, residual branches; 0 = off)");
  flags::add_optimizer(cli, &a.optimizer, "adamw | adafactor | muon | velo | small_fc_lopt");
  cli.add('l', "lr", &a.lr, "learning rate (AdamW; Muon's AdamW part; for learned optimizers only if given)");
  cli.add('c', "wd", &a.wd, "AdamW weight decay (matrices and embeddings only)");
  cli.add('k', "schedule", &a.schedule, "LR schedule: constant | warmup | cosine | wsd");
  cli.add('u', "warmup", &a.warmup, "LR warmup steps (-1 = min(100, steps / 10); not with -k constant)");
  cli.add('q', "final-lr-frac", &a.final_frac, "LR at the end of cosine / wsd, as a fraction");
  flags::add_steps(cli, &a.steps, "optimizer steps");
  cli.add('b', "batch", &a.B, "micro-batch size");
  flags::add_seq(cli, &a.T, "sequence length (at most the model's context, 1024)");
  cli.add('d', "total-batch", &a.total_batch, "tokens per step (0 = b*t; else a multiple of b*t: gradient accumulation)");
  flags::add_clip(cli, &a.clip);
  cli.add('v', "val-every", &a.val_every, "validate every N steps (0 = never)");
  cli.add('m', "val-batches", &a.val_batches, "validation batches");
  cli.add('s', "sample-every", &a.sample_every, "print a sample every N steps (0 = never)");
  cli.add('g', "sample-tokens", &a.sample_tokens, "tokens per sample (llm.c's genT)");
  cli.add('n', "ckpt-every", &a.ckpt_every, "checkpoint every N steps (0 = only at the end and on a signal)");
  cli.add(0, "ckpt-dir", &a.ckpt_dir, "checkpoint folder (empty = no checkpoints)");
  cli.add(0, "resume", &a.resume, "checkpoint file to resume from (llm.c's -y 1 resumes from its output folder)");
  cli.add(0, "log", &a.log, "JSON-lines log file (one line per step)");
  flags::add_tokenizer(cli, &a.tokenizer, "r50k_base.tiktoken for decoding samples");
  cli.add(0, "lopt-weights", &a.lopt_weights, "learned-optimizer weights folder or file (velo, small_fc_lopt; no effect on the others)");
  cli.add(0, "lopt-random", &a.lopt_random,
          "random meta-weights of the published shapes for velo / small_fc_lopt (throughput tests only: they do not train well)");
  cli.add(0, "cuda-graph", &a.cuda_graph, "replay each step (micro-batches; clipping and optimizer) as captured CUDA graphs");
  cli.add(0, "seed", &a.seed, "initialisation and sampling seed");
  flags::add_set(cli, &a.sets);
  flags::add_flag_notes(cli, "train_gpt2");
  cli.set_epilogue(options_help(base_options(a)));  // the values train_gpt2 starts from, before -l, -c and --set
  try {
    for (int i = 1; i < argc; i++) a.lr_given |= std::string(argv[i]) == "-l" || std::string(argv[i]).rfind("--lr", 0) == 0;
    if (!cli.parse(argc, argv)) return 0;
    // Every input is checked before the GPU check: a mistake costs no GPU time and shows on any machine.
    check_flags(a);
    if (a.warmup < 0) a.warmup = std::min<int64_t>(100, a.steps / 10);
    const int64_t micro = int64_t(a.B) * a.T;
    if (a.total_batch == 0) a.total_batch = micro;
    if (a.total_batch % micro) user_error("-d (", a.total_batch, ") must be a multiple of -b * -t (", micro, ").");
    if (a.total_batch / micro > INT32_MAX) user_error("-d (", a.total_batch, ") asks for more than ", INT32_MAX, " micro-batches per step.");
    const int accum = int(a.total_batch / micro);
    const Gpt2Shape shape = model_shape(a);
    if (a.T > shape.max_seq) user_error("-t (", a.T, ") must be at most the model's context length (", shape.max_seq, ").");
    const OptimOptions oo = optimizer_options(a);
    check_optimizer(a, oo);
    TokenLoader train(glob_files(a.train), a.B, a.T, 0, 1, shape.vocab, true, uint64_t(a.seed));
    std::unique_ptr<TokenLoader> val;
    if (!a.val.empty() && a.val_every > 0) val = std::make_unique<TokenLoader>(glob_files(a.val), a.B, a.T, 0, 1, shape.vocab, false, 0);
    std::unique_ptr<Gpt2Tokenizer> tok;
    if (std::FILE* f = std::fopen(a.tokenizer.c_str(), "r")) std::fclose(f), tok = std::make_unique<Gpt2Tokenizer>(a.tokenizer);
    // The checkpoint is opened (and its checksums verified) and its model and data position checked
    // now: a wrong path, a corrupt file or another model's checkpoint fails at once.
    std::mt19937_64 rng(uint64_t(a.seed) + 1);  // samples only; saved in checkpoints
    std::unique_ptr<SectionReader> resume;
    int64_t step0 = 0;
    if (!a.resume.empty()) {
      resume = std::make_unique<SectionReader>(a.resume);
      step0 = resume_host(*resume, a.resume, shape, train, rng);
    }
    if (!a.ckpt_dir.empty()) prepare_ckpt_dir(a.ckpt_dir);
    std::unique_ptr<std::FILE, FileCloser> log(a.log.empty() ? nullptr : std::fopen(a.log.c_str(), "a"));
    if (!a.log.empty() && !log) user_error("cannot open the log file '", a.log, "'.");
    if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");

    ParamTable table = gpt2_param_table(shape);
    Arena arena(table, a.precision == "bf16");
    const std::vector<float> init = gpt2_init(table, shape, uint64_t(a.seed));
    for (const auto& t : table.tensors()) arena.set_param(t.index, &init[size_t(t.offset)]);
    std::unique_ptr<Gpt2Net> model = make_gpt2(a.precision, shape, arena, a.B, a.T);
    const uint64_t dropout_seed = uint64_t(a.seed) + 2;
    std::unique_ptr<Optimizer> opt = make_train_optimizer(a, oo, arena);
    GradClipper clipper(arena, float(a.clip));
    if (resume) {
      resume_device(*resume, table, arena, *model, *opt);
      std::printf("resumed from %s at step %lld\n", a.resume.c_str(), (long long)step0);
    }
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
    uint64_t dropout_counter = model->dropout_counter();  // re-read after each step only with dropout on: it advances only then
    auto state = [&](int64_t step) { return RunState{step, batches.position(), rng, dropout_counter}; };
    auto checkpoint = [&](const RunState& run) -> std::string {
      if (a.ckpt_dir.empty()) return "";
      char name[64];
      std::snprintf(name, sizeof name, "/model_%08lld.bin", (long long)run.step);
      save_checkpoint(a.ckpt_dir + name, shape, *model, arena, *opt, run);
      std::printf("checkpoint %s%s\n", a.ckpt_dir.c_str(), name);
      return a.ckpt_dir + name;
    };
    auto next_batch = [&] { return read_data([&] { return batches.next(); }); };
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
          const BatchPrefetcher::Batch b = next_batch();
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
    auto run_step = [&](int64_t step) {
      if (val && (step % a.val_every == 0 || step + 1 == a.steps)) {
        read_data([&] { val->seek({}); });
        model->set_dropout(0.0f, 0);  // evaluation: no dropout
        for (int i = 0; i < a.val_batches; i++) {
          read_data([&] { val->next(x.data(), y.data()); });
          model->set_batch(x.data(), y.data(), 0);
          model->forward(0);
          model->loss_and_dlogits(1.0f, 0);
          scale_add(val_loss.get(), model->d_loss(), 1.0f / float(a.val_batches), i > 0, 0);
        }
        CUDA_CHECK(cudaMemcpy(host, val_loss.get(), 4, cudaMemcpyDeviceToHost));
        std::printf("step %lld | val loss %.4f\n", (long long)step, host[0]);
        if (log) std::fprintf(log.get(), "{\"step\":%lld,\"val_loss\":%.6f}\n", (long long)step, host[0]), std::fflush(log.get());
      }
      if (a.sample_every > 0 && step > step0 && step % a.sample_every == 0) {
        if (!sampler) sampler = make_gpt2(a.precision, shape, arena, 1, int(std::min<int64_t>(a.T, int64_t(a.sample_tokens) + 1)));
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
          const BatchPrefetcher::Batch b = next_batch();
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
        std::fprintf(log.get(),
                     "{\"step\":%lld,\"loss\":%.6f,\"lr_scale\":%.6f,\"grad_norm\":%.5f,\"ms\":%.3f,\"opt_ms\":%.3f,\"tok_per_s\":%.1f,\"mfu\":%.4f}\n",
                     (long long)step + 1, host[0], lr, host[1], ms, opt_ms, tps, mfu),
            std::fflush(log.get());
    };
    for (int64_t step = step0; step < a.steps; step++) {
      const RunState start = state(step);
      try {
        run_step(step);
      } catch (const DataError& e) {
        // The failed step's micro-batches changed only gradients, which a checkpoint does not keep, so the
        // state at its start is the run's progress. Nothing to keep when this run has done no step.
        if (a.ckpt_dir.empty() || step == step0) throw;
        user_error(data_error_saved(e.what(), step, checkpoint(start)));
      }
      if (a.dropout > 0) dropout_counter = model->dropout_counter();
      if (a.ckpt_every > 0 && (step + 1) % a.ckpt_every == 0) checkpoint(state(step + 1));
      if (g_stop) {
        std::printf("signal received: stopping after step %lld\n", (long long)step + 1);
        checkpoint(state(step + 1));
        return 0;
      }
    }
    checkpoint(state(a.steps));
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
