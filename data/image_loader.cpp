#include "data/image_loader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "data/image_decode.h"
#include "data/rng.h"

namespace {
WdsStreamOptions stream_options(const ImageLoaderOptions& o) {
  if (o.batch < 1 || o.size < 1 || (o.channels != 1 && o.channels != 3) || o.classes < 2)
    user_error("image loader: batch and size must be >= 1, channels 1 or 3, classes >= 2.");
  WdsStreamOptions s;
  s.num_classes = o.classes;
  s.rank = o.rank;
  s.world = o.world;
  s.shuffle_shards = o.train;
  s.shuffle_buffer = o.train ? o.shuffle_buffer : 0;
  s.seed = o.seed;
  s.single_pass = !o.train;
  return s;
}
}  // namespace

void check_decoder_option(const std::string& decoder) {
  if (decoder != "stb" && decoder != "nvjpeg" && decoder != "auto")
    user_error("image decoder '", decoder, "' is unknown; use stb, nvjpeg (the GPU's JPEG engine) or auto.");
}

ImageLoader::ImageLoader(const std::vector<std::string>& shards, const ImageLoaderOptions& o,
                         std::unique_ptr<BatchImageDecoder> device)
    : o_(o), stream_(shards, stream_options(o)), device_(o.decoder == "stb" ? nullptr : std::move(device)) {
  check_decoder_option(o_.decoder);
  if (o_.decoder == "nvjpeg" && !device_)
    user_error("the nvjpeg image decoder needs the GPU decoder, which this program did not give the loader; use stb.");
  if (o_.train) {
    o_.train_tf.size = o_.size;
    check_options(o_.train_tf);
    check_options(o_.mixup);
  } else {
    o_.eval_tf.size = o_.size;
    check_options(o_.eval_tf);
  }
  tasks_.resize(size_t(o_.batch));
  start_threads();
}

ImageLoader::~ImageLoader() { stop_threads(); }

// A failed start stops and joins the threads already running before the UserError leaves the constructor:
// destroying the condition variables they wait on would hang, and a joinable std::thread would abort.
void ImageLoader::start_threads() {
  const int max = ImageLoaderOptions::kMaxThreads;
  if (o_.threads < 0 || o_.threads > max)
    user_error("the image loader takes 0 to ", max, " decoding threads (0: one per hardware thread), not ", o_.threads,
               "; choose --threads in that range.");
  int n = o_.threads > 0 ? o_.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  n = std::min({n, o_.batch, max});
  try {
    for (int i = 0; i < n; i++) threads_.emplace_back([this, i] { worker(i); });
  } catch (const std::exception& e) {
    const size_t started = threads_.size();
    stop_threads();
    user_error("could not start image decoding thread ", started + 1, " of ", n, " (", e.what(),
               "); give fewer with --threads or raise the process limit (ulimit -u).");
  }
}

void ImageLoader::stop_threads() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

// Decode, then crop / resize / flip (training) or resize / centre-crop (evaluation) into t.out.
void ImageLoader::work(Task& t, AugmentScratch& scratch, Image& img) {
  if (t.augment_only) return augment_in_place(t, scratch);
  t.ok = try_decode_image(t.sample.image.data(), t.sample.image.size(), o_.channels, &img, &t.why);
  if (!t.ok) return;
  if (o_.train) {
    Rng rng = Rng::derive(o_.seed, RngStream::kAugment, 0, uint64_t(t.index));
    train_transform_u8(img, o_.train_tf, rng, t.out, &scratch);
  } else {
    eval_transform_u8(img, o_.eval_tf, t.out, &scratch);
  }
}

// RandAugment on bytes the batch decoder resized, as train_transform_u8 applies it to its own.
void ImageLoader::augment_in_place(Task& t, AugmentScratch& scratch) const {
  Image& crop = scratch.crop;
  if (crop.width != o_.size || crop.channels != o_.channels) crop = Image(o_.size, o_.size, o_.channels);
  std::copy(t.out, t.out + crop.pixels.size(), crop.pixels.begin());
  rand_augment(o_.train_tf.randaugment, t.rng, &crop);
  std::copy(crop.pixels.begin(), crop.pixels.end(), t.out);
}

void ImageLoader::worker(int id) {
  (void)id;
  AugmentScratch scratch;
  Image img;
  uint64_t seen = 0;
  for (;;) {
    size_t i;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return stop_ || (generation_ != seen && next_task_ < count_); });
      if (stop_) return;
      i = todo_[next_task_++];
      if (next_task_ == count_) seen = generation_;
    }
    Task& t = tasks_[i];
    try {
      work(t, scratch, img);
    } catch (const std::exception& e) {  // a transform refusing an image: treated as undecodable
      t.ok = false;
      t.why = e.what();
    }
    std::lock_guard<std::mutex> g(mu_);
    if (++finished_ == count_) done_cv_.notify_all();
  }
}

