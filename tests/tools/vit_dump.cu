// vit_dump: runs our ViT from vit_init's weights on deterministic image batches, on both sides (the CPU double
// reference VitRef and the bf16 GPU model VitBf16), and writes everything a reference implementation needs to
// check it. tests/timm_vit_crosscheck.py drives it (against timm's VisionTransformer).
//
//   DIR/table.json        {"config": {...}, "total": N, "tensors": [{"name", "shape", "offset", "numel", "decay"}]}
//   DIR/params0.bin       float32 [N]: the arena as initialised (padding zero)
//   DIR/pixels.bin        uint8 [steps + 1][B][H][W][C]: the images of each batch, as the loader hands them over
//   DIR/labels.bin        int32 [steps + 1][B]: their class labels
//   DIR/ref_logits0.bin   float32 [B][classes]: the CPU double reference's logits of batch 0
//   DIR/ref_loss0.bin     float32 [1]: its mean cross-entropy
//   DIR/ref_grads0.bin    float32 [N]: its gradients of that loss, arena layout
//   DIR/logits0.bin, loss0.bin, grads0.bin: the same from the bf16 GPU model (not with --ref-only 1)
//   DIR/losses.bin        float32 [steps + 1]: entry s < steps = training loss of step s on batch s, before its
//                         AdamW update; entry steps = loss on batch `steps` after the last update (forward only)
//   DIR/params_final.bin  float32 [N]: the arena after the last update
//
// The reference reads the images normalised as the GPU's patch kernel normalises them, in float32:
// (u * (1/255) - mean) * (1/std), NCHW. The steps follow the trainer: zero grads, one micro-batch, hard labels,
// loss_and_dlogits(1), backward, AdamW (betas 0.9/0.999, eps 1e-8, decoupled weight decay on tensors with
// decay=true, constant LR). No clipping, mixup or label smoothing: the check is about the model and the optimizer.
// Each class has a fixed random template that its images blend with noise: the labels are learnable, so the
// updates change the predictions and the per-step losses carry information about them.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/tool_errors.h"
#include "models/vit_bf16.h"
#include "models/vit_ref.h"
#include "optim/optimizer.h"
#include "tests/tools/dump_io.h"

namespace {
struct Batches {
  std::vector<uint8_t> pixels;  // [n][B][H][W][C]
  std::vector<int32_t> labels;  // [n][B]
};

// n batches of B images: label uniform over the classes; each pixel (2 template + noise) / 3 with the label's
// template. Plain 64-bit draws (no std distributions) so that every standard library writes the same bytes.
Batches make_batches(int n, int B, const VitShape& s, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 777);
  const size_t img = size_t(s.image) * size_t(s.image) * size_t(s.in_chans);
  std::vector<uint8_t> templates(size_t(s.classes) * img);
  for (auto& v : templates) v = uint8_t(rng() >> 56);
  Batches out;
  out.pixels.resize(size_t(n) * size_t(B) * img);
  out.labels.resize(size_t(n) * size_t(B));
  for (size_t i = 0; i < out.labels.size(); i++) {
    const int32_t y = int32_t(rng() % uint64_t(s.classes));
    out.labels[i] = y;
    const uint8_t* t = &templates[size_t(y) * img];
    uint8_t* px = &out.pixels[i * img];
    for (size_t k = 0; k < img; k++) px[k] = uint8_t((2u * t[k] + unsigned(rng() >> 56)) / 3u);
  }
  return out;
}

// One batch as the reference reads it: NCHW floats, normalised with the patch kernel's float32 arithmetic
// (kernels/patch_embed.cu), so that both sides start from the same values.
std::vector<float> normalised_images(const uint8_t* px, int B, const VitShape& s, const ImageNorm& norm) {
  const int S = s.image, IC = s.in_chans;
  std::vector<float> out(size_t(B) * size_t(IC) * size_t(S) * size_t(S));
  for (int b = 0; b < B; b++)
    for (int c = 0; c < IC; c++) {
      const float inv_std = 1.0f / norm.std[c];
      for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
          const uint8_t u = px[((size_t(b) * size_t(S) + size_t(y)) * size_t(S) + size_t(x)) * size_t(IC) + size_t(c)];
          out[((size_t(b) * size_t(IC) + size_t(c)) * size_t(S) + size_t(y)) * size_t(S) + size_t(x)] =
              (float(u) * (1.0f / 255.0f) - norm.mean[c]) * inv_std;
        }
    }
  return out;
}

