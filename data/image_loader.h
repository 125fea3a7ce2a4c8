// Batches of images for train_vit: WebDataset shards (data/wds_stream) decoded and transformed on a pool
// of CPU threads (data/image_decode, data/augment) into 8-bit (B, size, size, channels) pixels, with the
// labels, and for training the batch's mixup / cutmix draw and soft targets (data/mixup). Normalisation
// and the mix itself happen on the GPU (kernels/patch_embed), so a batch moves as bytes.
//
// Each sample's crop and flip come from its own generator, derived from the seed and the sample's index
// in the stream, and each batch's mix from the seed and the batch's index: the batches do not depend on
// the thread count or on scheduling, and a run resumed from position() repeats the original's.
//
// With a batch decoder (data/batch_decoder.h, e.g. data/nvjpeg_decoder's on the GPU), the JPEGs it takes are
// decoded and resized there, from the same crop and flip draws, and the rest (PNG, progressive JPEG, what it
// refuses) by the threads at the same time; RandAugment then runs on the threads, on the resized bytes.
//
// An image stb_image cannot decode is skipped and counted (skipped()), its place taken by the stream's
// next sample: a data set of a million photos may hold a few broken files, and one should not stop a
// run of days. The first kListedSkips are named on stderr, then one line at 100, 1000, ... skips (a bad
// data set must not write gigabytes of warnings). A stream where nothing decodes stops with a UserError
// naming what was skipped and where: a whole epoch, or kMaxSkipsInARow images, without one decodable
// image (or an evaluation pass without one). A tar or label error stops the run (data/wds_samples).
//
// Threads: at most kMaxThreads (a thread per image of a batch is the most that can help; thousands of
// threads exhaust the machine's process table). A thread that cannot be started is a UserError, after
// the ones already started have been stopped and joined.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/image_mix.h"
#include "data/augment.h"
#include "data/batch_decoder.h"
#include "data/mixup.h"
#include "data/wds_stream.h"

struct ImageLoaderOptions {
  static constexpr int kMaxThreads = 256;            // decoding threads (--threads)
  static constexpr int64_t kMaxSkipsInARow = 10000;  // undecodable images in a row before the run stops
  static constexpr int64_t kListedSkips = 10;        // skips named one by one on stderr
  int batch = 0, size = 224, channels = 3, classes = 1000;
  bool train = true;  // shuffled, augmented, endless; false: one pass in shard order, evaluation transform
  uint64_t seed = 0;
  int threads = 0;             // decoding threads, at most kMaxThreads; 0: the machine's hardware threads
  int64_t shuffle_buffer = 0;  // samples (training)
  int rank = 0, world = 1;     // this process reads shards rank, rank + world, ...
  TrainTransformOptions train_tf;
  EvalTransformOptions eval_tf;
  bool mix = false;             // draw mixup / cutmix per batch (training)
  MixupOptions mixup;           // also label smoothing: with mix off, smoothing > 0 still gives soft targets
  std::string decoder = "stb";  // stb | nvjpeg | auto (data/nvjpeg_decoder.h's make_batch_decoder)
};

// UserError unless `decoder` is stb, nvjpeg or auto.
void check_decoder_option(const std::string& decoder);

// Where a batch goes: pixels (batch, size, size, channels), labels (batch), soft targets (batch, classes)
// when the options make them (else untouched), the mix draw.
struct ImageBatchView {
  uint8_t* pixels;
  int32_t* labels;
  float* soft_targets;
  ImageMix* mix;
};

class ImageLoader {
 public:
  // `device`: the batch decoder for o.decoder nvjpeg or auto (none: stb alone; nvjpeg needs one).
  ImageLoader(const std::vector<std::string>& shards, const ImageLoaderOptions& o,
              std::unique_ptr<BatchImageDecoder> device = nullptr);
  ~ImageLoader();
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  // Fills a batch and returns how many samples are real: `batch`, except at the end of an evaluation
  // pass, where the rest repeat the last real one (0: the pass is over).
  int next(const ImageBatchView& out);
  bool soft_targets() const { return o_.train && (o_.mix || o_.mixup.label_smoothing > 0); }
  struct Position {
    WdsPosition stream;
    int64_t served = 0;  // samples handed out (their generators' index)
    int64_t batches = 0;
    std::vector<int64_t> to_ints() const;
    static Position from_ints(const std::vector<int64_t>& v);
  };
  Position position() const { return {stream_.position(), served_, batches_}; }
  void seek(const Position& p);  // same shards and options; UserError otherwise
  int64_t skipped() const { return skipped_; }
  int64_t device_decoded() const { return device_decoded_; }  // images the batch decoder decoded and resized
  std::string decoder_name() const { return device_ ? device_->name() : "stb"; }
  const ImageLoaderOptions& options() const { return o_; }

 private:
  struct Task {
    WdsSample sample;
    int64_t index = 0;  // in the stream: the generator's
    int64_t epoch = 0;  // the stream's when the sample was read
    uint8_t* out = nullptr;
    bool ok = false;
    bool augment_only = false;  // decoded and resized by the batch decoder: RandAugment is left
    Rng rng = Rng(0);           // then the sample's generator after the crop and flip draws
    std::string why;
  };
  void work(Task& t, AugmentScratch& scratch, Image& img);
  void augment_in_place(Task& t, AugmentScratch& scratch) const;
  void decode_round(size_t count);  // tasks_[0, count)
  std::vector<BatchImageDecoder::Job> device_decode(size_t count, std::vector<size_t>* cpu);
  void start_tasks(std::vector<size_t> which);  // on the pool
  void wait_tasks();
  std::vector<int> fill(std::vector<int> places, const ImageBatchView& out, int* real);
  void pack(const std::vector<int>& empty, int real, const ImageBatchView& out) const;
  void mix(const ImageBatchView& out) const;
  void worker(int id);
  void start_threads();
  void stop_threads();
  void count_skip(const Task& t);
  void check_progress(bool ended) const;

  ImageLoaderOptions o_;
  WdsStream stream_;
  int64_t served_ = 0, batches_ = 0, skipped_ = 0, device_decoded_ = 0, decoded_ = 0;
  int64_t in_a_row_ = 0, row_epoch_ = 0;  // undecodable images since the last good one; the epoch of the first
  std::string last_skip_;                 // the latest skip: shard, key and reason
  std::unique_ptr<BatchImageDecoder> device_;
  std::vector<Task> tasks_;
  std::vector<size_t> todo_;  // the pool's tasks
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  size_t count_ = 0, next_task_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};
