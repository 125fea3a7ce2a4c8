// make_imagenet_like: real photographs -> an ImageNet-like benchmark corpus for the image pipeline, staged
// as WebDataset members (scripts/prepare_imagenet_like.sh packs them into imagenet1k-train-NNNN.tar).
//
// Sample i is a random crop of one of the photos (the crop at the output's aspect ratio, 30-100% of the
// largest that fits), resized with the antialiased bilinear resampler and re-encoded with ImageNet's
// statistics: about 500 x 375 pixels on average (70% with the long side 500, the rest 160-800; 4:3, 3:2,
// 1:1 or other ratios, a quarter portrait), JPEG quality 85-95 (stb writes 4:2:0 chroma up to 90, 4:4:4
// above), some gray JPEGs and PNGs named .jpg. Labels are random in [0, 1000). Every draw comes from
// Rng::derive(seed, kSynthetic, 0, i), so the corpus is the same for any thread count.
//
// Writes <out>/<shard>/<key>.jpg, .cls (decimal label) and .json (metadata), keys %08d in sample order,
// shards %04d of --per-shard samples; and the lists of members the script re-encodes with jpegtran, for
// what stb_image_write cannot write: <out>/grayscale.txt (one-component JPEGs; stb writes gray as YCbCr
// with neutral chroma) and <out>/progressive.txt (stb writes baseline only). Ends with one JSON line of
// statistics. Bad flags are refused before anything is created; after an error the folders this run created
// are removed.
//
//   build/make_imagenet_like -i "photos/*.jpg" --out stage -n 500 --per-shard 200
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/cli.h"
#include "common/error.h"
#include "common/tool_errors.h"
#include "data/augment.h"
#include "data/image_decode.h"
#include "data/image_encode.h"
#include "data/image_loader.h"
#include "data/resample.h"
#include "data/rng.h"
#include "data/token_shards.h"

namespace {
struct Options {
  std::vector<std::string> inputs;
  std::string out;
  int64_t images = 20000;
  int per_shard = 2000, threads = 0;
  int64_t seed = 1;
  double gray_pct = 3.0, png_pct = 0.5, progressive_pct = 2.0;
};

// What sample i will be; drawn before any pixel work, so that samples can be grouped by photo.
struct Spec {
  int source = 0, label = 0, w = 0, h = 0, quality = 90;
  bool gray = false, png = false, progressive = false;
  Rng rng{0};  // continues with the crop position
};

Spec draw_spec(const Options& o, int sources, int64_t i) {
  Spec s;
  s.rng = Rng::derive(uint64_t(o.seed), RngStream::kSynthetic, 0, uint64_t(i));
  Rng& r = s.rng;
  s.source = int(r.below(uint32_t(sources)));
  s.label = int(r.below(1000));
  const int long_side = r.bernoulli(0.7) ? 500 : 160 + int(r.below(641));
  const double u = r.uniform();
  const double ratio = u < 0.6 ? 4.0 / 3.0 : u < 0.85 ? 1.5 : u < 0.9 ? 1.0 : r.uniform(1.1, 1.8);
  s.w = long_side;
  s.h = std::max(1, round_half_even(long_side / ratio));
  if (r.bernoulli(0.25)) std::swap(s.w, s.h);
  s.quality = 85 + int(r.below(11));
  s.gray = r.uniform() * 100.0 < o.gray_pct;
  s.png = r.uniform() * 100.0 < o.png_pct;
  s.progressive = !s.png && r.uniform() * 100.0 < o.progressive_pct;
  return s;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) user_error("cannot open photo '", path, "'.");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  f.close();
  if (!f) user_error("cannot write '", path, "' (disk full, or the folder is not writable?).");
}

// A crop of `photo` at the spec's aspect ratio, resized to w x h, gray if the spec says so.
Image render(const Image& photo, Spec& s) {
  const double ar = double(s.w) / s.h;
  const double max_w = std::min(double(photo.width), photo.height * ar), f = s.rng.uniform(0.3, 1.0);
  const int cw = std::clamp(round_half_even(max_w * f), 1, photo.width);
  const int ch = std::clamp(round_half_even(cw / ar), 1, photo.height);
  const Box box{int(s.rng.below(uint32_t(photo.width - cw + 1))), int(s.rng.below(uint32_t(photo.height - ch + 1))), cw,
                ch};
  std::vector<float> px(size_t(s.w) * size_t(s.h) * 3);
  resample(photo, box, s.w, s.h, Filter::kBilinear, px.data(), nullptr);
  Image out(s.w, s.h, s.gray ? 1 : 3);
  for (size_t p = 0; p < size_t(s.w) * size_t(s.h); p++) {
    const float* v = &px[p * 3];
    if (s.gray)
      out.pixels[p] = uint8_t(std::lround(0.299f * v[0] + 0.587f * v[1] + 0.114f * v[2]));  // ITU-R BT.601 luma
    else
      for (int c = 0; c < 3; c++) out.pixels[p * 3 + size_t(c)] = uint8_t(std::lround(v[c]));
  }
  return out;
}