// A float in the fewest digits that read back as the same float (1e-06, not 9.9999999747524271e-07).
std::string short_float(float v) {
  for (int digits = 6;; digits++) {
    std::ostringstream o;
    o.precision(digits);
    o << double(v);
    if (std::stof(o.str()) == v || digits >= 9) return o.str();
  }
}

std::string table_json(const ParamTable& t, const VitShape& s, const ImageNorm& norm, int B, int steps, double lr,
                       double wd, const OptimOptions& o, int64_t seed, bool ref_only) {
  std::ostringstream j;
  j.precision(17);
  auto per_channel = [&](const float* v) {
    std::ostringstream a;
    a.precision(17);
    a << "[";
    for (int c = 0; c < s.in_chans; c++) a << (c ? ", " : "") << double(v[c]);
    a << "]";
    return a.str();
  };
  j << "{\"config\": {\"model\": \"vit\", \"precision\": \"bf16\", \"image\": " << s.image << ", \"patch\": " << s.patch
    << ", \"channels\": " << s.in_chans << ", \"classes\": " << s.classes << ", \"layers\": " << s.layers
    << ", \"heads\": " << s.heads << ", \"embed_dim\": " << s.channels << ", \"tokens\": " << s.tokens()
    << ", \"qkv\": \"" << (s.separate_qkv ? "separate" : "fused") << "\", \"B\": " << B << ", \"steps\": " << steps
    << ", \"lr\": " << lr << ", \"wd\": " << wd << ", \"betas\": [" << o.adamw.beta1 << ", " << o.adamw.beta2
    << "], \"eps\": " << o.adamw.eps << ", \"schedule\": \"constant\", \"grad_clip\": 0, \"seed\": " << seed
    << ", \"ln_eps\": " << short_float(s.block().ln_eps) << ", \"gelu\": \"erf\", \"mlp_ratio\": 4"
    << ", \"mean\": " << per_channel(norm.mean) << ", \"std\": " << per_channel(norm.std)
    << ", \"normalise\": \"float32 (u * (1/255) - mean) * (1/std)\", \"pixels\": \"uint8 [steps+1][B][H][W][C]\""
    << ", \"ref_only\": " << (ref_only ? "true" : "false") << "},\n \"total\": " << t.total_elems()
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
  std::string qkv = "fused", out;
  VitShape s;
  int B = 4, steps = 10;
  double lr = 1e-3, wd = 0.1;
  int64_t seed = 1337;
  bool ref_only = false;
  DumpArgs() {
    s.layers = 2;
    s.heads = 2;
    s.image = 32;
    s.patch = 8;
    s.in_chans = 3;
    s.classes = 10;
  }
};

void add_flags(Cli& cli, DumpArgs& a) {
  cli.add(0, "image", &a.s.image, "image side in pixels (a multiple of --patch)");
  cli.add(0, "patch", &a.s.patch, "patch side in pixels");
  cli.add(0, "channels", &a.s.in_chans, "image channels: 1 or 3");
  cli.add(0, "classes", &a.s.classes, "classes of the head");
  cli.add(0, "layers", &a.s.layers, "transformer blocks");
  cli.add(0, "heads", &a.s.heads, "attention heads (model width = 64 * heads)");
  cli.add(0, "qkv", &a.qkv, "fused (timm's attn.qkv) | separate (attn.q, attn.k, attn.v)");
  cli.add('b', "batch", &a.B, "images per batch");
  cli.add('x', "steps", &a.steps, "AdamW steps (one batch each)");
  cli.add('l', "lr", &a.lr, "AdamW learning rate");
  cli.add('c', "wd", &a.wd, "AdamW weight decay (tensors with decay=true only)");
  cli.add(0, "seed", &a.seed, "initialisation and data seed");
  cli.add(0, "ref-only", &a.ref_only, "1: write only the table, data and CPU reference files (no GPU needed)");
  cli.add(0, "out", &a.out, "output folder (created if missing)");
}

