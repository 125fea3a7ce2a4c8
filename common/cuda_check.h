// Every CUDA / cuBLAS call goes through one of these: a failure names the call, file and line.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>

#include "common/error.h"

struct CudaError : std::runtime_error {
  explicit CudaError(const std::string& m) : std::runtime_error(m) {}
};

#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess)                                                                          \
      throw CudaError(str_cat(__FILE__, ":", __LINE__, ": ", #call, ": ", cudaGetErrorString(err_))); \
  } while (0)

// After a kernel launch: catches bad launch configurations at once (no synchronisation).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                              \
  do {                                                                                                  \
    cublasStatus_t st_ = (call);                                                                        \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                   \
      throw CudaError(str_cat(__FILE__, ":", __LINE__, ": ", #call, ": cuBLAS status ", int(st_), " (", \
                              cublasGetStatusString(st_), ")"));                                        \
  } while (0)

// True when at least one CUDA device is usable; never throws (used to skip GPU suites).
inline bool cuda_device_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

inline int ceil_div(long long a, long long b) { return int((a + b - 1) / b); }