struct Stats {
  int64_t images = 0, gray = 0, png = 0, progressive = 0;
  double pixels_w = 0, pixels_h = 0, bytes = 0;
  void add(const Stats& st) {
    images += st.images;
    gray += st.gray;
    png += st.png;
    progressive += st.progressive;
    pixels_w += st.pixels_w;
    pixels_h += st.pixels_h;
    bytes += st.bytes;
  }
};

std::string shard_dir(const Options& o, int64_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "/%04lld", (long long)(i / o.per_shard));
  return o.out + name;
}

void write_sample(const Options& o, int64_t i, Spec& s, const std::vector<std::string>& photos, const Image& photo,
                  Stats* st) {
  const Image img = render(photo, s);
  const std::string bytes = s.png ? encode_png(img) : encode_jpeg(img, s.quality);
  char key[32];
  std::snprintf(key, sizeof key, "%08lld", (long long)i);
  const std::string base = shard_dir(o, i) + "/" + key, source = photos[size_t(s.source)];
  write_bytes(base + ".jpg", bytes);
  write_bytes(base + ".cls", std::to_string(s.label));
  write_bytes(
      base + ".json",
      str_cat("{\"key\": \"", key, "\", \"label\": ", s.label, ", \"width\": ", s.w, ", \"height\": ", s.h,
              ", \"format\": \"", s.png ? "png" : "jpeg", "\", \"quality\": ", s.png ? 0 : s.quality,
              ", \"gray\": ", s.gray ? "true" : "false", ", \"progressive\": ", s.progressive ? "true" : "false",
              ", \"source\": \"", source.substr(source.find_last_of('/') + 1), "\"}"));
  st->images++;
  st->gray += s.gray;
  st->png += s.png;
  st->progressive += s.progressive;
  st->pixels_w += s.w;
  st->pixels_h += s.h;
  st->bytes += double(bytes.size());
}

constexpr int64_t kMaxImages = 100000000;  // a hundred million samples: 80 ImageNets

void check_options(const Options& o) {
  if (o.out.empty()) user_error("--out is required: the staging folder to write.");
  if (o.images < 1 || o.images > kMaxImages || o.per_shard < 1)
    user_error("-n must be in [1, ", kMaxImages, "] and --per-shard at least 1.");
  if (o.threads < 0 || o.threads > ImageLoaderOptions::kMaxThreads)
    user_error("--threads must be in [0, ", ImageLoaderOptions::kMaxThreads, "] (0: one per core), not ", o.threads,
               ".");
  const std::pair<const char*, double> pcts[] = {
      {"--gray-pct", o.gray_pct}, {"--png-pct", o.png_pct}, {"--progressive-pct", o.progressive_pct}};
  for (const auto& [flag, v] : pcts)
    if (!(v >= 0 && v <= 100)) user_error(flag, " must be a percentage in [0, 100], not ", v, ".");
}

// The folders this run made, removed with their contents unless release() is called (after success).
class CreatedFolders {
 public:
  ~CreatedFolders() {
    std::error_code ec;
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) std::filesystem::remove_all(*it, ec);
  }
  // Creates `dir` if it is missing (an existing one is kept, and kept after an error).
  void make(const std::string& dir, const char* hint) {
    if (mkdir(dir.c_str(), 0755) == 0)
      made_.push_back(dir);
    else if (errno != EEXIST)
      user_error("cannot create the folder '", dir, "': ", std::strerror(errno), "; ", hint);
  }
  void release() { made_.clear(); }

 private:
  std::vector<std::string> made_;
};