// Bad flags, each one clear sentence; then the model's width and q/k/v layout from them.
void check_flags(DumpArgs& a) {
  if (a.out.empty()) user_error("--out is required: the folder to write the dump into.");
  if (a.qkv != "separate" && a.qkv != "fused") user_error("--qkv must be separate or fused (got '", a.qkv, "').");
  if (a.s.in_chans != 1 && a.s.in_chans != 3) user_error("--channels must be 1 or 3 (got ", a.s.in_chans, ").");
  if (a.s.layers < 1 || a.s.heads < 1) user_error("need --layers >= 1 and --heads >= 1.");
  if (a.B < 1 || a.steps < 0) user_error("need -b >= 1 and -x >= 0.");
  if (!(a.lr >= 0) || !(a.wd >= 0)) user_error("need -l (lr) >= 0 and -c (wd) >= 0.");  // before --out is made
  a.s.channels = 64 * a.s.heads;
  a.s.separate_qkv = a.qkv == "separate";
}

OptimOptions adamw_options(const DumpArgs& a) {
  OptimOptions oo;
  oo.adamw.lr = a.lr;
  oo.adamw.beta1 = 0.9;
  oo.adamw.beta2 = 0.999;
  oo.adamw.eps = 1e-8;
  oo.adamw.weight_decay = a.wd;
  oo.schedule = make_schedule("constant", 0, std::max(a.steps, 1), 0, 0.2);
  validate_options("adamw", oo);
  return oo;
}

// Exact side: the double reference on batch 0, from the fp32 initial weights. Returns its loss.
float dump_reference(const DumpArgs& a, const ParamTable& table, const std::vector<float>& init, const Batches& data,
                     const ImageNorm& norm) {
  VitRef ref(a.s, table);
  const std::vector<double> p0(init.begin(), init.end());
  const std::vector<int> labels0(data.labels.begin(), data.labels.begin() + a.B);
  const float ref_loss =
      float(ref.forward(p0, normalised_images(data.pixels.data(), a.B, a.s, norm), labels0, nullptr, a.B));
  const std::vector<double> g = ref.backward(p0);
  const std::vector<float> ref_logits(ref.logits().begin(), ref.logits().end()), ref_grads(g.begin(), g.end());
  write_bin(a.out + "/ref_logits0.bin", ref_logits.data(), ref_logits.size());
  write_bin(a.out + "/ref_loss0.bin", &ref_loss, 1);
  write_bin(a.out + "/ref_grads0.bin", ref_grads.data(), size_t(table.total_elems()));
  return ref_loss;
}

void set_batch(VitBf16& model, const Batches& data, int i, int B, size_t img) {
  Batch b;
  b.pixels = &data.pixels[size_t(i) * img];
  b.targets = &data.labels[size_t(i) * size_t(B)];
  model.set_batch(b, 0);  // pageable memory: copied before it returns
}

