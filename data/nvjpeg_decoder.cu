#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#include "data/gpu_resize.h"
#include "data/image_decode.h"
#include "data/nvjpeg_decoder.h"

namespace {
// The library's functions, resolved once per process; `error` says why they are unusable. The library stays
// loaded for the process's life.
struct Api {
  std::string error;
  nvjpeg::CreateExFn create_ex = nullptr;
  nvjpeg::DestroyFn destroy = nullptr;
  nvjpeg::JpegStateCreateFn state_create = nullptr;
  nvjpeg::JpegStateDestroyFn state_destroy = nullptr;
  nvjpeg::JpegStreamCreateFn stream_create = nullptr;
  nvjpeg::JpegStreamDestroyFn stream_destroy = nullptr;
  nvjpeg::JpegStreamParseHeaderFn parse_header = nullptr;
  nvjpeg::JpegStreamGetFrameDimensionsFn frame_dimensions = nullptr;
  nvjpeg::DecodeBatchedSupportedFn batched_supported = nullptr;
  nvjpeg::DecodeBatchedInitializeFn batched_initialize = nullptr;
  nvjpeg::DecodeBatchedFn decode_batched = nullptr;
};

template <class F>
void resolve(void* lib, const char* name, F* f, std::string* error) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  if (!*f && error->empty()) *error = str_cat("libnvjpeg has no ", name);
}

Api load_api() {
  Api a;
  void* lib = nullptr;
  for (const char* name : {"libnvjpeg.so.13", "libnvjpeg.so"})
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
  if (!lib) {
    a.error = "libnvjpeg.so.13 / libnvjpeg.so cannot be loaded (not in the CUDA toolkit's lib64 or the library path)";
    return a;
  }
  resolve(lib, "nvjpegCreateEx", &a.create_ex, &a.error);
  resolve(lib, "nvjpegDestroy", &a.destroy, &a.error);
  resolve(lib, "nvjpegJpegStateCreate", &a.state_create, &a.error);
  resolve(lib, "nvjpegJpegStateDestroy", &a.state_destroy, &a.error);
  resolve(lib, "nvjpegJpegStreamCreate", &a.stream_create, &a.error);
  resolve(lib, "nvjpegJpegStreamDestroy", &a.stream_destroy, &a.error);
  resolve(lib, "nvjpegJpegStreamParseHeader", &a.parse_header, &a.error);
  resolve(lib, "nvjpegJpegStreamGetFrameDimensions", &a.frame_dimensions, &a.error);
  resolve(lib, "nvjpegDecodeBatchedSupported", &a.batched_supported, &a.error);
  resolve(lib, "nvjpegDecodeBatchedInitialize", &a.batched_initialize, &a.error);
  resolve(lib, "nvjpegDecodeBatched", &a.decode_batched, &a.error);
  return a;
}

const Api& api() {
  static const Api a = load_api();
  return a;
}

std::string status_text(int s) {
  return str_cat("nvJPEG status ", s, s == nvjpeg::kArchMismatch ? ", no JPEG engine" : "");
}

void check_status(int s, const char* call) {
  if (s != nvjpeg::kSuccess) throw CudaError(str_cat(call, ": ", status_text(s)));
}

// Interpolated chroma upsampling where this nvJPEG knows the flag, else the default.
int create_hardware_handle(nvjpeg::Handle* h) {
  int s = api().create_ex(nvjpeg::kBackendHardware, nullptr, nullptr, nvjpeg::kFlagsUpsamplingWithInterpolation, h);
  if (s != nvjpeg::kSuccess) s = api().create_ex(nvjpeg::kBackendHardware, nullptr, nullptr, nvjpeg::kFlagsDefault, h);
  return s;
}

std::string probe() {
  if (!api().error.empty()) return api().error;
  if (!cuda_device_available()) return "no CUDA GPU is visible";
  nvjpeg::Handle h = nullptr;
  const int s = create_hardware_handle(&h);
  if (s != nvjpeg::kSuccess)
    return str_cat("nvJPEG's hardware backend cannot be created on this GPU (", status_text(s), ")");
  api().destroy(h);
  return "";
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
}  // namespace

bool NvjpegDecoder::available(std::string* why) {
  static const std::string reason = probe();
  if (why) *why = reason;
  return reason.empty();
}

