// bench_optim: optimizer step time on real model shapes, one JSON line per (model, optimizer).
//
//   ./bench_optim -e gpt2-124m,gpt2-355m -o adamw,adafactor,muon
//   ./bench_optim -e gpt2-124m -o velo --world 4     (each rank's share of the sharded data-parallel step)
//   ./bench_optim -e vit-l16,mlp-w4096-d4,mat-8192x8192 -o small_fc_lopt:fast,velo   (bench/bench_tables.h)
//   ./bench_optim -e gpt2-124m --shapes 1            (the tensors, one JSON line each, for the peers; no GPU)
//
// With --world N each of the N ranks' shares (core/shard_plan.h, the plan train_gpt2 --shard 1 makes) is
// stepped on its own in the rank-by-rank arena, with its optimizer state only, and gets a line of its own:
// the busiest rank's time is the optimizer part of a sharded step on N GPUs, less the communication (the
// cross-rank sums are skipped here; they are a few kilobytes).
//
// Each step is timed with CUDA events (common/event_timer.h: median of --steps after --untimed ones). "floor_ms" is the
// bytes the step must move (per optimizer, below) over the measured device-to-device copy bandwidth, so pct_of_floor =
// 100 * floor_ms / median_ms. "launches" counts the kernels of one step, read from a CUDA graph capture of it.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "bench/bench_tables.h"
#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "common/device_random.h"
#include "common/event_timer.h"
#include "core/shard_plan.h"
#include "models/model_tables.h"
#include "optim/grad_clip.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"
#include "optim/step_cost.h"
#include "train/flags.h"

namespace {
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

// Device-to-device copy bandwidth, counting bytes read plus bytes written.
double copy_bandwidth() {
  const size_t n = size_t(1) << 30;
  DeviceBuffer<char> a(n, "bandwidth probe"), b(n, "bandwidth probe");
  CUDA_CHECK(cudaMemset(a.get(), 1, n));
  auto copy = [&] { CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice)); };
  return 2.0 * double(n) / (median_event_ms(copy, 0, 20, 3) * 1e-3);
}

// Bytes one step must move through HBM and its Newton-Schulz FLOPs, summed over the parts `owned`
// (optim/step_cost.h).
double step_bytes(const std::string& opt, const ParamTable& t, const std::vector<Part>& owned,
                  const StepBytesFlags& f) {
  double b = 0;
  for (const Part& p : owned) b += step_bytes_per_elem(opt, t[p.tensor], f) * double(p.end - p.begin);
  return b;
}

double ns_flops(const std::string& opt, const ParamTable& t, const std::vector<int>& owned, int steps) {
  double f = 0;
  for (int i : owned) f += ns_step_flops(opt, t[i], steps);
  return f;
}

