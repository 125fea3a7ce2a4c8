// The training log: one console line and one JSON line per step (loss, LR factor, grad norm, the data's
// digest, time, throughput, MFU, ETA) and per validation. MFU is measured against the GPU's peak dense bf16 rate,
// which device_peak_bf16 reads from the device rather than assuming an H100.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

struct DevicePeak {
  std::string name;  // the device's name
  double flops = 0;  // dense bf16 tensor-core FLOP/s with fp32 accumulation; 0 = unknown (no MFU)
  std::string how;   // where the figure comes from, for the log's header
};
DevicePeak device_peak_bf16(int device = 0);

class TrainLog {
 public:
  // json_path empty: console only. work_per_step: the model FLOPs of one optimizer step; unit: what
  // the throughput counts ("tok", "img"), units_per_step of it in a step.
  TrainLog(const std::string& json_path, double peak_flops, double work_per_step, double units_per_step,
           const char* unit);
  void validation(int64_t step, float loss);
  void validation(int64_t step, float loss, double top1, double top5);  // classifiers: accuracy too
  struct Step {
    int64_t step, steps;  // the step just done (1-based) and the planned total
    float loss, grad_norm;
    double lr_scale;
    float ms, opt_ms;  // the whole step, and the clip + optimizer part
    uint64_t digest;   // of the step's data over every process (common/digest.h), logged as "data"
  };
  void step(const Step& s);

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> json_;
  double peak_, work_, units_;
  const char* unit_;
  double ema_ms_ = -1;
};
