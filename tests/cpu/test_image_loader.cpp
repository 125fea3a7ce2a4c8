// The image loader (data/image_loader): batches that do not depend on the thread count, exact resume
// from a position, an evaluation pass that serves every image once (the last batch padded, the real count
// returned), undecodable images skipped and counted (and a stream where nothing decodes stopped, not read
// forever), thread counts bounded and a failed thread start a UserError, not a hang; soft targets and mix
// draws for training; with a batch
// decoder (here a CPU stand-in for the GPU's), the same batches and the same fallbacks.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "common/temp_dir.h"
#include "data/image_decode.h"
#include "data/image_encode.h"
#include "data/image_loader.h"
#include "data/tar_writer.h"
#include "tests/test_util.h"

namespace {
constexpr int kSide = 12, kClasses = 5;

// Two shards of `per_shard` PNGs (3 channels) whose pixels encode their index, labels index % classes.
// bad: indices whose image bytes are not an image.
std::vector<std::string> make_shards(const std::string& dir, int per_shard, const std::set<int>& bad = {}) {
  std::vector<std::string> paths;
  for (int s = 0; s < 2; s++) {
    const std::string path = dir + "/shard-" + std::to_string(s) + ".tar";
    TarWriter w(path);
    for (int i = 0; i < per_shard; i++) {
      const int index = s * per_shard + i;
      Image img(kSide + index % 3, kSide, 3);  // mixed sizes
      for (size_t k = 0; k < img.pixels.size(); k++) img.pixels[k] = uint8_t((index * 37 + int(k) * 11) & 255);
      const std::string key = "img" + std::to_string(1000 + index);
      w.add(key + ".png", bad.count(index) ? std::string("not an image") : encode_png(img));
      w.add(key + ".cls", std::to_string(index % kClasses));
    }
    w.commit();
    paths.push_back(path);
  }
  return paths;
}

ImageLoaderOptions options(bool train, int threads) {
  ImageLoaderOptions o;
  o.batch = 4;
  o.size = 8;
  o.channels = 3;
  o.classes = kClasses;
  o.train = train;
  o.seed = 7;
  o.threads = threads;
  o.shuffle_buffer = train ? 6 : 0;
  o.mix = train;
  return o;
}

struct Got {
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  std::vector<float> soft;
  ImageMix mix;
  int real = 0;
};
Got next(ImageLoader& l) {
  const ImageLoaderOptions& o = l.options();
  Got g;
  g.pixels.resize(size_t(o.batch) * o.size * o.size * o.channels);
  g.labels.resize(size_t(o.batch));
  g.soft.resize(size_t(o.batch) * o.classes);
  g.real = l.next({g.pixels.data(), g.labels.data(), g.soft.data(), &g.mix});
  return g;
}
// A batch decoder that decodes with stb and resizes with resize_u8, as the CPU path does, and refuses a third
// of the images (by their size), as the GPU's refuses PNG and progressive JPEGs: the loader's batches must
// then be the CPU path's exactly.
class CpuBatchDecoder : public BatchImageDecoder {
 public:
  explicit CpuBatchDecoder(const ImageLoaderOptions& o) : o_(o) {}
  std::string name() const override { return "cpu-stand-in"; }
  void decode(const std::vector<EncodedImage>& images, std::vector<ImageSize>* sizes) override {
    decoded_.assign(images.size(), Image());
    sizes->assign(images.size(), ImageSize());
    std::string why;
    for (size_t i = 0; i < images.size(); i++)
      if (images[i].size % 3 != 0 && try_decode_image(images[i].data, images[i].size, o_.channels, &decoded_[i], &why))
        (*sizes)[i] = {decoded_[i].width, decoded_[i].height};
  }
  void transform(const std::vector<Job>& jobs) override {
    const Filter f = o_.train ? o_.train_tf.filter : o_.eval_tf.filter;
    for (const Job& j : jobs) resize_u8(decoded_.at(j.image), j.geometry, o_.size, f, j.out, nullptr);
  }

 private:
  ImageLoaderOptions o_;
  std::vector<Image> decoded_;
};

std::unique_ptr<BatchImageDecoder> stand_in(ImageLoaderOptions* o) {
  o->decoder = "nvjpeg";
  return std::make_unique<CpuBatchDecoder>(*o);
}

bool same(const Got& a, const Got& b) {
  return a.pixels == b.pixels && a.labels == b.labels && a.soft == b.soft && a.real == b.real &&
         std::memcmp(&a.mix, &b.mix, sizeof(ImageMix)) == 0;
}
}  // namespace