// The other ranks of a sharded step, absent: their sums and maxima are left out of the timing.
class NoOtherRanks : public CrossRank {
 public:
  void sum(float*, size_t, cudaStream_t) override {}
  void sum(double*, size_t, cudaStream_t) override {}
  void max(float*, size_t, cudaStream_t) override {}
};
// One optimizer's step on one model: untimed steps, then the median of `steps` timed ones, the bytes
// it must move and the launches a CUDA-graph capture of it holds; one JSON line.
struct Measure {
  const char* gpu;
  std::string model;
  bool bf16;
  double clip;
  int steps, untimed;
  double bandwidth;
  int world, rank;  // rank's share of a sharded step over world ranks; world 1: the whole table
  bool clip_apart;  // the clipper beside the optimizer even where its pass A could take it
};
void measure(const Measure& m, const std::string& entry, const OptimOptions& oo, Arena& arena, const Owned& owned,
             cudaStream_t stream) {
  const ParamTable& table = arena.table();
  // "small_fc_lopt:fast", "elo:fast" and "celo2:fast" select the tensor-core MLP, "celo2:fp32" (tf32, bf16) the
  // Newton-Schulz precision for that measurement.
  const size_t colon = entry.find(':');
  const std::string name = entry.substr(0, colon), mode = colon == std::string::npos ? "" : entry.substr(colon + 1);
  OptimOptions eo = oo;
  eo.small_fc.fast = (mode == "fast" && name == "small_fc_lopt") || oo.small_fc.fast;
  eo.elo.fast = (mode == "fast" && name == "elo") || oo.elo.fast;
  Celo2Options& c2 = name == "elo_celo2" ? eo.elo_celo2 : eo.celo2;
  if (mode == "fast" && (name == "celo2" || name == "elo_celo2"))
    c2.fast = true;  // the Newton-Schulz precision stays the options' (bf16 by default)
  else if (!mode.empty() && (name == "celo2" || name == "elo_celo2"))
    c2.ns = mode;
  NoOtherRanks others;
  auto opt = make_optimizer(name, eo, arena, owned, m.world > 1 ? &others : nullptr);
  GradClipper clipper(arena, float(m.clip), owned, m.world > 1 ? &others : nullptr);
  StepInfo info;
  if (m.clip > 0) info.d_grad_scale = clipper.d_scale();
  DeviceBuffer<float> d_loss(1, "loss");
  const float loss = 3.0f;
  d_loss.upload(&loss, 1);
  info.d_loss = d_loss.get();
  // As train_gpt2 does: an optimizer that takes the clip into its pass A runs it inside its step.
  const bool taken = m.clip > 0 && !m.clip_apart && opt->take_clip(&clipper);
  auto one_step = [&] {
    if (m.clip > 0 && !taken) clipper.run(stream);
    opt->step(info, stream);
  };
  const std::vector<float> ms = event_times_ms(one_step, stream, m.steps, m.untimed);
  const size_t nodes = CudaGraph::capture(stream, one_step).nodes();
  StepBytesFlags bf;
  bf.bf16_copy = m.bf16;
  bf.trainer_clip = m.clip > 0;
  bf.clip_in_pass_a = taken;
  bf.own_clip = name == "elo" && eo.elo.clip_grad;
  bf.dx_bf16 = c2.ns == "bf16" && c2.orthogonalize;
  bf.lopt_fast = (name == "small_fc_lopt" && eo.small_fc.fast) || (name == "elo" && eo.elo.fast);
  bf.lopt_rec16 = (name == "velo" && eo.velo.bf16_record) || (name == "small_fc_lopt" && eo.small_fc.bf16_record) ||
                  ((name == "celo2" || name == "elo_celo2") && c2.bf16_record);
  const std::vector<Part> parts = owned_parts(table, owned);
  const std::vector<int> mine = part_tensors(parts);
  const double bytes = step_bytes(name, table, parts, bf), floor_ms = bytes / m.bandwidth * 1e3, med = median_ms(ms);
  int64_t params = 0;
  for (const Part& p : parts) params += p.end - p.begin;
  std::printf(
      "{\"bench\":\"optim_step\",\"gpu\":\"%s\",\"model\":\"%s\",\"params\":%lld,\"optimizer\":\"%s\","
      "\"bf16_copy\":%d,\"clip\":%d,\"clip_in_pass_a\":%d,\"median_ms\":%.4f,\"min_ms\":%.4f,\"bytes_per_param\":%.2f,"
      "\"floor_ms\":%.4f,\"pct_of_floor\":%.1f,\"launches\":%zu,\"state_mib\":%.1f",
      m.gpu, m.model.c_str(), (long long)params, name.c_str(), int(m.bf16), int(m.clip > 0), int(taken), med,
      *std::min_element(ms.begin(), ms.end()), bytes / double(params), floor_ms, 100.0 * floor_ms / med, nodes,
      double(opt->state_bytes()) / 1048576.0);
  if (m.world > 1)
    std::printf(",\"world\":%d,\"rank\":%d,\"tensors\":%zu,\"model_params\":%lld", m.world, m.rank, mine.size(),
                (long long)table.num_params());
  if (name == "muon") std::printf(",\"ns_tflop\":%.3f", ns_flops(name, table, mine, oo.muon.ns_steps) / 1e12);
  if (name == "small_fc_lopt") std::printf(",\"mode\":\"%s\"", eo.small_fc.fast ? "fast" : "exact");
  if (name == "elo") std::printf(",\"mode\":\"%s\"", eo.elo.fast ? "fast" : "exact");
  if (name == "celo2" || name == "elo_celo2")
    std::printf(",\"ns\":\"%s\",\"ns_tflop\":%.3f%s", c2.ns.c_str(), ns_flops(name, table, mine, c2.ns_steps) / 1e12,
                c2.fast ? ",\"mode\":\"fast\"" : "");
  std::printf("}\n");
  std::fflush(stdout);
}
const unsigned kBenchModels = kGpt2Sizes | kGpt2Tiny | kVitB16;