void ImageLoader::start_tasks(std::vector<size_t> which) {
  std::lock_guard<std::mutex> g(mu_);
  todo_ = std::move(which);
  count_ = todo_.size();
  next_task_ = 0;
  finished_ = 0;
  generation_++;
  cv_.notify_all();
}

void ImageLoader::wait_tasks() {
  std::unique_lock<std::mutex> g(mu_);
  done_cv_.wait(g, [&] { return finished_ == count_; });
}

// Offers every image to the batch decoder and draws the geometry of those it decoded (the CPU path's draws,
// from the same generator); the rest go to `cpu`.
std::vector<BatchImageDecoder::Job> ImageLoader::device_decode(size_t count, std::vector<size_t>* cpu) {
  std::vector<EncodedImage> images(count);
  for (size_t k = 0; k < count; k++)
    images[k] = {reinterpret_cast<const uint8_t*>(tasks_[k].sample.image.data()), tasks_[k].sample.image.size()};
  std::vector<ImageSize> sizes;
  device_->decode(images, &sizes);
  CHECK(sizes.size() == count);
  std::vector<BatchImageDecoder::Job> jobs;
  for (size_t k = 0; k < count; k++) {
    Task& t = tasks_[k];
    if (sizes[k].width <= 0 || sizes[k].height <= 0) {
      cpu->push_back(k);
      continue;
    }
    BatchImageDecoder::Job j;
    j.image = k;
    j.out = t.out;
    if (o_.train) {
      t.rng = Rng::derive(o_.seed, RngStream::kAugment, 0, uint64_t(t.index));
      j.geometry = train_geometry(sizes[k].width, sizes[k].height, o_.train_tf, t.rng);
    } else {
      j.geometry = eval_resize_geometry(sizes[k].width, sizes[k].height, o_.eval_tf);
    }
    t.ok = true;
    jobs.push_back(j);
  }
  return jobs;
}

// The images the batch decoder takes are resized there while the threads decode the others; RandAugment
// (training) then runs on the threads for those the device resized.
void ImageLoader::decode_round(size_t count) {
  std::vector<size_t> cpu;
  std::vector<BatchImageDecoder::Job> jobs;
  for (size_t k = 0; k < count; k++) tasks_[k].augment_only = false;
  if (device_)
    jobs = device_decode(count, &cpu);
  else
    for (size_t k = 0; k < count; k++) cpu.push_back(k);
  start_tasks(cpu);
  try {
    if (!jobs.empty()) device_->transform(jobs);
  } catch (...) {
    wait_tasks();  // the threads write into the caller's batch
    throw;
  }
  wait_tasks();
  device_decoded_ += int64_t(jobs.size());
  if (jobs.empty() || !o_.train || !o_.train_tf.use_randaugment) return;
  std::vector<size_t> augment;
  for (const BatchImageDecoder::Job& j : jobs) {
    tasks_[j.image].augment_only = true;
    augment.push_back(j.image);
  }
  start_tasks(augment);
  wait_tasks();
}

// Fills `places` of the batch from the stream, decoding them in parallel, and refills the places of
// undecodable images; returns the places left empty (only when an evaluation pass ends) and counts the
// filled ones into *real.
std::vector<int> ImageLoader::fill(std::vector<int> places, const ImageBatchView& out, int* real) {
  const size_t px = size_t(o_.size) * size_t(o_.size) * size_t(o_.channels);
  bool ended = false;
  while (!places.empty() && !ended) {
    size_t n = 0;
    for (; n < places.size(); n++) {
      Task& t = tasks_[n];
      if (!stream_.next(t.sample)) {
        ended = true;
        break;
      }
      t.index = served_++;
      t.epoch = stream_.epoch();
      t.out = out.pixels + size_t(places[n]) * px;
    }
    decode_round(n);
    std::vector<int> again;
    for (size_t k = 0; k < n; k++) {  // in stream order, so that in_a_row_ counts a run of the stream
      if (tasks_[k].ok) {
        out.labels[places[k]] = tasks_[k].sample.label;
        ++*real;
        decoded_++;
        in_a_row_ = 0;
        continue;
      }
      count_skip(tasks_[k]);
      again.push_back(places[k]);
    }
    for (size_t k = n; k < places.size(); k++) again.push_back(places[k]);  // the pass ended
    places = again;
    check_progress(ended);
  }
  return places;
}

// Names the first skips, then says how many at 100, 1000, ...: a data set of broken files must not write a
// line per retry.
void ImageLoader::count_skip(const Task& t) {
  if (in_a_row_++ == 0) row_epoch_ = t.epoch;
  skipped_++;
  last_skip_ = str_cat("'", t.sample.key, "' in '", t.sample.shard, "': ", t.why);
  if (skipped_ <= ImageLoaderOptions::kListedSkips) {
    std::fprintf(stderr, "skipped an image that cannot be decoded (%s)%s\n", last_skip_.c_str(),
                 skipped_ == ImageLoaderOptions::kListedSkips ? "; further skips are counted, not listed" : "");
    return;
  }
  int64_t p = 100;
  while (p < skipped_ && p <= INT64_MAX / 10) p *= 10;
  if (p == skipped_)
    std::fprintf(stderr, "skipped %lld images that cannot be decoded so far (the latest: %s)\n", (long long)skipped_,
                 last_skip_.c_str());
}