NvjpegDecoder::NvjpegDecoder(int channels, size_t max_bytes) : channels_(channels), max_bytes_(max_bytes) {
  CHECK(channels == 1 || channels == 3);
  std::string why;
  if (!available(&why)) user_error("the nvjpeg image decoder is unavailable: ", why, "; use --decoder stb or auto.");
  try {
    check_status(create_hardware_handle(&handle_), "nvjpegCreateEx");
    check_status(api().state_create(handle_, &state_), "nvjpegJpegStateCreate");
    check_status(api().stream_create(handle_, &parsed_), "nvjpegJpegStreamCreate");
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const int s =
        api().batched_initialize(handle_, state_, 1, 1, channels == 3 ? nvjpeg::kOutputRgbi : nvjpeg::kOutputY);
    if (s != nvjpeg::kSuccess)
      user_error("nvJPEG's hardware backend does not decode to ", channels == 3 ? "RGB" : "gray", " here (",
                 status_text(s), "); use --decoder stb.");
  } catch (...) {
    release();
    throw;
  }
}

NvjpegDecoder::~NvjpegDecoder() { release(); }

void NvjpegDecoder::release() {
  if (stream_) cudaStreamSynchronize(stream_);
  arena_.release();
  if (parsed_) api().stream_destroy(parsed_);
  if (state_) api().state_destroy(state_);
  if (handle_) api().destroy(handle_);
  if (stream_) cudaStreamDestroy(stream_);
  parsed_ = nullptr;
  state_ = nullptr;
  handle_ = nullptr;
  stream_ = nullptr;
}

std::string NvjpegDecoder::screen(const EncodedImage& im, DeviceImage* d) {
  const uint8_t* p = im.data;
  if (im.size < 4 || p[0] != 0xFF || p[1] != 0xD8 || p[2] != 0xFF) return "not a JPEG";
  if (jpeg_codes_rgb(p, im.size)) return "an RGB-coded JPEG";
  int s = api().parse_header(handle_, p, im.size, parsed_);
  if (s != nvjpeg::kSuccess) return str_cat("its header does not parse (", status_text(s), ")");
  unsigned w = 0, h = 0;
  s = api().frame_dimensions(parsed_, &w, &h);
  const DecodeLimits limits;
  if (s != nvjpeg::kSuccess || w == 0 || h == 0 || w > unsigned(limits.max_side) || h > unsigned(limits.max_side) ||
      int64_t(w) * h > limits.max_pixels)
    return "no frame size, or one over the decode limits";
  int unsupported = -1;
  s = api().batched_supported(handle_, parsed_, &unsupported);
  if (s != nvjpeg::kSuccess || unsupported != 0) return "the engine does not take it (progressive, 4:1:1, CMYK, ...)";
  d->width = int(w);
  d->height = int(h);
  d->pitch = size_t(w) * size_t(channels_);
  return "";
}

void NvjpegDecoder::decode_batch(const std::vector<EncodedImage>& images, std::vector<DeviceImage>* out) {
  out->assign(images.size(), DeviceImage());
  std::vector<size_t> take, offset;
  size_t total = 0;
  for (size_t i = 0; i < images.size(); i++) {
    DeviceImage& d = (*out)[i];
    d.why = screen(images[i], &d);
    const size_t bytes = round_up(d.pitch * size_t(d.height), 256);
    if (d.why.empty() && total + bytes > max_bytes_) d.why = "over the batch's memory budget";
    if (!d.why.empty()) continue;
    take.push_back(i);
    offset.push_back(total);
    total += bytes;
  }
  if (take.empty()) return;
  if (arena_.size() < total) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // the last batch's pixels may still be read
    arena_.alloc(total + total / 4, "decoded JPEGs");
  }
  std::vector<const unsigned char*> data;
  std::vector<size_t> lengths;
  std::vector<nvjpeg::Image> dest(take.size(), nvjpeg::Image{});
  for (size_t k = 0; k < take.size(); k++) {
    data.push_back(images[take[k]].data);
    lengths.push_back(images[take[k]].size);
    dest[k].channel[0] = arena_.get() + offset[k];
    dest[k].pitch[0] = (*out)[take[k]].pitch;
  }
  const int format = channels_ == 3 ? nvjpeg::kOutputRgbi : nvjpeg::kOutputY;
  int s = api().batched_initialize(handle_, state_, int(take.size()), 1, format);
  if (s == nvjpeg::kSuccess)
    s = api().decode_batched(handle_, state_, data.data(), lengths.data(), dest.data(), stream_);
  for (size_t k = 0; k < take.size(); k++) {
    DeviceImage& d = (*out)[take[k]];
    if (s == nvjpeg::kSuccess)
      d.pixels = dest[k].channel[0];
    else
      d.why = str_cat("the engine failed on its batch (", status_text(s), ")");
  }
}

