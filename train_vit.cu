// train_vit: ViT pretraining on WebDataset image shards (imagenet-1k-wds's layout) with any optimizer.
//
//   scripts/prepare_fashion_mnist.sh && make train_vit && ./train_vit -o adamw   (a ViT-Ti/4 on Fashion-MNIST)
//
// The loop, top to bottom: evaluation (loss, top-1, top-5) every -v steps, checkpoints every -n steps (and
// on SIGINT/SIGTERM), then per step: micro-batches with gradient accumulation, grad-norm clipping, one
// optimizer step, one log line. Images are decoded and augmented on CPU threads (data/image_loader), or with
// --decoder nvjpeg the JPEGs by the GPU's JPEG engine (data/nvjpeg_decoder), and normalised and mixed on the
// GPU (models/vit_bf16); what every trainer shares is in train/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/cuda_check.h"
#include "data/image_prefetcher.h"
#include "data/nvjpeg_decoder.h"
#include "models/vit_bf16.h"
#include "optim/grad_clip.h"
#include "train/checkpoint.h"
#include "train/data_error.h"
#include "train/data_parallel.h"
#include "train/program.h"
#include "train/step_runner.h"
#include "train/train_flags.h"
#include "train/train_log.h"

namespace {
struct Args : TrainFlags {  // train_vit's own flags beside the shared ones
  std::string train = "data/fashion_mnist/fashion-mnist-train-{0000..0005}.tar";
  std::string val = "data/fashion_mnist/fashion-mnist-validation-0000.tar";
  std::string model = "vit-ti4", qkv = "fused", mean = "0.2860", stdev = "0.3530", randaugment, decoder = "stb";
  int image = 28, channels = 1, classes = 10, threads = 0;
  bool synthetic = false;
  int64_t shuffle = 10000;
  double mixup = 0.0, cutmix = 0.0, smoothing = 0.1, scale_min = 0.75, crop_pct = 1.0, hflip = 0.5;
  Args() {  // the Fashion-MNIST demo: 40 epochs of 60,000 images (91.4% top-1 in 45 s on an H100)
    B = 256;
    steps = 9400;
    lr = 5e-4;
    wd = 0.05;
    val_every = 940;
    val_batches = 0;
    batch_unit = "images";
    val_all = true;
    micro_batch = "-b";
  }
};

void add_flags(Cli& cli, Args* a) {
  cli.section(help_section::kData);
  cli.add('i', "train", &a->train, "training shards: a brace pattern ({0000..1023}) or a glob");
  cli.add('j', "val", &a->val, "validation shards; empty = no evaluation");
  cli.add('e', "model", &a->model, "vit-ti16 | vit-s16 | vit-b16 | vit-l16 (any patch size: vit-ti4 ...) | vit-test");
  cli.add(0, "qkv", &a->qkv, "fused (timm's layout) or separate (q, k, v matrices, the PyLO paper's setting)");
  cli.add(0, "image", &a->image, "image side in pixels (a multiple of the patch size)");
  cli.add(0, "channels", &a->channels, "1 (gray) or 3 (RGB): images are decoded to this");
  cli.add(0, "classes", &a->classes, "number of classes (labels must be below it)");
  cli.add(0, "mean", &a->mean, "per-channel mean of x / 255, comma-separated (ImageNet: 0.485,0.456,0.406)");
  cli.add(0, "std", &a->stdev, "per-channel std of x / 255 (ImageNet: 0.229,0.224,0.225)");
  add_train_flags(cli, a, "adamw | adafactor | muon | velo | small_fc_lopt | celo2 | elo | elo_celo2");
  cli.section("augmentation");
  cli.add(0, "scale-min", &a->scale_min, "RandomResizedCrop's smallest area fraction (timm: 0.08)");
  cli.add(0, "hflip", &a->hflip, "horizontal flip probability");
  cli.add(0, "crop-pct", &a->crop_pct, "evaluation: resize to image / crop-pct, then centre crop (timm: 0.875)");
  cli.add(0, "mixup", &a->mixup, "mixup alpha (0 = off; the DeiT / PyLO recipe: 0.8)");
  cli.add(0, "cutmix", &a->cutmix, "cutmix alpha (0 = off; the DeiT / PyLO recipe: 1.0)");
  cli.add(0, "smoothing", &a->smoothing, "label smoothing (0 = hard labels)");
  cli.add(0, "randaugment", &a->randaugment, "timm's RandAugment string, e.g. rand-m9-mstd0.5-inc1; empty = off");
  cli.section("image loading");
  cli.add(0, "threads", &a->threads, "decoding threads (0 = one per hardware thread)");
  cli.add(0, "decoder", &a->decoder,
          "stb (CPU threads, exact) | nvjpeg (the GPU's JPEG engine) | auto (nvjpeg where available)");
  cli.add(0, "shuffle", &a->shuffle, "shuffle buffer in samples (shard order is shuffled too)");
  cli.add(0, "synthetic", &a->synthetic,
          "train on a few fixed random batches held in memory (benchmarks: the model's step alone)");
}

std::vector<float> floats(const std::string& list, const char* flag, int want) {
  std::vector<float> v;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    v.push_back(std::strtof(item.c_str(), &end));
    if (item.empty() || *end != '\0' || !std::isfinite(v.back()))
      user_error("--", flag, " must be numbers separated by commas (got '", list, "').");
  }
  if (int(v.size()) != want && v.size() != 1)
    user_error("--", flag, " needs 1 or ", want, " values, one per channel (got ", v.size(), ").");
  v.resize(size_t(want), v[0]);
  return v;
}

