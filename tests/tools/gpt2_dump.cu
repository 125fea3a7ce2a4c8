// gpt2_dump: runs our GPT-2 (fp32 or bf16) from gpt2_init's weights on deterministic token batches and
// writes everything a reference implementation needs to check it. tests/torch_gpt2_crosscheck.py drives it.
//
//   DIR/table.json        {"config": {...}, "total": N, "tensors": [{"name", "shape", "offset", "numel", "decay"}]}
//   DIR/params0.bin       float32 [N]: the arena as initialised (padding zero)
//   DIR/batches.bin       int32 [steps + 1][2][B * T]: tokens then targets of each batch
//   DIR/logits0.bin       float32 [B * T * V]: logits of batch 0 before any update
//   DIR/loss0.bin         float32 [1]: mean cross-entropy of batch 0
//   DIR/grads0.bin        float32 [N]: gradients of that loss, arena layout
//   DIR/losses.bin        float32 [steps + 1]: entry s < steps = training loss of step s on batch s, before its
//                         AdamW update; entry steps = loss on batch `steps` after the last update (forward only)
//   DIR/params_final.bin  float32 [N]: the arena after the last update
//
// The steps follow train_gpt2: zero grads, one micro-batch (no accumulation), loss_and_dlogits(1), backward,
// AdamW (beta2 0.95, decoupled weight decay on tensors with decay=true, constant schedule). Gradient
// clipping is off: the check is about the model and the optimizer, not the clip (tested elsewhere).
// Tokens follow a Zipf law over a shuffled vocabulary (targets = the next token), so the loss falls
// visibly within a few steps and the per-step losses carry information about the updates.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/tool_errors.h"
#include "models/gpt2.h"
#include "models/gpt2_ref.h"
#include "optim/optimizer.h"
#include "tests/tools/dump_io.h"

namespace {
// steps + 1 batches of B sequences: T + 1 Zipf-distributed tokens each, inputs = [0, T), targets = [1, T].
std::vector<int32_t> make_batches(int n_batches, int B, int T, int V, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 12345);
  std::vector<int> perm(static_cast<size_t>(V));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<double> w(static_cast<size_t>(V));
  for (int v = 0; v < V; v++) w[size_t(v)] = 1.0 / (v + 1.0);
  std::discrete_distribution<int> zipf(w.begin(), w.end());
  const size_t N = size_t(B) * size_t(T);
  std::vector<int32_t> out(size_t(n_batches) * 2 * N);
  std::vector<int> seq(size_t(T) + 1);
  for (int i = 0; i < n_batches; i++) {
    int32_t* x = &out[size_t(i) * 2 * N];
    int32_t* y = x + N;
    for (int b = 0; b < B; b++) {
      for (auto& t : seq) t = perm[size_t(zipf(rng))];
      for (int t = 0; t < T; t++) {
        x[size_t(b) * T + t] = seq[size_t(t)];
        y[size_t(b) * T + t] = seq[size_t(t) + 1];
      }
    }
  }
  return out;
}

std::string table_json(const ParamTable& t, const Gpt2Shape& s, const std::string& precision, int B, int T, int steps,
                       double lr, double wd, const OptimOptions& o, int64_t seed) {
  std::ostringstream j;
  j.precision(17);
  j << "{\"config\": {\"precision\": \"" << precision << "\", \"layers\": " << s.layers
    << ", \"channels\": " << s.channels << ", \"heads\": " << s.heads << ", \"vocab\": " << s.vocab
    << ", \"max_seq\": " << s.max_seq << ", \"qkv\": \"" << (s.separate_qkv ? "separate" : "fused")
    << "\", \"B\": " << B << ", \"T\": " << T << ", \"steps\": " << steps << ", \"lr\": " << lr
    << ", \"weight_decay\": " << wd << ", \"beta1\": " << o.adamw.beta1 << ", \"beta2\": " << o.adamw.beta2
    << ", \"eps\": " << o.adamw.eps << ", \"schedule\": \"constant\", \"grad_clip\": 0, \"seed\": " << seed
    << ", \"layernorm_eps\": 1e-05, \"gelu\": \"tanh\", \"tied_head\": true},\n \"total\": " << t.total_elems()
    << ",\n \"tensors\": [";
  for (const auto& x : t.tensors()) {
    j << (x.index ? ",\n  " : "\n  ") << "{\"name\": \"" << x.name << "\", \"shape\": [";
    for (size_t d = 0; d < x.shape.size(); d++) j << (d ? ", " : "") << x.shape[d];
    j << "], \"offset\": " << x.offset << ", \"numel\": " << x.numel << ", \"decay\": " << (x.decay ? "true" : "false")
      << "}";
  }
  j << "\n ]}\n";
  return j.str();
}

