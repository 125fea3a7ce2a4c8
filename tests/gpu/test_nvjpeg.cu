// The nvJPEG path (data/nvjpeg_decoder, data/gpu_resize) against the CPU path (stb_image + data/augment):
//  - the resize kernel on the CPU's own decoded pixels: every byte within 1 of resize_u8's, at most 1 in
//    1000 not equal (bit-identical is expected: the same taps and the same float operations, no FMA);
//  - the hardware decoder's pixels against stb's: baseline JPEGs decoded, with stb's sizes, within a decoder's
//    difference (4:4:4: >= 99% within 2, mean |d| <= 0.5; 4:2:0: >= 95% within 3, mean <= 1.5), a progressive
//    JPEG and a PNG refused;
//  - the loader end to end (decode, crop, flip, resize) on 4:4:4 JPEGs with progressive and PNG fallbacks:
//    >= 99% of the bytes within 1 of the stb loader's, mean |d| <= 0.3, the same labels, the JPEGs the engine
//    takes (at least 10 of 12, odd and small sizes among them) decoded on the GPU.
// The measured differences are printed ("info:"). Tests that need the hardware decoder skip without it.
#include <cmath>
#include <cstdio>
#include <random>

#include "common/device_buffer.h"
#include "data/gpu_resize.h"
#include "data/image_decode.h"
#include "data/image_encode.h"
#include "data/nvjpeg_decoder.h"
#include "data/tar_writer.h"
#include "tests/jpeg_samples.h"
#include "tests/test_util.h"

namespace {
// Smooth colours under pixel noise: a JPEG of it has photo-like coefficients.
Image photo_like(int w, int h, int channels, unsigned seed) {
  Image img(w, h, channels);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-8, 8);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      const int n = noise(rng);
      const double v[3] = {128 + 90 * std::sin(x / 23.0 + y / 41.0 + seed), 120 + 80 * std::cos(x / 31.0 - y / 17.0),
                           110 + 70 * std::sin((x + y) / 29.0)};
      for (int c = 0; c < channels; c++) img.at(x, y, c) = uint8_t(std::clamp(int(v[c]) + n, 0, 255));
    }
  return img;
}

struct Diff {
  int64_t n = 0, within[4] = {};
  int max = 0;
  double sum = 0;
  void add(const uint8_t* a, const uint8_t* b, size_t count) {
    for (size_t i = 0; i < count; i++) {
      const int d = std::abs(int(a[i]) - int(b[i]));
      for (int k = 0; k < 4; k++) within[k] += d <= k;
      max = std::max(max, d);
      sum += d;
      n++;
    }
  }
  void merge(const Diff& o) {
    n += o.n;
    for (int k = 0; k < 4; k++) within[k] += o.within[k];
    max = std::max(max, o.max);
    sum += o.sum;
  }
  double frac(int k) const { return n ? double(within[k]) / double(n) : 1.0; }
  double mean() const { return n ? sum / double(n) : 0.0; }
  std::string str() const {
    return str_cat(n, " values: equal ", 100 * frac(0), "%, within 1 ", 100 * frac(1), "%, within 2 ", 100 * frac(2),
                   "%, within 3 ", 100 * frac(3), "%, max ", max, ", mean ", mean());
  }
};

std::string bytes(const char* s, size_t n) { return std::string(s, n - 1); }  // a literal without its NUL

// Resizes `img` on the GPU with each geometry (the source rows padded, to check the pitch).
std::vector<uint8_t> resize_on_gpu(const Image& img, const std::vector<ResizeGeometry>& gs, int size, Filter f) {
  const size_t row = size_t(img.width) * img.channels, pitch = row + 7, px = size_t(size) * size * img.channels;
  std::vector<uint8_t> padded(pitch * img.height);
  for (int y = 0; y < img.height; y++) std::copy_n(&img.pixels[y * row], row, &padded[y * pitch]);
  DeviceBuffer<uint8_t> src(padded.size()), dst(gs.size() * px);
  src.upload(padded);
  std::vector<DeviceResizeJob> jobs;
  for (size_t k = 0; k < gs.size(); k++) jobs.push_back({src.get(), pitch, gs[k], dst.get() + k * px});
  DeviceBuffer<DeviceResizeJob> djobs(jobs.size());
  djobs.upload(jobs);
  resize_u8_device(djobs.get(), int(jobs.size()), size, img.channels, f, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  return dst.download();
}

bool hardware_decoder(std::string* why) { return NvjpegDecoder::available(why); }
}  // namespace