// Decodes each photo once, on --threads threads, and writes every sample cut from it (by_photo[p]: the
// samples of photo p); the first thread's error ends the run. Returns the samples' statistics.
Stats write_samples(const Options& o, const std::vector<std::string>& photos,
                    const std::vector<std::vector<int64_t>>& by_photo) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Stats total;
  std::string first_error;
  auto worker = [&] {
    Stats st;
    try {
      for (size_t p; (p = next++) < photos.size();) {
        if (by_photo[p].empty()) continue;
        const std::string bytes = read_bytes(photos[p]);
        const Image photo = decode_image(bytes.data(), bytes.size(), 3, photos[p]);
        for (int64_t i : by_photo[p]) {
          Spec s = draw_spec(o, int(photos.size()), i);
          write_sample(o, i, s, photos, photo, &st);
        }
      }
    } catch (const std::exception& e) {  // out of memory too: a thread must not end the program
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.empty())
        first_error = dynamic_cast<const UserError*>(&e) ? e.what() : str_cat("failed: ", e.what(), ".");
      next = photos.size();
    }
    std::lock_guard<std::mutex> lock(mu);
    total.add(st);
  };
  const int n_threads =
      o.threads > 0 ? o.threads
                    : std::min(ImageLoaderOptions::kMaxThreads, int(std::max(1u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  try {
    for (int t = 0; t < n_threads; t++) pool.emplace_back(worker);
  } catch (const std::system_error& e) {  // the started threads stop at their next photo, then join
    next = photos.size();
    for (std::thread& t : pool) t.join();
    user_error("could not start thread ", pool.size() + 1, " of ", n_threads, " (", e.what(),
               "); give fewer with --threads.");
  }
  for (std::thread& t : pool) t.join();
  if (!first_error.empty()) throw UserError(first_error);
  return total;
}

// grayscale.txt and progressive.txt: the members the script re-encodes with jpegtran, in key order.
void write_reencode_lists(const Options& o, const std::vector<std::string>& photos) {
  std::string gray, progressive;
  for (int64_t i = 0; i < o.images; i++) {
    const Spec s = draw_spec(o, int(photos.size()), i);
    char member[64];
    std::snprintf(member, sizeof member, "%s/%08lld.jpg\n", shard_dir(o, i).substr(o.out.size() + 1).c_str(),
                  (long long)i);
    if (s.gray && !s.png) gray += member;
    if (s.progressive) progressive += member;
  }
  write_bytes(o.out + "/grayscale.txt", gray);
  write_bytes(o.out + "/progressive.txt", progressive);
}

void run(const Options& o) {
  std::vector<std::string> photos;
  for (const std::string& pattern : o.inputs)
    for (const std::string& f : glob_files(pattern)) photos.push_back(f);
  if (photos.empty()) user_error("no photos given; pass them with -i (files or glob patterns).");
  CreatedFolders folders;
  folders.make(o.out, "check that its parent exists and is writable.");
  for (int64_t s = 0; s * o.per_shard < o.images; s++)
    folders.make(shard_dir(o, s * o.per_shard), "disk full, or not writable?");
  // Group the samples by photo, so each photo is decoded once.
  std::vector<std::vector<int64_t>> by_photo(photos.size());
  for (int64_t i = 0; i < o.images; i++) by_photo[size_t(draw_spec(o, int(photos.size()), i).source)].push_back(i);
  const Stats total = write_samples(o, photos, by_photo);
  write_reencode_lists(o, photos);
  const double n = double(total.images);
  std::printf(
      "{\"images\": %lld, \"photos\": %zu, \"mean_width\": %.1f, \"mean_height\": %.1f, \"mean_bytes\": %.0f, "
      "\"gray\": %lld, \"png\": %lld, \"progressive\": %lld}\n",
      (long long)total.images, photos.size(), total.pixels_w / n, total.pixels_h / n, total.bytes / n,
      (long long)total.gray, (long long)total.png, (long long)total.progressive);
  folders.release();
}
}  // namespace

int main(int argc, char** argv) {
  Options o;
  Cli cli("make_imagenet_like",
          "Crops real photos into an ImageNet-like corpus of WebDataset members (<key>.jpg, .cls, .json) in "
          "shard folders; scripts/prepare_imagenet_like.sh packs them into tar shards.");
  cli.add('i', "input", &o.inputs, "photo file or glob pattern (repeatable; JPEG or PNG)");
  cli.add(0, "out", &o.out, "staging folder (created; shard folders 0000, 0001, ... inside)");
  cli.add('n', "images", &o.images, "number of samples");
  cli.add(0, "per-shard", &o.per_shard, "samples per shard");
  cli.add(0, "seed", &o.seed, "random seed (the corpus is a function of the photos, the flags and this)");
  cli.add(0, "threads", &o.threads, "worker threads (0 = one per core)");
  cli.add(0, "gray-pct", &o.gray_pct, "percent of samples written as gray JPEGs");
  cli.add(0, "png-pct", &o.png_pct, "percent of samples written as PNG under a .jpg name");
  cli.add(0, "progressive-pct", &o.progressive_pct, "percent of JPEG samples listed for progressive re-encoding");
  try {
    if (!cli.parse(argc, argv)) return 0;
    check_options(o);
    run(o);
  } catch (...) {
    return report_tool_error("make_imagenet_like");
  }
  return 0;
}