// The flags and what they set.
struct DumpArgs {
  std::string precision = "fp32", qkv = "separate", out;
  Gpt2Shape s;
  int B = 4, T = 64, steps = 10;
  double lr = 1e-3, wd = 0.1;
  int64_t seed = 1337;
  DumpArgs() {
    s.layers = 2;
    s.channels = 128;
    s.heads = 2;
    s.vocab = 512;
    s.max_seq = 64;
  }
};

void add_flags(Cli& cli, DumpArgs& a) {
  cli.add(0, "precision", &a.precision, "fp32 | bf16 (bf16 needs channels = 64 * heads)");
  cli.add(0, "layers", &a.s.layers, "transformer blocks");
  cli.add(0, "channels", &a.s.channels, "model width C");
  cli.add(0, "heads", &a.s.heads, "attention heads");
  cli.add(0, "vocab", &a.s.vocab, "vocabulary size V");
  cli.add(0, "max-seq", &a.s.max_seq, "context length of the model (rows of wpe)");
  cli.add(0, "qkv", &a.qkv, "separate | fused");
  cli.add('b', "batch", &a.B, "sequences per batch");
  cli.add('t', "seq", &a.T, "sequence length (<= --max-seq)");
  cli.add('x', "steps", &a.steps, "AdamW steps (one batch each)");
  cli.add('l', "lr", &a.lr, "AdamW learning rate");
  cli.add('c', "wd", &a.wd, "AdamW weight decay (tensors with decay=true only)");
  cli.add(0, "seed", &a.seed, "initialisation and data seed");
  cli.add(0, "out", &a.out, "output folder (created if missing)");
}

// Bad flags, then no GPU, each one clear sentence; then the output folder.
void check_flags_and_make_out(DumpArgs& a) {
  const Gpt2Shape& s = a.s;
  if (a.out.empty()) user_error("--out is required: the folder to write the dump into.");
  if (a.qkv != "separate" && a.qkv != "fused") user_error("--qkv must be separate or fused (got '", a.qkv, "').");
  if (a.precision != "fp32" && a.precision != "bf16")
    user_error("--precision must be fp32 or bf16 (got '", a.precision, "').");
  if (s.layers < 1 || s.channels < 1 || s.heads < 1 || s.channels % s.heads || s.vocab < 2 || s.max_seq < 1)
    user_error("need layers, heads >= 1, channels a multiple of heads, vocab >= 2 and max-seq >= 1.");
  if (a.B < 1 || a.T < 1 || a.T > s.max_seq || a.steps < 0)
    user_error("need -b >= 1, 1 <= -t <= --max-seq and -x >= 0.");
  if (!(a.lr >= 0) || !(a.wd >= 0)) user_error("need -l (lr) >= 0 and -c (wd) >= 0.");  // before the GPU check
  if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");
  a.s.separate_qkv = a.qkv == "separate";
  mkdir(a.out.c_str(), 0755);
}

OptimOptions adamw_options(const DumpArgs& a) {
  OptimOptions oo;
  oo.adamw.lr = a.lr;
  oo.adamw.beta2 = 0.95;
  oo.adamw.weight_decay = a.wd;
  oo.schedule = make_schedule("constant", 0, std::max(a.steps, 1), 0, 0.2);
  validate_options("adamw", oo);
  return oo;
}