TEST(NvjpegResize, KernelMatchesTheCpuResampler) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  Diff all;
  for (int channels : {3, 1})
    for (Filter f : {Filter::kBilinear, Filter::kBicubic})
      for (auto [w, h] : {std::pair{500, 375}, std::pair{97, 61}, std::pair{64, 300}})
        for (int size : {224, 32}) {
          const Image img = photo_like(w, h, channels, unsigned(w + h));
          TrainTransformOptions t;
          t.size = size;
          EvalTransformOptions e;
          e.size = size;
          std::vector<ResizeGeometry> gs = {eval_resize_geometry(w, h, e)};
          for (uint64_t i = 0; i < 8; i++) {
            Rng rng = Rng::derive(9, RngStream::kAugment, 0, i);
            gs.push_back(train_geometry(w, h, t, rng));
          }
          const std::vector<uint8_t> got = resize_on_gpu(img, gs, size, f);
          const size_t px = size_t(size) * size * channels;
          std::vector<uint8_t> want(px);
          Diff d;
          for (size_t k = 0; k < gs.size(); k++) {
            resize_u8(img, gs[k], size, f, want.data(), nullptr);
            d.add(&got[k * px], want.data(), px);
          }
          EXPECT_LE(d.max, 1) << w << "x" << h << "x" << channels << " -> " << size << ": " << d.str();
          all.merge(d);
        }
  std::printf("info: GPU resize vs CPU resize_u8: %s\n", all.str().c_str());
  EXPECT_GE(all.frac(0), 0.999) << all.str();
}

// Baseline JPEGs (4:4:4 and 4:2:0, odd sizes, colour and gray output) decode with stb's sizes and nearly its
// pixels; a progressive JPEG and a PNG are left to the CPU.
TEST(Nvjpeg, DecodesBaselineJpegsAndRefusesProgressiveAndPng) {
  std::string why;
  if (!hardware_decoder(&why)) GTEST_SKIP() << "nvJPEG's hardware decoder is not available: " << why;
  struct Case {
    std::string name, data;
    bool hardware;
    int subsampling;  // 444 or 420 (stb_image_write: 4:4:4 above quality 90)
  };
  std::vector<Case> cases = {{"500x375 q95", encode_jpeg(photo_like(500, 375, 3, 1), 95), true, 444},
                             {"97x61 q95", encode_jpeg(photo_like(97, 61, 3, 2), 95), true, 444},
                             {"333x500 q85", encode_jpeg(photo_like(333, 500, 3, 3), 85), true, 420},
                             {"progressive", bytes(kGrayProgressiveJpeg, sizeof kGrayProgressiveJpeg), false, 0},
                             {"png", encode_png(photo_like(40, 30, 3, 4)), false, 0}};
  std::vector<EncodedImage> in;
  for (const Case& c : cases) in.push_back({reinterpret_cast<const uint8_t*>(c.data.data()), c.data.size()});
  for (int channels : {3, 1}) {
    SCOPED_TRACE(str_cat(channels, " channels"));
    std::unique_ptr<NvjpegDecoder> dec;
    try {
      dec = std::make_unique<NvjpegDecoder>(channels);
    } catch (const UserError& e) {
      ASSERT_EQ(channels, 1) << e.what();  // RGB output must work
      std::printf("info: no gray output: %s\n", e.what());
      continue;
    }
    std::vector<DeviceImage> out;
    dec->decode_batch(in, &out);
    CUDA_CHECK(cudaStreamSynchronize(dec->stream()));
    ASSERT_EQ(out.size(), cases.size());
    Diff d444, d420;
    for (size_t i = 0; i < cases.size(); i++) {
      const Case& c = cases[i];
      ASSERT_EQ(out[i].ok(), c.hardware) << c.name << ": " << out[i].why;
      if (!c.hardware) continue;
      const Image cpu = decode_image(c.data.data(), c.data.size(), channels, c.name);
      ASSERT_EQ(out[i].width, cpu.width) << c.name;
      ASSERT_EQ(out[i].height, cpu.height) << c.name;
      const size_t row = size_t(cpu.width) * channels;
      std::vector<uint8_t> got(out[i].pitch * cpu.height);
      CUDA_CHECK(cudaMemcpy(got.data(), out[i].pixels, got.size(), cudaMemcpyDeviceToHost));
      for (int y = 0; y < cpu.height; y++)
        (c.subsampling == 444 ? d444 : d420).add(&got[y * out[i].pitch], &cpu.pixels[y * row], row);
    }
    std::printf("info: hardware decode vs stb, %d channel(s), 4:4:4: %s\n", channels, d444.str().c_str());
    std::printf("info: hardware decode vs stb, %d channel(s), 4:2:0: %s\n", channels, d420.str().c_str());
    EXPECT_GE(d444.frac(2), 0.99) << d444.str();
    EXPECT_LE(d444.mean(), 0.5) << d444.str();
    EXPECT_GE(d420.frac(3), 0.95) << d420.str();
    EXPECT_LE(d420.mean(), 1.5) << d420.str();
  }
}