// Batch 0 before any update: logits (read before loss_and_dlogits turns them into their gradient), loss,
// gradients. Returns the loss.
float dump_batch0(VitBf16& model, Arena& arena, const Batches& data, size_t img, const DumpArgs& a, size_t total) {
  arena.zero_grads(0);
  set_batch(model, data, 0, a.B, img);
  model.forward(0);
  std::vector<float> logits(size_t(a.B) * size_t(a.s.classes));
  model.logits_to_host(logits.data());
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
std::vector<float> train_losses(VitBf16& model, Arena& arena, Optimizer& opt, const Batches& data, size_t img,
                                const DumpArgs& a) {
  std::vector<float> losses;
  for (int step = 0; step < a.steps; step++) {
    arena.zero_grads(0);
    set_batch(model, data, step, a.B, img);
    model.forward(0);
    model.loss_and_dlogits(1.0f, 0);
    model.backward(0);
    StepInfo info;
    info.d_loss = model.d_loss();
    opt.step(info, 0);
    losses.push_back(read_loss(model));
  }
  set_batch(model, data, a.steps, a.B, img);
  model.forward(0);
  model.loss_and_dlogits(1.0f, 0);
  losses.push_back(read_loss(model));
  return losses;
}

// bf16 side: the GPU model from the same weights (its compute copy rounds them to bf16): batch 0's outputs,
// the training losses and the final weights.
void dump_gpu(const DumpArgs& a, const ParamTable& table, const std::vector<float>& init, const Batches& data,
              const ImageNorm& norm, const OptimOptions& oo, float ref_loss) {
  const VitShape& s = a.s;
  const size_t total = size_t(table.total_elems()), img = size_t(a.B) * size_t(s.image * s.image * s.in_chans);
  Arena arena(table, true);
  for (const auto& t : table.tensors()) arena.set_param(t.index, &init[size_t(t.offset)]);
  VitBf16 model(s, arena, a.B, norm);
  auto opt = make_optimizer("adamw", oo, arena);
  const float loss0 = dump_batch0(model, arena, data, img, a, total);
  const std::vector<float> losses = train_losses(model, arena, *opt, data, img, a);
  write_bin(a.out + "/losses.bin", losses.data(), losses.size());
  write_bin(a.out + "/params_final.bin", arena.get_params_flat().data(), total);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf(
      "vit_dump: %s %dx%dx%d patch %d L=%d C=%d NH=%d classes %d B=%d: loss0 %.6f (reference %.6f), "
      "loss after %d steps %.6f -> %s\n",
      a.qkv.c_str(), s.image, s.image, s.in_chans, s.patch, s.layers, s.channels, s.heads, s.classes, a.B,
      double(loss0), double(ref_loss), a.steps, double(losses.back()), a.out.c_str());
}

// The whole dump: the inputs and the reference's outputs, then (unless --ref-only) the GPU model's.
void dump(const DumpArgs& a, const ParamTable& table) {
  const VitShape& s = a.s;
  // ImageNet's statistics for colour images; (0.5, 0.5) for grey ones (timm's default for 1 channel).
  ImageNorm norm;
  if (s.in_chans == 1) norm.mean[0] = norm.std[0] = 0.5f;
  const OptimOptions oo = adamw_options(a);
  const size_t total = size_t(table.total_elems());
  const std::vector<float> init = vit_init(table, s, uint64_t(a.seed));
  const Batches data = make_batches(a.steps + 1, a.B, s, uint64_t(a.seed));
  {
    std::ofstream f(a.out + "/table.json");
    f << table_json(table, s, norm, a.B, a.steps, a.lr, a.wd, oo, a.seed, a.ref_only);
    if (!f) user_error("writing '", a.out, "/table.json' failed.");
  }
  write_bin(a.out + "/params0.bin", init.data(), total);
  write_bin(a.out + "/pixels.bin", data.pixels.data(), data.pixels.size());
  write_bin(a.out + "/labels.bin", data.labels.data(), data.labels.size());
  const float ref_loss = dump_reference(a, table, init, data, norm);
  if (a.ref_only) {
    std::printf(
        "vit_dump: %s %dx%dx%d patch %d L=%d C=%d NH=%d classes %d B=%d: reference loss0 %.6f -> %s "
        "(reference only)\n",
        a.qkv.c_str(), s.image, s.image, s.in_chans, s.patch, s.layers, s.channels, s.heads, s.classes, a.B,
        double(ref_loss), a.out.c_str());
    return;
  }
  dump_gpu(a, table, init, data, norm, oo, ref_loss);
}

}  // namespace

int main(int argc, char** argv) {
  DumpArgs a;
  Cli cli("vit_dump",
          "Dumps our ViT's logits, loss and gradients (CPU double reference and bf16 GPU model) and the bf16 model's "
          "AdamW losses for tests/timm_vit_crosscheck.py.");
  add_flags(cli, a);
  try {
    if (!cli.parse(argc, argv)) return 0;
    check_flags(a);
    const ParamTable table = vit_param_table(a.s);  // checks image, patch and classes
    if (!a.ref_only && !cuda_device_available())
      user_error("needs a CUDA GPU and none is visible (--ref-only 1 writes the CPU reference files only).");
    mkdir(a.out.c_str(), 0755);
    dump(a, table);
  } catch (const CudaError& e) {
    std::fprintf(stderr, "vit_dump: CUDA error: %s\n", e.what());
    return 2;
  } catch (...) {
    return report_tool_error("vit_dump");
  }
  return 0;
}
