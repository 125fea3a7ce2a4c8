// The parameter arena: one fp32 buffer of parameters and one of gradients, laid out by a ParamTable
// (same offsets in both), an optional bf16 copy of the parameters for mixed-precision compute that the
// optimizers refresh as they write, and the device-resident descriptor table that lets one kernel
// launch cover every tensor.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include "common/device_buffer.h"
#include "core/param_table.h"

enum TensorFlags : int32_t { kDecay = 1 };

struct TensorDesc {  // device copy of what kernels need from a TensorInfo
  int64_t offset, numel;
  int64_t rows, cols, batch;  // last two dims and the product of the leading ones
  int32_t flags;
  int32_t ndim;
};

class Arena {
 public:
  Arena(ParamTable table, bool with_bf16_copy);

  const ParamTable& table() const { return table_; }
  int64_t total() const { return table_.total_elems(); }
  float* params() const { return params_.get(); }
  float* grads() const { return grads_.get(); }
  __nv_bfloat16* params_bf16() const { return bf16_.get(); }  // nullptr without a bf16 copy
  const TensorDesc* desc() const { return desc_.get(); }

  void zero_grads(cudaStream_t s) { grads_.zero(s); }

  // Host <-> device, by tensor (synchronous; for initialisation, tests and checkpoints).
  void set_param(int i, const float* host);
  void set_grad(int i, const float* host);
  std::vector<float> get_param(int i) const;
  std::vector<float> get_grad(int i) const;
  std::vector<float> get_params_flat() const { return params_.download(); }

 private:
  ParamTable table_;
  DeviceBuffer<float> params_, grads_;
  DeviceBuffer<__nv_bfloat16> bf16_;
  DeviceBuffer<TensorDesc> desc_;
};