namespace {
// ImageLoader's batch decoder: the engine, then the resize kernel into a device batch, then copies into the
// loader's host buffers.
class NvjpegBatchDecoder final : public BatchImageDecoder {
 public:
  NvjpegBatchDecoder(int channels, int size, Filter filter) : dec_(channels), size_(size), filter_(filter) {}
  std::string name() const override { return "nvjpeg"; }
  void decode(const std::vector<EncodedImage>& images, std::vector<ImageSize>* sizes) override;
  void transform(const std::vector<Job>& jobs) override;

 private:
  void copy_out(const std::vector<Job>& jobs, size_t bytes_per_image);
  NvjpegDecoder dec_;
  int size_;
  Filter filter_;
  std::vector<DeviceImage> decoded_;
  DeviceBuffer<uint8_t> pixels_;
  DeviceBuffer<DeviceResizeJob> jobs_;
};

void NvjpegBatchDecoder::decode(const std::vector<EncodedImage>& images, std::vector<ImageSize>* sizes) {
  dec_.decode_batch(images, &decoded_);
  sizes->assign(images.size(), ImageSize());
  for (size_t i = 0; i < images.size(); i++)
    if (decoded_[i].ok()) (*sizes)[i] = {decoded_[i].width, decoded_[i].height};
}

// The geometry must lie inside the image: a bad box would read outside device memory.
void check_geometry(const ResizeGeometry& g, const DeviceImage& d, int size) {
  const Box& b = g.box;
  CHECK(d.ok() && b.x >= 0 && b.y >= 0 && b.w > 0 && b.h > 0 && b.x + b.w <= d.width && b.y + b.h <= d.height);
  CHECK(g.out_x >= 0 && g.out_y >= 0 && g.out_x + size <= g.out_w && g.out_y + size <= g.out_h);
}

void NvjpegBatchDecoder::transform(const std::vector<Job>& jobs) {
  if (jobs.empty()) return;
  const size_t n = jobs.size(), px = size_t(size_) * size_t(size_) * size_t(dec_.channels());
  if (pixels_.size() < n * px) pixels_.alloc(n * px, "resized images");
  if (jobs_.size() < n) jobs_.alloc(n, "resize jobs");
  std::vector<DeviceResizeJob> host(n);
  for (size_t k = 0; k < n; k++) {
    const DeviceImage& d = decoded_.at(jobs[k].image);
    check_geometry(jobs[k].geometry, d, size_);
    host[k] = {d.pixels, d.pitch, jobs[k].geometry, pixels_.get() + k * px};
  }
  // From pageable memory: returns once `host` is staged, so it may go out of scope.
  CUDA_CHECK(
      cudaMemcpyAsync(jobs_.get(), host.data(), n * sizeof(DeviceResizeJob), cudaMemcpyHostToDevice, dec_.stream()));
  resize_u8_device(jobs_.get(), int(n), size_, dec_.channels(), filter_, dec_.stream());
  copy_out(jobs, px);
  CUDA_CHECK(cudaStreamSynchronize(dec_.stream()));
}

// One copy per run of jobs whose host places follow each other (usually the whole batch).
void NvjpegBatchDecoder::copy_out(const std::vector<Job>& jobs, size_t px) {
  for (size_t k = 0, end; k < jobs.size(); k = end) {
    for (end = k + 1; end < jobs.size() && jobs[end].out == jobs[end - 1].out + px;) end++;
    CUDA_CHECK(
        cudaMemcpyAsync(jobs[k].out, pixels_.get() + k * px, (end - k) * px, cudaMemcpyDeviceToHost, dec_.stream()));
  }
}
}  // namespace

std::unique_ptr<BatchImageDecoder> make_batch_decoder(const ImageLoaderOptions& o) {
  check_decoder_option(o.decoder);
  if (o.decoder == "stb") return nullptr;
  const Filter filter = o.train ? o.train_tf.filter : o.eval_tf.filter;
  std::string why;
  std::unique_ptr<BatchImageDecoder> d;
  if (o.decoder == "nvjpeg") return std::make_unique<NvjpegBatchDecoder>(o.channels, o.size, filter);
  try {
    if (NvjpegDecoder::available(&why)) d = std::make_unique<NvjpegBatchDecoder>(o.channels, o.size, filter);
  } catch (const UserError& e) {
    why = e.what();
  }
  static std::once_flag said;
  std::call_once(said, [&] {
    if (d)
      std::fprintf(stderr, "image decoder: nvjpeg (the GPU's JPEG engine; PNG and the JPEGs it refuses: stb)\n");
    else
      std::fprintf(stderr, "image decoder: stb (nvjpeg: %s)\n", why.c_str());
  });
  return d;
}