VitShape model_shape(const Args& a) {
  VitShape s = vit_shape(a.model);
  if (a.qkv != "separate" && a.qkv != "fused") user_error("--qkv must be separate or fused (got '", a.qkv, "').");
  s.separate_qkv = a.qkv == "separate";
  s.image = a.image;
  s.in_chans = a.channels;
  s.classes = a.classes;
  if (a.channels != 1 && a.channels != 3) user_error("--channels must be 1 or 3 (got ", a.channels, ").");
  vit_param_table(s);  // checks the image, patch and classes
  return s;
}

ImageNorm image_norm(const Args& a) {
  ImageNorm n;
  const std::vector<float> m = floats(a.mean, "mean", a.channels), d = floats(a.stdev, "std", a.channels);
  for (int c = 0; c < a.channels; c++) {
    if (!(d[size_t(c)] > 0)) user_error("--std values must be positive (got ", d[size_t(c)], ").");
    n.mean[c] = m[size_t(c)];
    n.std[c] = d[size_t(c)];
  }
  return n;
}

// rank, world: data parallel, the training loader of process `rank` among `world` (its own shards and draws).
ImageLoaderOptions loader_options(const Args& a, bool train, int rank = 0, int world = 1) {
  ImageLoaderOptions o;
  o.rank = rank;
  o.world = world;
  o.batch = a.B;
  o.size = a.image;
  o.channels = a.channels;
  o.classes = a.classes;
  o.train = train;
  o.seed = uint64_t(a.seed) + uint64_t(rank) * 1000003u;  // rank 0's as one process's
  o.threads = a.threads;
  o.decoder = a.decoder;
  o.shuffle_buffer = a.shuffle;
  o.train_tf.rrc.scale_min = a.scale_min;
  o.train_tf.hflip = a.hflip;
  o.train_tf.use_randaugment = !a.randaugment.empty();
  if (o.train_tf.use_randaugment) o.train_tf.randaugment = parse_randaugment(a.randaugment);
  o.eval_tf.crop_pct = a.crop_pct;
  o.mix = a.mixup > 0 || a.cutmix > 0;
  o.mixup.mixup_alpha = a.mixup;
  o.mixup.cutmix_alpha = a.cutmix;
  o.mixup.label_smoothing = a.smoothing;
  return o;
}

// ViT's optimizer settings before the schedule and --set: timm's / DeiT's AdamW and the flags.
OptimOptions vit_optimizer_defaults(const TrainFlags& a) {
  OptimOptions o;
  o.adamw.lr = a.lr;
  o.adamw.weight_decay = a.wd;
  o.adafactor.weight_decay = 0.0;
  o.muon.lr = 0.02;  // Muon: Keller's lr for the hidden matrices, -l for the rest
  o.muon.aux.lr = a.lr;
  o.muon.aux.weight_decay = a.wd;
  if (a.lr_given) o.adafactor.lr = o.small_fc.lr = o.velo.lr = o.celo2.lr = o.elo.lr = o.elo_celo2.lr = a.lr;
  o.velo.num_steps = a.steps;
  if (!a.lopt_weights.empty())
    o.small_fc.weights = o.velo.weights = o.celo2.weights = o.elo.weights = o.elo_celo2.weights = a.lopt_weights;
  return o;
}