// --shapes: each model's tensors, one JSON line each (for the peers, which step the same shapes).
void print_shapes(const std::string& models) {
  for (const auto& model : split(models)) {
    const ParamTable table = bench::bench_table(model, kBenchModels);
    for (const TensorInfo& t : table.tensors()) {
      std::string dims;
      for (int64_t d : t.shape) dims += (dims.empty() ? "" : ",") + std::to_string(d);
      std::printf("{\"model\":\"%s\",\"tensor\":\"%s\",\"shape\":[%s],\"role\":\"%s\",\"muon\":%d}\n", model.c_str(),
                  t.name.c_str(), dims.c_str(), role_name(t.role), int(t.resolved_owner() == Owner::Muon));
    }
  }
}

// The command line.
struct BenchArgs {
  std::string models = "vit-b16,gpt2-124m,gpt2-355m,gpt2-774m,gpt2-1558m", opts = "adamw,adafactor,muon";
  int steps = 30, untimed = 5, world = 1;
  bool bf16 = false, shapes = false, clip_apart = false;
  double clip = 0;
  std::vector<std::string> sets;
};

void add_flags(Cli& cli, BenchArgs& a) {
  // The vocabulary shared with our other programs: train/flags.h.
  flags::add_model(cli, &a.models, kBenchModels, true,
                   "; also vit-ti16, vit-s16, vit-l16, mlp-w<W>-d<D> (D layers of W x W with a bias) and mat-<R>x<C> "
                   "(one matrix)");
  flags::add_optimizer(cli, &a.opts,
                       "comma-separated optimizers (small_fc_lopt:fast, elo:fast, celo2:fast, elo_celo2:fast = "
                       "tensor-core MLP; celo2:fp32, celo2:tf32, celo2:bf16 and the same for elo_celo2 = that "
                       "Newton-Schulz precision)");
  flags::add_steps(cli, &a.steps, "timed steps");
  cli.add(0, "untimed", &a.untimed, "untimed steps first (warm-up)");
  cli.add(0, "bf16", &a.bf16, "also refresh a bf16 copy of the parameters in each step");
  flags::add_clip(cli, &a.clip, "; any norm > 0 adds 2 launches and 4 B/param to the step");
  cli.add(0, "clip-apart", &a.clip_apart,
          "run the clip beside the optimizer even where its first pass could take it (an A/B of that)");
  cli.add(0, "world", &a.world,
          "time each rank's share of the sharded data-parallel step over this many ranks (train_gpt2 --shard 1's "
          "plan; without the communication); 1 = the whole table");
  cli.add(0, "shapes", &a.shapes,
          "print each model's tensors as JSON lines (name, shape, role, Muon or AdamW) and exit; needs no GPU");
  flags::add_set(cli, &a.sets);
  flags::add_flag_notes(cli, "bench_optim");
  cli.set_epilogue(
      options_help(OptimOptions()) +
      "without small_fc_lopt.weights / velo.weights / elo.weights, the learned optimizers run on random meta-weights "
      "of the published shapes.\n");
}

// The numbers and the model names; the model names first, so that any later mistake shows that they were taken.
void check_flags(const BenchArgs& a) {
  for (const auto& model : split(a.models)) bench::bench_table(model, kBenchModels);
  if (a.steps < 1 || a.untimed < 0) user_error("--steps must be >= 1 and --untimed >= 0.");
  if (a.world < 1 || a.world > 64) user_error("--world must be between 1 and 64 (got ", a.world, ").");
  for (const auto& model : split(a.models)) {
    const int n = bench::bench_table(model, kBenchModels).size();
    if (a.world > n) user_error(model, " has ", n, " tensors, fewer than --world ", a.world, " ranks to share them.");
  }
  if (!(a.clip >= 0))
    user_error("--clip (grad-norm clip) must be >= 0, where 0 turns clipping off (got ", a.clip, ").");
}

