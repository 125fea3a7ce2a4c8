#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/cuda_check.h"
#include "common/error.h"
#include "train/train_log.h"

// Dense bf16 FLOPs per clock per SM (tensor cores, fp32 accumulation), by architecture.
static double bf16_flops_per_clock_per_sm(int major, int minor) {
  if (major == 9) return 4096;                // Hopper
  if (major == 8 && minor == 0) return 2048;  // A100
  if (major == 8) return 512;                 // Ampere / Ada consumer parts with fp32 accumulation
  if (major == 10) return 8192;               // Blackwell data-center parts (B200)
  if (major >= 12) return 512;                // Blackwell consumer parts (RTX 50), like Ada
  return 0;
}

DevicePeak device_peak_bf16(int device) {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DevicePeak p;
  p.name = prop.name;
  // The datasheets' figures (their boost clocks), where the SM count identifies the part.
  if (prop.major == 9 && prop.multiProcessorCount == 132) {
    p.flops = 989.4e12;
    p.how = "H100 SXM / H200 datasheet, 132 SMs";
    return p;
  }
  if (prop.major == 9 && prop.multiProcessorCount == 114) {
    p.flops = 756.5e12;
    p.how = "H100 PCIe datasheet, 114 SMs";
    return p;
  }
  if (prop.major == 8 && prop.minor == 0 && prop.multiProcessorCount == 108) {
    p.flops = 312e12;
    p.how = "A100 datasheet, 108 SMs";
    return p;
  }
  int khz = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  p.flops = double(prop.multiProcessorCount) * khz * 1e3 * bf16_flops_per_clock_per_sm(prop.major, prop.minor);
  p.how = p.flops > 0 ? str_cat(prop.multiProcessorCount, " SMs x ", khz / 1000, " MHz x dense bf16 per SM (estimate)")
                      : "unknown architecture: no MFU";
  return p;
}

TrainLog::TrainLog(const std::string& json_path, double peak_flops, double work_per_step, double units_per_step,
                   const char* unit)
    : peak_(peak_flops), work_(work_per_step), units_(units_per_step), unit_(unit) {
  if (json_path.empty()) return;
  json_.reset(std::fopen(json_path.c_str(), "a"));
  if (!json_) user_error("cannot open the log file '", json_path, "'.");
}

namespace {
// A JSON number with `digits` decimals, or null for inf and NaN (which JSON cannot spell), so that a run
// that diverges still leaves a log every reader can parse.
std::string num(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
}  // namespace

void TrainLog::validation(int64_t step, float loss) {
  std::printf("step %lld | val loss %.4f\n", (long long)step, loss);
  if (!json_) return;
  std::fprintf(json_.get(), "{\"step\":%lld,\"val_loss\":%s}\n", (long long)step, num(loss, 6).c_str());
  std::fflush(json_.get());
}

void TrainLog::validation(int64_t step, float loss, double top1, double top5) {
  std::printf("step %lld | val loss %.4f | top-1 %.2f%% | top-5 %.2f%%\n", (long long)step, loss, 100 * top1,
              100 * top5);
  if (!json_) return;
  std::fprintf(json_.get(), "{\"step\":%lld,\"val_loss\":%s,\"val_top1\":%.6f,\"val_top5\":%.6f}\n", (long long)step,
               num(loss, 6).c_str(), top1, top5);
  std::fflush(json_.get());
}

void TrainLog::step(const Step& s) {
  ema_ms_ = ema_ms_ < 0 ? s.ms : 0.9 * ema_ms_ + 0.1 * s.ms;
  const double per_s = units_ / (s.ms * 1e-3), mfu = peak_ > 0 ? work_ / (s.ms * 1e-3) / peak_ : 0.0;
  std::printf(
      "step %5lld/%lld | loss %.4f | lr x%.3f | norm %.3f | %.1f ms (optimizer %.2f) | %.0f %s/s | MFU %.1f%% | ETA "
      "%.1f min\n",
      (long long)s.step, (long long)s.steps, s.loss, s.lr_scale, s.grad_norm, s.ms, s.opt_ms, per_s, unit_, 100 * mfu,
      ema_ms_ * double(s.steps - s.step) / 60000.0);
  if (!json_) return;
  std::fprintf(json_.get(),
               "{\"step\":%lld,\"loss\":%s,\"lr_scale\":%.6f,\"grad_norm\":%s,\"data\":\"%016llx\",\"ms\":%.3f,"
               "\"opt_ms\":%.3f,\"%s_per_s\":%.1f,\"mfu\":%.4f}\n",
               (long long)s.step, num(s.loss, 6).c_str(), s.lr_scale, num(s.grad_norm, 5).c_str(),
               (unsigned long long)s.digest, s.ms, s.opt_ms, unit_, per_s, mfu);
  std::fflush(json_.get());
}