// Training FLOPs of one image (3x the forward's): the matmuls' 2 per weight and token (patch embedding per
// patch, 12 C^2 per block and token, the head for the cls token) and attention's 4 T^2 C per block.
double flops_per_image(const VitShape& s) {
  const double C = s.channels, T = s.tokens(), P = T - 1;
  const double fwd = 2 * (P * s.patch_dim() * C + s.layers * T * 12 * C * C + s.classes * C) + s.layers * 4 * T * T * C;
  return 3 * fwd;
}

struct Eval {
  double loss = 0, top1 = 0, top5 = 0;
};
// One pass over the validation shards: mean loss, top-1 and top-5 accuracy, from the logits in double.
Eval evaluate(VitBf16& model, const Args& a) {
  const ImageLoaderOptions o = loader_options(a, false);
  ImageLoader loader(list_shards(a.val), o, make_batch_decoder(o));
  std::vector<uint8_t> px(size_t(a.B) * a.image * a.image * a.channels);
  std::vector<int32_t> y(size_t(a.B));
  std::vector<float> logits(size_t(a.B) * a.classes);
  ImageMix none;
  Eval e;
  int64_t n = 0;
  for (int batch = 0; a.val_batches == 0 || batch < a.val_batches; batch++) {
    const int real = read_data([&] { return loader.next({px.data(), y.data(), nullptr, &none}); });
    if (real == 0) break;
    Batch b;
    b.pixels = px.data();
    model.set_batch(b, 0);
    model.forward(0);
    model.logits_to_host(logits.data());
    for (int i = 0; i < real; i++) {
      const float* z = &logits[size_t(i) * a.classes];
      const float mx = *std::max_element(z, z + a.classes);
      double sum = 0;
      int above = 0;  // classes scored higher than the label: its rank
      for (int c = 0; c < a.classes; c++) {
        sum += std::exp(double(z[c]) - mx);
        above += z[c] > z[y[size_t(i)]];
      }
      e.loss += std::log(sum) + mx - z[y[size_t(i)]];
      e.top1 += above < 1;
      e.top5 += above < 5;
    }
    n += real;
  }
  if (n == 0) user_error("no validation images in '", a.val, "'.");
  e.loss /= double(n);
  e.top1 /= double(n);
  e.top5 /= double(n);
  return e;
}