// A stream in which nothing decodes would be read forever (a training stream wraps its epochs): stop once a
// whole epoch, or kMaxSkipsInARow images, went by without a decodable image, or a pass ended without one.
void ImageLoader::check_progress(bool ended) const {
  if (in_a_row_ == 0) return;
  const bool whole_epoch = stream_.epoch() >= row_epoch_ + 2;  // epoch row_epoch_ + 1 was read in full
  const bool empty_pass = ended && decoded_ == 0;
  if (!whole_epoch && !empty_pass && in_a_row_ < ImageLoaderOptions::kMaxSkipsInARow) return;
  const std::vector<std::string>& shards = stream_.shards();
  user_error("no image decodes: the last ", in_a_row_, " images read were skipped (",
             whole_epoch  ? "a whole epoch"
             : empty_pass ? "the whole pass"
                          : str_cat("the limit is ", ImageLoaderOptions::kMaxSkipsInARow, " in a row"),
             ", of the ", shards.size(), " shard(s) from '", shards[0], "'; the latest: ", last_skip_,
             "); check that the shards hold JPEG or PNG images.");
}

// An evaluation pass's last batch: the real samples move to the front, and the places after them repeat
// the first one, so that the caller counts the first `real`.
void ImageLoader::pack(const std::vector<int>& empty, int real, const ImageBatchView& out) const {
  const size_t px = size_t(o_.size) * size_t(o_.size) * size_t(o_.channels);
  std::vector<bool> filled(size_t(o_.batch), true);
  for (int p : empty) filled[size_t(p)] = false;
  for (int lo = 0, hi = o_.batch - 1;; lo++, hi--) {
    while (lo < o_.batch && filled[size_t(lo)]) lo++;
    while (hi >= 0 && !filled[size_t(hi)]) hi--;
    if (lo >= hi) break;
    std::memcpy(out.pixels + size_t(lo) * px, out.pixels + size_t(hi) * px, px);
    out.labels[lo] = out.labels[hi];
  }
  for (int p = real; p < o_.batch; p++) {
    std::memcpy(out.pixels + size_t(p) * px, out.pixels, px);
    out.labels[p] = out.labels[0];
  }
}

// Training: the batch's mixup / cutmix draw from its own generator, and the soft targets.
void ImageLoader::mix(const ImageBatchView& out) const {
  *out.mix = ImageMix();
  if (!o_.train) return;
  Rng rng = Rng::derive(o_.seed, RngStream::kMixup, 0, uint64_t(batches_));
  const MixDraw d = o_.mix ? draw_mix(o_.mixup, o_.size, o_.size, rng) : MixDraw();
  if (d.lambda < 1.0) {
    out.mix->mode = d.cutmix ? ImageMix::kCutmix : ImageMix::kMixup;
    out.mix->lambda = float(d.lambda);
    out.mix->y0 = d.y0;
    out.mix->y1 = d.y1;
    out.mix->x0 = d.x0;
    out.mix->x1 = d.x1;
  }
  if (soft_targets())
    mix_targets(out.labels, o_.batch, o_.classes, d.lambda, o_.mixup.label_smoothing, out.soft_targets);
}

int ImageLoader::next(const ImageBatchView& out) {
  std::vector<int> places(size_t(o_.batch));
  for (int i = 0; i < o_.batch; i++) places[size_t(i)] = i;
  int real = 0;
  const std::vector<int> empty = fill(std::move(places), out, &real);
  if (real == 0) return 0;
  pack(empty, real, out);
  mix(out);
  batches_++;
  return real;
}

std::vector<int64_t> ImageLoader::Position::to_ints() const {
  std::vector<int64_t> v = {served, batches};
  const std::vector<int64_t> s = stream.to_ints();
  v.insert(v.end(), s.begin(), s.end());
  return v;
}

ImageLoader::Position ImageLoader::Position::from_ints(const std::vector<int64_t>& v) {
  if (v.size() < 3 || v[0] < 0 || v[1] < 0) user_error("a malformed image-loader position in the checkpoint.");
  Position p;
  p.served = v[0];
  p.batches = v[1];
  p.stream = WdsPosition::from_ints(std::vector<int64_t>(v.begin() + 2, v.end()));
  return p;
}

void ImageLoader::seek(const Position& p) {
  stream_.seek(p.stream);
  served_ = p.served;
  batches_ = p.batches;
  in_a_row_ = 0;
}