namespace {
// 12 baseline 4:4:4 JPEGs of various sizes, 2 progressive JPEGs and 2 PNGs (every eighth and ninth), as
// two shards; labels index % 5. `baseline`: the JPEGs.
std::vector<std::string> mixed_shards(const std::string& dir, std::vector<std::string>* baseline) {
  const int sizes[12][2] = {{500, 375}, {375, 500}, {320, 240}, {640, 480}, {97, 61},   {1000, 200},
                            {200, 900}, {256, 256}, {333, 500}, {500, 333}, {150, 120}, {48, 40}};
  std::vector<std::string> paths;
  for (int s = 0; s < 2; s++) {
    paths.push_back(dir + "/shard-" + std::to_string(s) + ".tar");
    TarWriter w(paths.back());
    for (int i = 0; i < 8; i++) {
      const int index = s * 8 + i;
      const std::string key = "img" + std::to_string(100 + index);
      if (i < 6) {
        const int* wh = sizes[s * 6 + i];
        baseline->push_back(encode_jpeg(photo_like(wh[0], wh[1], 3, unsigned(index)), 95));
        w.add(key + ".jpg", baseline->back());
      } else if (i == 6) {
        w.add(key + ".jpg", bytes(kGrayProgressiveJpeg, sizeof kGrayProgressiveJpeg));
      } else {
        w.add(key + ".png", encode_png(photo_like(60, 45, 3, unsigned(index))));
      }
      w.add(key + ".cls", std::to_string(index % 5));
    }
    w.commit();
  }
  return paths;
}

// How many of `images` the engine takes.
int taken_by_the_engine(const std::vector<std::string>& images) {
  std::vector<EncodedImage> in;
  for (const std::string& b : images) in.push_back({reinterpret_cast<const uint8_t*>(b.data()), b.size()});
  NvjpegDecoder dec(3);
  std::vector<DeviceImage> out;
  dec.decode_batch(in, &out);
  CUDA_CHECK(cudaStreamSynchronize(dec.stream()));
  int n = 0;
  for (const DeviceImage& d : out) n += d.ok();
  return n;
}

ImageLoaderOptions loader_options(bool train, const std::string& decoder) {
  ImageLoaderOptions o;
  o.batch = 8;
  o.size = 64;
  o.channels = 3;
  o.classes = 5;
  o.train = train;
  o.seed = 11;
  o.threads = 2;
  o.shuffle_buffer = train ? 6 : 0;
  o.decoder = decoder;
  return o;
}
}  // namespace

// The loader with --decoder nvjpeg against the stb loader: the same samples, labels and crops, bytes within
// the bound; in an evaluation pass every baseline JPEG goes to the GPU and the rest to stb.
TEST(Nvjpeg, LoaderMatchesTheStbLoader) {
  std::string why;
  if (!hardware_decoder(&why)) GTEST_SKIP() << "nvJPEG's hardware decoder is not available: " << why;
  TempDir dir("nvjpeg_loader_");
  std::vector<std::string> baseline;
  const std::vector<std::string> shards = mixed_shards(dir.path(), &baseline);
  const int taken = taken_by_the_engine(baseline);
  std::printf("info: the engine takes %d of the %zu baseline JPEGs\n", taken, baseline.size());
  EXPECT_GE(taken, 10);
  for (bool train : {true, false}) {
    SCOPED_TRACE(train ? "train" : "eval");
    const ImageLoaderOptions os = loader_options(train, "stb"), on = loader_options(train, "nvjpeg");
    ImageLoader cpu(shards, os), gpu(shards, on, make_batch_decoder(on));
    ASSERT_EQ(gpu.decoder_name(), "nvjpeg");
    const size_t px = size_t(8) * 64 * 64 * 3;
    std::vector<uint8_t> a(px), b(px);
    std::vector<int32_t> la(8), lb(8);
    std::vector<float> soft(8 * 5);
    ImageMix mix;
    Diff d;
    for (int batch = 0; batch < 2; batch++) {
      const int ra = cpu.next({a.data(), la.data(), soft.data(), &mix});
      const int rb = gpu.next({b.data(), lb.data(), soft.data(), &mix});
      ASSERT_EQ(ra, rb);
      EXPECT_EQ(la, lb) << "batch " << batch;
      d.add(b.data(), a.data(), px);
    }
    std::printf("info: nvjpeg loader vs stb loader (%s): %s\n", train ? "train" : "eval", d.str().c_str());
    EXPECT_GE(d.frac(1), 0.99) << d.str();
    EXPECT_LE(d.mean(), 0.3) << d.str();
    EXPECT_EQ(gpu.skipped(), 0);
    if (!train) EXPECT_EQ(gpu.device_decoded(), taken) << "the baseline JPEGs; progressive and PNG on the CPU";
  }
}