// Four fixed batches of random pixels and labels in pinned memory, cycled: the model's and the optimizer's
// step without the data pipeline (bench_vit.sh).
class SyntheticBatches {
 public:
  SyntheticBatches(const Args& a) : n_(size_t(a.B) * a.image * a.image * a.channels) {
    CUDA_CHECK(cudaMallocHost(&pixels_, 4 * n_));
    CUDA_CHECK(cudaMallocHost(&labels_, 4 * size_t(a.B) * sizeof(int32_t)));
    uint64_t x = uint64_t(a.seed);
    for (size_t i = 0; i < 4 * n_; i++)
      pixels_[i] = uint8_t((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
    for (size_t i = 0; i < 4 * size_t(a.B); i++) labels_[i] = int32_t(i * 7919 % size_t(a.classes));
    B_ = a.B;
  }
  ~SyntheticBatches() {
    cudaFreeHost(pixels_);
    cudaFreeHost(labels_);
  }
  Batch next() {
    Batch b;
    b.pixels = pixels_ + size_t(k_) * n_;
    b.targets = labels_ + size_t(k_) * size_t(B_);
    k_ = (k_ + 1) % 4;
    return b;
  }

 private:
  size_t n_;
  int B_ = 0, k_ = 0;
  uint8_t* pixels_ = nullptr;
  int32_t* labels_ = nullptr;
};

struct Inputs {
  std::unique_ptr<DataParallel> dp;  // this process among the others (one process without a launcher)
  int accum = 1;
  VitShape shape;
  ImageNorm norm;
  OptimOptions options;
  ParamTable table;
  std::unique_ptr<ImageLoader> train;
  std::unique_ptr<SectionReader> resume;
  std::unique_ptr<SectionReader> rank_resume;  // data parallel, ranks > 0: the rank's own file
  TrainState state;
};

// Everything read and checked before the GPU is touched: a mistake costs no GPU time.
Inputs prepare(Args& a) {
  Inputs in;
  if (a.B < 1 || a.steps < 1) user_error("-b and -x must be >= 1.");
  check_train_flags(a);
  if (a.threads < 0 || a.shuffle < 0) user_error("--threads and --shuffle must be >= 0.");
  check_decoder_option(a.decoder);
  const ProcessGroup g = process_group_from_env();
  if (g.rank > 0) {  // rank 0 alone logs and evaluates; every rank writes its part of a checkpoint
    a.log.clear();
    a.val_every = 0;
  }
  if (g.world > 1) a.micro_batch = "-b * " + std::to_string(g.world) + " processes";
  if (a.dropout > 0) user_error("this ViT has no dropout (timm's ViT defaults have none); leave out --dropout.");
  if (a.mixup < 0 || a.cutmix < 0 || !(a.smoothing >= 0 && a.smoothing < 1))
    user_error("--mixup and --cutmix must be >= 0 and --smoothing in [0, 1).");
  in.accum = resolve_batching(&a, int64_t(a.B) * g.world);
  in.shape = model_shape(a);
  in.norm = image_norm(a);
  in.options = train_optimizer_options(a, vit_optimizer_defaults(a));
  check_train_optimizer(a, in.options);
  in.table = vit_param_table(in.shape);
  in.dp = std::make_unique<DataParallel>(a, in.table);
  if (a.synthetic) {
    if (!a.resume.empty()) user_error("--synthetic runs cannot be resumed; leave out --resume.");
    a.val.clear();
    return in;
  }
  const ImageLoaderOptions train_options = loader_options(a, true, g.rank, g.world);
  in.train = std::make_unique<ImageLoader>(list_shards(a.train), train_options, make_batch_decoder(train_options));
  if (!a.val.empty() && a.val_every > 0) list_shards(a.val);  // the shards exist
  if (!a.resume.empty()) {
    in.resume = std::make_unique<SectionReader>(a.resume);
    check_checkpoint_params(*in.resume, in.table, "-e, --image, --channels, --classes and --qkv");
    in.state = read_train_state(*in.resume);
    in.rank_resume = in.dp->check_resume(*in.resume, in.table, &in.state);
    in.train->seek(ImageLoader::Position::from_ints(in.state.data));
  }
  if (!a.ckpt_dir.empty()) prepare_ckpt_dir(a.ckpt_dir);
  return in;
}

void print_header(const Args& a, const Inputs& in, const DevicePeak& peak) {
  std::printf(
      "train_vit | %s | %s %dx%dx%d q/k/v %s, %d tokens, %.2fM params | %s | batch %d x %d accum = %lld images/step | "
      "%lld steps\n",
      peak.name.c_str(), a.model.c_str(), a.image, a.image, a.channels, a.qkv.c_str(), in.shape.tokens(),
      in.table.num_params() / 1e6, a.optimizer.c_str(), a.B, in.accum, (long long)a.total_batch, (long long)a.steps);
  std::printf("MFU against %.0f TFLOP/s bf16 (%s)\n", peak.flops / 1e12, peak.how.c_str());
  std::printf("augmentation: crop scale >= %g, flip %g, mixup %g, cutmix %g, smoothing %g%s%s\n", a.scale_min, a.hflip,
              a.mixup, a.cutmix, a.smoothing, a.randaugment.empty() ? "" : ", ", a.randaugment.c_str());
  if (a.overlap) std::printf("optimizer: each block's tensors step during backward (--overlap)\n");
  if (in.dp->on()) std::printf("data parallel: %s\n", in.dp->describe().c_str());
}

int run(Args& a) {
  Inputs in = prepare(a);
  DataParallel& dp = *in.dp;
  dp.connect(a.nccl_id_file);  // before anything makes a context on another GPU
  TrainState& state = in.state;
  const DevicePeak peak = cuda_device_available() ? device_peak_bf16() : DevicePeak{};
  TrainLog log(a.log, peak.flops * dp.world(), flops_per_image(in.shape) * double(a.total_batch), double(a.total_batch),
               "img");
  if (!cuda_device_available()) user_error("needs a CUDA GPU and none is visible.");
  const ParamTable table = dp.layout(in.table);
  Arena arena(table, true);
  const std::vector<float> init = init_params(table, uint64_t(a.seed));
  for (const auto& t : table.tensors()) arena.set_param(t.index, &init[size_t(t.offset)]);
  VitBf16 model(in.shape, arena, a.B, in.norm);
  const std::vector<std::vector<int>> groups = hook_groups(table, vit_tensors(table, in.shape).blocks);
  std::unique_ptr<Optimizer> opt = make_train_optimizer(a, in.options, arena, groups, dp.owned(), dp.cross());
  GradClipper clipper(arena, float(a.clip), dp.owned(), dp.cross());
  if (in.resume) {
    load_checkpoint(*in.resume, arena, model, *opt, dp.sharded() ? in.rank_resume.get() : nullptr);
    std::printf("resumed from %s at step %lld\n", a.resume.c_str(), (long long)state.step);
  }
  catch_stop_signals();
  print_header(a, in, peak);

  std::unique_ptr<ImagePrefetcher> batches;
  std::unique_ptr<SyntheticBatches> synthetic;
  if (a.synthetic)
    synthetic = std::make_unique<SyntheticBatches>(a);
  else
    batches = std::make_unique<ImagePrefetcher>(*in.train);
  auto next_batch = [&] {
    if (synthetic) return synthetic->next();
    const ImagePrefetcher::Batch p = read_data([&] { return batches->next(); });
    Batch b;
    b.pixels = p.pixels;
    b.targets = p.labels;
    b.soft_targets = p.soft_targets;
    b.mix = p.mix;
    return b;
  };
  const BatchSource source{next_batch, [&](cudaStream_t s) {
                             if (batches) batches->release(s);
                           }};
  StepRunner runner(model, *opt, clipper, a.clip > 0, in.accum, a.cuda_graph, a.overlap, dp.comm(), groups, dp.plan());
  const Checkpointer ckpt(a.ckpt_dir, arena, model, *opt, &dp);
  auto checkpoint = [&](int64_t step) { return ckpt.save(step, state); };
  const int64_t step0 = state.step;
  for (int64_t step = step0; step < a.steps; step++) {
    const TrainState start = state;
    try {
      if (!a.val.empty() && a.val_every > 0 && (step % a.val_every == 0 || step + 1 == a.steps)) {
        const Eval e = evaluate(model, a);
        log.validation(step, float(e.loss), e.top1, e.top5);
      }
      const StepRunner::Result r = runner.run(source);
      if (!std::isfinite(r.loss))
        user_error("the loss became ", r.loss, " at step ", step, "; lower the learning rate (-l).");
      log.step({step + 1, a.steps, r.loss, r.grad_norm, in.options.schedule.factor(step), r.ms, r.opt_ms});
    } catch (const DataError& e) {
      // Several processes: the others are in the next collective; exit, and the launcher ends them.
      if (a.ckpt_dir.empty() || step == step0 || dp.world() > 1) throw;
      state = start;
      user_error(data_error_saved(e.what(), step, checkpoint(step)));
    }
    if (batches) state.data = batches->position().to_ints();
    if (a.ckpt_every > 0 && (step + 1) % a.ckpt_every == 0) checkpoint(step + 1);
    if (dp.any(stop_requested())) {  // every process stops after the same step
      std::printf("signal received: stopping after step %lld\n", (long long)step + 1);
      checkpoint(step + 1);
      return 0;
    }
  }
  if (in.train && in.train->skipped() > 0)
    std::printf("skipped %lld undecodable images\n", (long long)in.train->skipped());
  checkpoint(a.steps);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli(
      "train_vit",
      "Pretrains a ViT on WebDataset image shards (prepare the default data with scripts/prepare_fashion_mnist.sh).");
  add_flags(cli, &a);
  cli.set_epilogue(options_help(vit_optimizer_defaults(a)));
  return run_program("train_vit", cli, argc, argv, [&] {
    a.lr_given = cli.given("lr");
    return run(a);
  });
}