TEST(ImageLoader, BatchesDoNotDependOnThreads) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 10);
  ImageLoader one(shards, options(true, 1)), three(shards, options(true, 3));
  bool mixed = false;
  for (int i = 0; i < 8; i++) {  // past an epoch (20 images, 5 batches)
    const Got a = next(one), b = next(three);
    EXPECT_TRUE(same(a, b)) << "batch " << i;
    EXPECT_EQ(a.real, 4);
    mixed |= a.mix.mode != ImageMix::kNone;
    for (int r = 0; r < 4; r++) {
      float sum = 0;
      for (int c = 0; c < kClasses; c++) sum += a.soft[size_t(r) * kClasses + c];
      EXPECT_NEAR(sum, 1.0f, 1e-5f);
    }
  }
  EXPECT_TRUE(mixed) << "no batch drew a mixup or cutmix";
}

TEST(ImageLoader, ResumesExactly) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 10);
  ImageLoader a(shards, options(true, 2));
  for (int i = 0; i < 3; i++) next(a);
  const ImageLoader::Position at = a.position();
  std::vector<Got> rest;
  for (int i = 0; i < 6; i++) rest.push_back(next(a));
  ImageLoader b(shards, options(true, 2));
  b.seek(ImageLoader::Position::from_ints(at.to_ints()));
  for (int i = 0; i < 6; i++) EXPECT_TRUE(same(next(b), rest[size_t(i)])) << "batch " << i << " after the resume";
  ImageLoader c(shards, options(true, 2));  // and a fresh loader is not just repeating batch 0
  EXPECT_FALSE(same(next(c), rest[0]));
}

TEST(ImageLoader, EvaluationServesEveryImageOnceAndPads) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 7);  // 14 images: batches of 4, 4, 4, 2 (+2 padding)
  ImageLoader l(shards, options(false, 2));
  std::vector<int> reals;
  std::multiset<int> labels;
  Got g;
  while ((g = next(l)).real > 0) {
    reals.push_back(g.real);
    for (int r = 0; r < g.real; r++) labels.insert(g.labels[size_t(r)]);
    for (int r = g.real; r < 4; r++) {
      EXPECT_EQ(g.labels[size_t(r)], g.labels[0]) << "padding repeats the first image";
      EXPECT_EQ(0, std::memcmp(&g.pixels[size_t(r) * 8 * 8 * 3], &g.pixels[0], 8 * 8 * 3));
    }
  }
  EXPECT_EQ(reals, (std::vector<int>{4, 4, 4, 2}));
  std::multiset<int> want;
  for (int i = 0; i < 14; i++) want.insert(i % kClasses);
  EXPECT_EQ(labels, want);
  EXPECT_EQ(next(l).real, 0) << "the pass stays over";
}

TEST(ImageLoader, SkipsAndCountsUndecodableImages) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 7, {2, 9, 13});  // the last one in the final batch
  ImageLoader l(shards, options(false, 2));
  int total = 0;
  Got g;
  while ((g = next(l)).real > 0) total += g.real;
  EXPECT_EQ(total, 11);
  EXPECT_EQ(l.skipped(), 3);
}

TEST(ImageLoader, RefusesBadOptions) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 2);
  ImageLoaderOptions o = options(true, 1);
  o.channels = 2;
  expect_user_error([&] { ImageLoader l(shards, o); }, "channels 1 or 3");
  o = options(true, 1);
  o.train_tf.hflip = 1.5;
  expect_user_error([&] { ImageLoader l(shards, o); }, "");
}

// The batch decoder's images get the CPU path's draws (crop, flip, RandAugment after it) and the rest go to
// the threads: training batches with RandAugment and an evaluation pass with undecodable images are the
// CPU path's exactly.
TEST(ImageLoader, BatchDecoderGivesTheCpuPathsBatches) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 10, {3, 12});
  for (bool train : {true, false}) {
    SCOPED_TRACE(train ? "train" : "eval");
    ImageLoaderOptions o = options(train, 2), od = o;
    o.train_tf.use_randaugment = od.train_tf.use_randaugment = true;
    o.train_tf.randaugment = od.train_tf.randaugment = parse_randaugment("rand-m9-mstd0.5-inc1");
    ImageLoader cpu(shards, o), dev(shards, od, stand_in(&od));
    EXPECT_EQ(dev.decoder_name(), "cpu-stand-in");
    for (int i = 0; i < 6; i++) {
      const Got a = next(cpu), b = next(dev);
      EXPECT_TRUE(same(a, b)) << "batch " << i;
    }
    EXPECT_EQ(cpu.skipped(), dev.skipped());
    EXPECT_EQ(cpu.device_decoded(), 0);
    EXPECT_GT(dev.device_decoded(), 0);
    EXPECT_LT(dev.device_decoded(), dev.position().served);  // some went to the threads
  }
}

TEST(ImageLoader, RefusesUnknownDecoders) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 2);
  ImageLoaderOptions o = options(true, 1);
  o.decoder = "gpu";
  expect_user_error([&] { ImageLoader l(shards, o); }, "image decoder 'gpu' is unknown; use stb, nvjpeg");
  o.decoder = "nvjpeg";
  expect_user_error([&] { ImageLoader l(shards, o); }, "needs the GPU decoder");
  o.decoder = "auto";  // no batch decoder: stb
  ImageLoader l(shards, o);
  EXPECT_EQ(l.decoder_name(), "stb");
}

