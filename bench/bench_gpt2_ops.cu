// bench_gpt2_ops: GPU time of each operation of a GPT-2 bf16 training step on its real shapes, one JSON
// line per operation, and a closing line per model with the step's sum (count x ms) by kind.
//
//   ./bench_gpt2_ops -e gpt2-124m:64,gpt2-355m:32 --tune 8
//
// Matmuls are timed twice: with the cuBLASLt heuristic's first algorithm (what train_gpt2 uses) and,
// with --tune K, with the fastest of the heuristic's first K (LtMatmul's tuning mode), to show what
// algorithm choice could still give. Inputs are random normal (never zeros); times are medians of
// --reps calls after warm-up, with CUDA events.
//
// --cudnn 1 adds cuDNN's fused attention (kernels/cudnn_attention) beside ours wherever attention is timed:
// forward, deterministic backward and atomic backward, with count 0 (alternatives, outside the step's sums),
// and a line per cuDNN plan. --attention-only 1 times only attention (each model's, and ViT-B/16's with
// --vit-attention 1). Attention FLOPs: 4 B H T^2 64 forward, halved when causal; backward 2.5x.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/device_random.h"
#include "common/event_timer.h"
#include "kernels/column_sums.h"
#include "kernels/crossentropy.h"
#include "kernels/cudnn_attention.h"
#include "kernels/flash_attention.h"
#include "kernels/layernorm.h"
#include "kernels/matmul_lt.h"
#include "models/model_tables.h"
#include "train/flags.h"

namespace {
double median_ms(const std::function<void()>& fn, int reps) { return median_event_ms(fn, 0, reps, 3); }

struct ModelSize {
  std::string name;
  int layers, C, heads, B;
};

// "MODEL" or "MODEL:B": a GPT-2 size by any of its names (train/flags.h), B by default as below.
ModelSize parse_model(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  // The batch is read as every number of our flags is (common/cli.h): "d12:x" or "d12:0" is refused, not
  // taken as the default.
  const int B = colon == std::string::npos
                    ? 0
                    : int(parse_integer("the batch of -e '" + spec + "'", spec.substr(colon + 1), 1, 1 << 16));
  const Gpt2Shape s = model_by_name(name, kGpt2Sizes).gpt2;
  const int default_B = s.layers == 12 ? 64 : s.layers == 24 ? 32 : s.layers == 36 ? 16 : 8;
  return {name, s.layers, s.channels, s.heads, B > 0 ? B : default_B};
}

// The operands of every timed operation, sized for the largest use (x, aux: (N, 4C); y: (N, max(Vp, 4C));
// W, dW: (Vp, C)), random normal: never zeros, which would let the hardware skip work.
struct BenchBuffers {
  BenchBuffers(const ModelSize& m, int T) : N(m.B * T), C(m.C), Vp(gpt2_padded_vocab(50257)) {
    const char* what = "benchmark buffers";
    x.alloc(size_t(N) * 4 * C, what), aux.alloc(size_t(N) * 4 * C, what), res.alloc(size_t(N) * C, what);
    y.alloc(size_t(N) * std::max(Vp, 4 * C), what), W.alloc(size_t(Vp) * C, what), bias.alloc(size_t(4 * C), what);
    dW.alloc(size_t(Vp) * C, what), stats.alloc(size_t(2) * N * m.heads, what);
    scratch.alloc(std::max(column_sums_scratch_floats(C), size_t(N) * m.heads), what);
    lnw_g.alloc(size_t(C), what), lnb_g.alloc(size_t(C), what), dsum.alloc(size_t(4 * C), what);
    fill_normal(x.get(), int64_t(x.size()), 1, 1.0f);
    fill_normal(aux.get(), int64_t(aux.size()), 2, 1.0f);
    fill_normal(res.get(), int64_t(res.size()), 3, 1.0f);
    fill_normal(y.get(), int64_t(y.size()), 4, 0.02f);
    fill_normal(W.get(), int64_t(W.size()), 5, 0.02f);
    fill_normal(bias.get(), int64_t(bias.size()), 6, 0.02f);
    fill_normal(dW.get(), int64_t(dW.size()), 7, 1.0f);
    fill_normal(stats.get(), int64_t(stats.size()), 8, 1.0f);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  const int N, C, Vp;
  DeviceBuffer<bf16> x, aux, res, y, W, bias;
  DeviceBuffer<float> dW, stats, scratch, lnw_g, lnb_g, dsum;
};

// One JSON line per operation; the step's sum (count x ms) by kind for the model's closing line.
class Reporter {
 public:
  Reporter(const ModelSize& m, int T) : m_(m), T_(T) {}
  void report(const std::string& kind, const std::string& op, int count, double flop, double ms, double ms_tuned) {
    std::printf("{\"model\":\"%s\",\"B\":%d,\"T\":%d,\"kind\":\"%s\",\"op\":\"%s\",\"count\":%d,\"ms\":%.4f",
                m_.name.c_str(), m_.B, T_, kind.c_str(), op.c_str(), count, ms);
    if (flop > 0) std::printf(",\"tflops\":%.1f", flop / ms * 1e-9);
    if (ms_tuned > 0) std::printf(",\"ms_tuned\":%.4f,\"tflops_tuned\":%.1f", ms_tuned, flop / ms_tuned * 1e-9);
    std::printf("}\n");
    std::fflush(stdout);
    sum_[kind] += count * ms;
    if (ms_tuned > 0) sum_[kind + "_tuned"] += count * ms_tuned;
  }
  void print_sums() const {
    std::printf("{\"model\":\"%s\",\"B\":%d,\"T\":%d,\"step_ms_by_kind\":{", m_.name.c_str(), m_.B, T_);
    const char* sep = "";
    for (const auto& kv : sum_) std::printf("%s\"%s\":%.2f", sep, kv.first.c_str(), kv.second), sep = ",";
    std::printf("}}\n");
    std::fflush(stdout);
  }