// The optimizer of each --optimizer entry: its name without the mode (small_fc_lopt:fast, celo2:fp32), the mode
// checked.
std::vector<std::string> entry_names(const BenchArgs& a) {
  std::vector<std::string> names;
  for (const auto& o : split(a.opts)) {
    const std::string name = o.substr(0, o.find(':')),
                      mode = o.find(':') == std::string::npos ? "" : o.substr(o.find(':') + 1);
    const bool ok = mode.empty() || ((name == "small_fc_lopt" || name == "elo") && mode == "fast") ||
                    ((name == "celo2" || name == "elo_celo2") &&
                     (mode == "fp32" || mode == "tf32" || mode == "bf16" || mode == "fast"));
    if (!ok)
      user_error("unknown optimizer mode '", o,
                 "'; modes are small_fc_lopt:fast, elo:fast and celo2:/elo_celo2: fp32, tf32, bf16 or fast.");
    names.push_back(name);
  }
  if (names.empty() || split(a.models).empty()) user_error("--optimizer and --model each need at least one name.");
  for (const auto& name : names) check_optimizer_name(name);
  return names;
}

// The --set options, checked against the optimizers; weights given with --set are read now, so a wrong path
// fails before the GPU check.
OptimOptions read_options(const BenchArgs& a, const std::vector<std::string>& names) {
  OptimOptions oo;
  for (const auto& s : a.sets) set_option(oo, s);
  check_options_apply(a.sets, names);
  for (const auto& name : names) validate_options(name, oo);
  if (!oo.small_fc.weights.empty()) check_lopt_weights("small_fc_lopt", oo);
  if (!oo.velo.weights.empty()) check_lopt_weights("velo", oo);
  if (!oo.elo.weights.empty()) check_lopt_weights("elo", oo);
  for (const auto& name : names)
    if (name == "celo2" || (name == "elo_celo2" && !oo.elo_celo2.weights.empty())) check_lopt_weights(name, oo);
  return oo;
}

// The copy bandwidth (the floor's), then every (model, optimizer) on a fresh arena of random parameters
// and gradients; with --world N each rank's share of the plan in turn.
void run_benchmarks(const BenchArgs& a, const OptimOptions& oo) {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double bw = copy_bandwidth();
  std::printf("{\"bench\":\"copy\",\"gpu\":\"%s\",\"copy_tbps\":%.3f}\n", prop.name, bw / 1e12);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const auto& model : split(a.models)) {
    const ParamTable table = bench::bench_table(model, kBenchModels);
    for (const auto& entry : split(a.opts)) {
      const std::string name = entry.substr(0, entry.find(':'));
      const ShardPlan plan = plan_shards(
          table, a.world, [&](const TensorInfo& t) { return shard_step_cost(name, t); },
          [&](const TensorInfo& t) { return shard_cut_unit(name, oo, t); });
      Arena arena(sharded_table(table, plan), a.bf16);  // world 1: the table's own layout
      fill_normal(arena.params(), arena.total(), 1, 0.02f);
      fill_normal(arena.grads(), arena.total(), 2, 1e-3f);
      for (int r = 0; r < a.world; r++) {
        const Measure m{prop.name, model, a.bf16, a.clip, a.steps, a.untimed, bw, a.world, r, a.clip_apart};
        measure(m, entry, oo, arena, a.world > 1 ? plan.owned(r) : Owned(), stream);
      }
    }
  }
}
}  // namespace

int main(int argc, char** argv) {
  BenchArgs a;
  Cli cli("bench_optim", "Median optimizer step time on model shapes; prints one JSON line per measurement.");
  add_flags(cli, a);
  try {
    if (!cli.parse(argc, argv)) return 0;
    check_flags(a);
    if (a.shapes) {
      print_shapes(a.models);
      return 0;
    }
    const std::vector<std::string> names = entry_names(a);
    OptimOptions oo = read_options(a, names);
    if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");
    // Learned optimizers without weights: random meta-weights of the published shapes (the step time does
    // not depend on their values) in a temporary folder, removed at the end (the optimizers read it when made).
    const std::unique_ptr<TempDir> random_weights = write_random_lopt_weights(names, oo, 1);
    run_benchmarks(a, oo);
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_optim: %s\n", e.what());
    return 1;
  }
  return 0;
}