// The rest run in a child process (a death test) with an alarm: a loader that hangs is killed, and the test
// fails instead of hanging the suite.
namespace {
// Runs `body` to its UserError and exits 1 with the message on stderr; 2 if it returned, 3 if more than
// `max_lines` lines reached stderr before the error.
template <class F>
void expect_sentence_in_child(F body, int max_lines) {
  alarm(60);
  std::FILE* capture = std::tmpfile();  // stderr of the body (gtest's capturer is the death test's own)
  const int saved = dup(2);
  if (!capture || saved < 0 || dup2(fileno(capture), 2) < 0) std::_Exit(5);
  std::string msg;
  try {
    body();
  } catch (const UserError& e) {
    msg = e.what();
  }
  std::fflush(stderr);
  dup2(saved, 2);
  std::rewind(capture);
  long lines = 0;
  for (int c; (c = std::fgetc(capture)) != EOF;) lines += c == '\n';
  std::fprintf(stderr, "%s\n%ld lines before it\n", msg.c_str(), lines);
  std::_Exit(msg.empty() ? 2 : lines > max_lines ? 3 : 1);
}
}  // namespace

TEST(ImageLoaderDeathTest, StopsWhenNothingInTheTrainingStreamDecodes) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 3, {0, 1, 2, 3, 4, 5});
  auto body = [&] {
    ImageLoader l(shards, options(true, 2));
    for (int i = 0; i < 100000; i++) next(l);
  };
  EXPECT_EXIT(expect_sentence_in_child(body, int(ImageLoaderOptions::kListedSkips)), testing::ExitedWithCode(1),
              "no image decodes: the last [0-9]+ images read were skipped \\(a whole epoch, of the 2 shard\\(s\\) "
              "from '.*shard-.\\.tar'; the latest: 'img100.' in '.*shard-.\\.tar': not a JPEG or PNG image\\)");
}

TEST(ImageLoaderDeathTest, StopsWhenNothingInAnEvaluationPassDecodes) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 3, {0, 1, 2, 3, 4, 5});
  auto body = [&] {
    ImageLoader l(shards, options(false, 1));
    for (int i = 0; i < 100000; i++) next(l);
  };
  EXPECT_EXIT(expect_sentence_in_child(body, int(ImageLoaderOptions::kListedSkips)), testing::ExitedWithCode(1),
              "no image decodes: the last 6 images read were skipped \\(the whole pass");
}

TEST(ImageLoader, ListsTheFirstSkipsOnly) {
  TempDir dir("image_loader_");
  std::set<int> bad;
  for (int i = 0; i < 40; i += 2) bad.insert(i);  // every other image: the run goes on
  const auto shards = make_shards(dir.path(), 20, bad);
  ImageLoader l(shards, options(false, 2));
  testing::internal::CaptureStderr();
  int total = 0;
  for (Got g; (g = next(l)).real > 0;) total += g.real;
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(total, 20);
  EXPECT_EQ(l.skipped(), 20);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), ImageLoaderOptions::kListedSkips) << err;
  EXPECT_NE(err.find("further skips are counted, not listed"), std::string::npos) << err;
}

TEST(ImageLoader, RefusesThreadCountsOutsideItsLimit) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 2);
  ImageLoaderOptions o = options(true, ImageLoaderOptions::kMaxThreads + 1);
  expect_user_error([&] { ImageLoader l(shards, o); },
                    "takes 0 to 256 decoding threads (0: one per hardware thread), not 257");
  o.threads = -3;
  expect_user_error([&] { ImageLoader l(shards, o); }, "not -3");
  o.threads = ImageLoaderOptions::kMaxThreads;
  ImageLoader l(shards, o);  // at the limit: fine (as many as the batch)
}

// Address space for a few thread stacks only: starting 200 threads fails part way, and the loader must stop
// and join the ones it started (the condition variables they wait on used to be destroyed under them: a hang).
TEST(ImageLoaderDeathTest, AFailedThreadStartIsASentenceNotAHang) {
  TempDir dir("image_loader_");
  const auto shards = make_shards(dir.path(), 2);
  ImageLoaderOptions o = options(true, 200);
  o.batch = 200;
  auto body = [&] {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t now = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)), room = rlim_t(96) << 20;
    const rlimit lim{now + room, now + room};
    if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(4);
    ImageLoader l(shards, o);
  };
  EXPECT_EXIT(expect_sentence_in_child(body, 0), testing::ExitedWithCode(1),
              "could not start image decoding thread [0-9]+ of 200 \\(.*\\); give fewer with --threads or raise the "
              "process limit");
}