 private:
  const ModelSize& m_;
  const int T_;
  std::map<std::string, double> sum_;  // by kind: count x ms
};

// The step's matmuls (count: how many a step runs; flop: 2 * rows * in * out), each timed with the
// heuristic's first algorithm (heur) and, with --tune, the tuned choice; then the tuned plans.
void bench_matmuls(const ModelSize& m, int tune, int reps, BenchBuffers& b, LtMatmul& heur, LtMatmul& tuned,
                   Reporter& r) {
  const int C = b.C, N = b.N, Vp = b.Vp, L = m.layers;
  // One matmul, timed with both LtMatmul instances (the tuned one tunes on its first call).
  auto mm = [&](const std::string& op, int count, double flop, const std::function<void(LtMatmul&)>& call) {
    const double ms = median_ms([&] { call(heur); }, reps);
    const double mt = tune > 1 ? median_ms([&] { call(tuned); }, reps) : 0.0;
    r.report("matmul", op, count, flop, ms, mt);
  };
  const double n = N;
  mm("fwd qkv", L, 2 * n * C * 3 * C,
     [&](LtMatmul& l) { l.forward(b.y.get(), 3 * C, b.x.get(), C, b.W.get(), b.bias.get(), N, C, 3 * C, 0); });
  mm("fwd proj+res", L, 2 * n * C * C,
     [&](LtMatmul& l) { l.forward(b.y.get(), C, b.x.get(), C, b.W.get(), b.bias.get(), N, C, C, 0, b.res.get()); });
  mm("fwd fc+gelu", L, 2 * n * C * 4 * C, [&](LtMatmul& l) {
    l.forward(b.y.get(), 4 * C, b.x.get(), C, b.W.get(), b.bias.get(), N, C, 4 * C, 0, nullptr, b.aux.get());
  });
  mm("fwd fcproj+res", L, 2 * n * 4 * C * C, [&](LtMatmul& l) {
    l.forward(b.y.get(), C, b.x.get(), 4 * C, b.W.get(), b.bias.get(), N, 4 * C, C, 0, b.res.get());
  });
  mm("fwd head", 1, 2 * n * C * Vp,
     [&](LtMatmul& l) { l.forward(b.y.get(), Vp, b.x.get(), C, b.W.get(), nullptr, N, C, Vp, 0); });
  mm("bwd dx head", 1, 2 * n * C * Vp,
     [&](LtMatmul& l) { l.backward_dx(b.x.get(), C, false, b.y.get(), Vp, b.W.get(), N, C, Vp, 0); });
  mm("bwd dw head", 1, 2 * n * C * Vp,
     [&](LtMatmul& l) { l.backward_dw(b.dW.get(), b.y.get(), Vp, b.x.get(), C, N, C, Vp, 0); });
  mm("bwd dw fcproj", L, 2 * n * 4 * C * C,
     [&](LtMatmul& l) { l.backward_dw(b.dW.get(), b.y.get(), C, b.x.get(), 4 * C, N, 4 * C, C, 0); });
  mm("bwd dx fcproj+dgelu", L, 2 * n * 4 * C * C, [&](LtMatmul& l) {
    l.backward_dx(b.x.get(), 4 * C, false, b.y.get(), C, b.W.get(), N, 4 * C, C, 0, b.aux.get());
  });
  mm("bwd dx fcproj plain (alternative to +dgelu)", 0, 2 * n * 4 * C * C,
     [&](LtMatmul& l) { l.backward_dx(b.x.get(), 4 * C, false, b.y.get(), C, b.W.get(), N, 4 * C, C, 0); });
  mm("bwd dw fc", L, 2 * n * 4 * C * C,
     [&](LtMatmul& l) { l.backward_dw(b.dW.get(), b.y.get(), 4 * C, b.x.get(), C, N, C, 4 * C, 0); });
  mm("bwd dx fc", L, 2 * n * 4 * C * C,
     [&](LtMatmul& l) { l.backward_dx(b.x.get(), C, false, b.y.get(), 4 * C, b.W.get(), N, C, 4 * C, 0); });
  mm("bwd dw proj", L, 2 * n * C * C,
     [&](LtMatmul& l) { l.backward_dw(b.dW.get(), b.y.get(), C, b.x.get(), C, N, C, C, 0); });
  mm("bwd dx proj", L, 2 * n * C * C,
     [&](LtMatmul& l) { l.backward_dx(b.x.get(), C, false, b.y.get(), C, b.W.get(), N, C, C, 0); });
  mm("bwd dw qkv", L, 2 * n * C * 3 * C,
     [&](LtMatmul& l) { l.backward_dw(b.dW.get(), b.y.get(), 3 * C, b.x.get(), C, N, C, 3 * C, 0); });
  mm("bwd dx qkv", L, 2 * n * C * 3 * C,
     [&](LtMatmul& l) { l.backward_dx(b.x.get(), C, false, b.y.get(), 3 * C, b.W.get(), N, C, 3 * C, 0); });
  for (const auto& t : tuned.tune_log())
    std::printf(
        "{\"model\":\"%s\",\"tuned_plan\":\"%dx%dx%d\",\"chosen\":%d,\"candidates\":%d,\"ms_first\":%.4f,\"ms_best\":%."
        "4f}\n",
        m.name.c_str(), t.m, t.n, t.k, t.chosen, t.candidates, t.ms_first, t.ms_best);
}

// The operands of attention at one shape: qkv (B*T, 3C), out and dout (B*T, C), dqkv (B*T, 3C), lse and
// scratch (B*heads*T).
struct AttentionBuffers {
  const bf16* qkv;
  bf16* out;
  const bf16* dout;
  bf16* dqkv;
  float *lse, *scratch;
};

// Attention forward and backward (as the step runs them, and the mma.sync kernels alone) at (B, heads, T), then
// with `cudnn` cuDNN's (count 0: alternatives) and its plans. FLOPs: 4 B H T^2 64 forward (two matmuls of
// 2 T^2 64 per head), half of it under the causal mask; backward 2.5x (five matmuls).
void bench_attention(const std::string& model, int B, int NH, int T, bool causal, int count, int reps, bool cudnn,
                     const AttentionBuffers& x, Reporter& r) {
  const double fwd_flop = 4.0 * B * NH * double(T) * T * 64 / (causal ? 2 : 1);
  auto fwd = [&] { flash_attention_forward(x.out, x.lse, x.qkv, B, T, NH, causal, 0); };
  auto mma = [&] { flash_attention_forward_mma(x.out, x.lse, x.qkv, B, T, NH, causal, 0); };
  auto bwd = [&] { flash_attention_backward(x.dqkv, x.dout, x.out, x.lse, x.qkv, x.scratch, B, T, NH, causal, 0); };
  r.report("attention", "fwd", count, fwd_flop, median_ms(fwd, reps), 0);
  r.report("attention", "fwd mma.sync (alternative: other GPUs)", 0, fwd_flop, median_ms(mma, reps), 0);
  r.report("attention", "bwd", count, 2.5 * fwd_flop, median_ms(bwd, reps), 0);
  auto bwd_mma = [&] {
    flash_attention_backward_mma(x.dqkv, x.dout, x.out, x.lse, x.qkv, x.scratch, B, T, NH, causal, 0);
  };
  r.report("attention", "bwd mma.sync (alternative: other GPUs)", 0, 2.5 * fwd_flop, median_ms(bwd_mma, reps), 0);
  if (!cudnn) return;
  for (const bool deterministic : {true, false}) {
    CudnnAttention a(deterministic);
    auto cfwd = [&] { a.forward(x.out, x.lse, x.qkv, B, T, NH, causal, 0); };
    auto cbwd = [&] { a.backward(x.dqkv, x.dout, x.out, x.lse, x.qkv, x.scratch, B, T, NH, causal, 0); };
    cfwd();  // the plans are built outside the timing
    cbwd();
    if (deterministic) r.report("attention", "cudnn fwd (alternative)", 0, fwd_flop, median_ms(cfwd, reps), 0);
    r.report("attention", deterministic ? "cudnn bwd deterministic (alternative)" : "cudnn bwd atomic (alternative)", 0,
             2.5 * fwd_flop, median_ms(cbwd, reps), 0);
    std::stringstream plans(a.plans());  // one line per plan, free of quotes
    for (std::string line; std::getline(plans, line);)
      std::printf("{\"model\":\"%s\",\"cudnn\":%d,\"plan\":\"%s\"}\n", model.c_str(), CudnnAttention::version(),
                  line.c_str());
  }
}

// Attention, LayerNorm and the bias-gradient kernels (their counts per step as for the matmuls).
void bench_kernels(const ModelSize& m, int T, int reps, bool cudnn, BenchBuffers& b, Reporter& r) {
  const int C = b.C, N = b.N, L = m.layers;
  bench_attention(m.name, m.B, m.heads, T, true, L, reps, cudnn,
                  {b.x.get(), b.aux.get(), b.res.get(), b.y.get(), b.stats.get(), b.scratch.get()}, r);
  float* mean = b.stats.get();
  float* rstd = b.stats.get() + N;
  r.report(
      "layernorm", "fwd", 2 * L + 1, 0,
      median_ms(
          [&] { layernorm_forward(b.aux.get(), mean, rstd, b.x.get(), b.W.get(), b.bias.get(), N, C, kGpt2LnEps, 0); },
          reps),
      0);
  r.report("layernorm", "bwd", 2 * L + 1, 0,
           median_ms(
               [&] {
                 layernorm_backward(b.res.get(), b.lnw_g.get(), b.lnb_g.get(), b.y.get(), b.x.get(), b.W.get(), mean,
                                    rstd, N, C, b.scratch.get(), 0, b.dsum.get());
               },
               reps),
           0);
  r.report("bias", "bwd fc", L, 0,
           median_ms([&] { bias_backward(b.dsum.get(), b.y.get(), 4 * C, N, 4 * C, b.scratch.get(), 0); }, reps), 0);
  r.report(
      "bias", "bwd gelu+fc (alternative: after a plain dx)", 0, 0,
      median_ms([&] { gelu_bias_backward(b.dsum.get(), b.y.get(), b.aux.get(), 4 * C, N, 4 * C, b.scratch.get(), 0); },
                reps),
      0);
  r.report("bias", "bwd qkv", L, 0,
           median_ms([&] { bias_backward(b.dsum.get(), b.y.get(), 3 * C, N, 3 * C, b.scratch.get(), 0); }, reps), 0);
}

// Attention alone at one shape (GPT-2's causal, ViT's not), on buffers of its own, random normal.
void bench_attention_alone(const ModelSize& m, int T, bool causal, int reps, bool cudnn) {
  const size_t N = size_t(m.B) * T, C = size_t(m.heads) * 64, rows = size_t(m.B) * m.heads * T;
  DeviceBuffer<bf16> qkv(N * 3 * C, "qkv"), out(N * C, "out"), dout(N * C, "dout"), dqkv(N * 3 * C, "dqkv");
  DeviceBuffer<float> lse(rows, "lse"), scratch(rows, "scratch");
  fill_normal(qkv.get(), int64_t(qkv.size()), 1, 1.0f);
  fill_normal(dout.get(), int64_t(dout.size()), 2, 1.0f);
  Reporter r(m, T);
  bench_attention(m.name, m.B, m.heads, T, causal, m.layers, reps, cudnn,
                  {qkv.get(), out.get(), dout.get(), dqkv.get(), lse.get(), scratch.get()}, r);
  CUDA_CHECK(cudaDeviceSynchronize());
}

void bench_model(const ModelSize& m, int T, int tune, int reps, bool cudnn) {
  BenchBuffers b(m, T);
  LtMatmul heur, tuned(tune);
  Reporter r(m, T);
  bench_matmuls(m, tune, reps, b, heur, tuned, r);
  bench_kernels(m, T, reps, cudnn, b, r);
  CUDA_CHECK(cudaDeviceSynchronize());
  r.print_sums();
}
}  // namespace

int main(int argc, char** argv) {
  try {
    std::string models = "gpt2-124m:64,gpt2-355m:32";
    int T = 1024, tune = 8, reps = 20, vit_attention = 0;
    bool cudnn = false, attention_only = false;
    Cli cli("bench_gpt2_ops", "GPU time of each operation of a bf16 GPT-2 training step (JSON lines).");
    // The vocabulary shared with our other programs: train/flags.h.
    flags::add_model(cli, &models, kGpt2Sizes, true, "; each optionally :B (batch; default 64, 32, 16, 8 by size)");
    flags::add_seq(cli, &T, "sequence length");
    cli.add(0, "tune", &tune, "also time the fastest of the cuBLASLt heuristic's first K algorithms (0: off)");
    cli.add(0, "reps", &reps, "timed repetitions per operation (median)");
    cli.add(0, "vit-attention", &vit_attention, "1: also time attention at ViT-B/16's shape (B 256, T 197, 12 heads)");
    cli.add(0, "cudnn", &cudnn, "also time cuDNN's fused attention (forward; deterministic and atomic backward)");
    cli.add(0, "attention-only", &attention_only,
            "time only attention (each model's; ViT-B/16's with --vit-attention 1)");
    flags::add_flag_notes(cli, "bench_gpt2_ops");
    if (!cli.parse(argc, argv)) return 0;
    // The model names first, so that any later mistake shows that they were taken.
    std::vector<ModelSize> list;
    std::stringstream ss(models);
    for (std::string spec; std::getline(ss, spec, ',');)
      if (!spec.empty()) list.push_back(parse_model(spec));
    if (list.empty()) user_error("--model needs at least one model name (got '", models, "').");
    if (T < 64 || T % 64 || reps < 1 || tune < 0)
      user_error("need --seq a multiple of 64, --reps >= 1 and --tune >= 0.");
    if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("{\"bench\":\"gpt2_ops\",\"gpu\":\"%s\"}\n", prop.name);
    for (const auto& m : list) {
      if (attention_only)
        bench_attention_alone(m, T, true, reps, cudnn);
      else
        bench_model(m, T, tune, reps, cudnn);
    }
    if (vit_attention) bench_attention_alone({"vit-b16", 12, 768, 12, 256}, 197, false, reps, cudnn);
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_gpt2_ops: %s\n", e.what());
    return 1;
  }
  return 0;
}