// Batch 0 before any update: logits (read before loss_and_dlogits turns them into their gradient), loss,
// gradients. Returns the loss.
float dump_batch0(Gpt2& model, Arena& arena, const int32_t* batch0, size_t N, const DumpArgs& a, size_t total) {
  arena.zero_grads(0);
  model.set_batch(batch0, batch0 + N, 0);
  model.forward(0);
  std::vector<float> logits(N * size_t(a.s.vocab));
  model.logits_to_host(0, int(N), logits.data());
  model.loss_and_dlogits(1.0f, 0);
  model.backward(0);
  const float loss0 = read_loss(model);
  std::vector<float> grads(total);
  CUDA_CHECK(cudaMemcpy(grads.data(), arena.grads(), total * sizeof(float), cudaMemcpyDeviceToHost));
  write_bin(a.out + "/logits0.bin", logits.data(), logits.size());
  write_bin(a.out + "/loss0.bin", &loss0, 1);
  write_bin(a.out + "/grads0.bin", grads.data(), total);
  return loss0;
}

// Training: step s uses batch s; its loss is the one before its update. The last entry: batch `steps` after the
// last update, forward only.
std::vector<float> train_losses(Gpt2& model, Arena& arena, Optimizer& opt, const std::vector<int32_t>& batches,
                                size_t N, int steps) {
  auto batch = [&](int i) { return &batches[size_t(i) * 2 * N]; };
  std::vector<float> losses;
  for (int step = 0; step < steps; step++) {
    arena.zero_grads(0);
    model.set_batch(batch(step), batch(step) + N, 0);
    model.forward(0);
    model.loss_and_dlogits(1.0f, 0);
    model.backward(0);
    StepInfo info;
    info.d_loss = model.d_loss();
    opt.step(info, 0);
    losses.push_back(read_loss(model));
  }
  model.set_batch(batch(steps), batch(steps) + N, 0);
  model.forward(0);
  model.loss_and_dlogits(1.0f, 0);
  losses.push_back(read_loss(model));
  return losses;
}

// The whole dump: the inputs, batch 0's outputs, the training losses and the final weights.
void dump(const DumpArgs& a) {
  const Gpt2Shape& s = a.s;
  const ParamTable table = gpt2_param_table(s);
  Arena arena(table, a.precision == "bf16");
  const std::vector<float> init = gpt2_init(table, s, uint64_t(a.seed));
  for (const auto& t : table.tensors()) arena.set_param(t.index, &init[size_t(t.offset)]);
  std::unique_ptr<Gpt2> model = make_gpt2(a.precision, s, arena, a.B, a.T);
  const OptimOptions oo = adamw_options(a);
  auto opt = make_optimizer("adamw", oo, arena);

  const size_t N = size_t(a.B) * size_t(a.T), total = size_t(table.total_elems());
  const std::vector<int32_t> batches = make_batches(a.steps + 1, a.B, a.T, s.vocab, uint64_t(a.seed));
  {
    std::ofstream f(a.out + "/table.json");
    f << table_json(table, s, a.precision, a.B, a.T, a.steps, a.lr, a.wd, oo, a.seed);
    if (!f) user_error("writing '", a.out, "/table.json' failed.");
  }
  write_bin(a.out + "/params0.bin", arena.get_params_flat().data(), total);
  write_bin(a.out + "/batches.bin", batches.data(), batches.size());
  const float loss0 = dump_batch0(*model, arena, batches.data(), N, a, total);
  const std::vector<float> losses = train_losses(*model, arena, *opt, batches, N, a.steps);
  write_bin(a.out + "/losses.bin", losses.data(), losses.size());
  write_bin(a.out + "/params_final.bin", arena.get_params_flat().data(), total);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("gpt2_dump: %s %s L=%d C=%d NH=%d V=%d maxT=%d B=%d T=%d: loss0 %.6f, loss after %d steps %.6f -> %s\n",
              a.precision.c_str(), a.qkv.c_str(), s.layers, s.channels, s.heads, s.vocab, s.max_seq, a.B, a.T, loss0,
              a.steps, losses.back(), a.out.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  DumpArgs a;
  Cli cli("gpt2_dump",
          "Dumps our GPT-2's logits, loss, gradients and AdamW losses for tests/torch_gpt2_crosscheck.py.");
  add_flags(cli, a);
  try {
    if (!cli.parse(argc, argv)) return 0;
    check_flags_and_make_out(a);
    dump(a);
  } catch (const CudaError& e) {
    std::fprintf(stderr, "gpt2_dump: CUDA error: %s\n", e.what());
    return 2;
  } catch (...) {
    return report_tool_error("gpt2_dump");
  }
  return 0;
}
