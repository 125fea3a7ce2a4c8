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

// The GPU the calling thread's CUDA work goes to. A new thread starts on GPU 0 whatever its creator
// selected, so a thread that enqueues GPU work (a prefetcher's, with the nvjpeg decoder) must call
// cudaSetDevice with its creator's current_device() first, or each data-parallel process puts a context
// on GPU 0.
inline int current_device() {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) cudaGetLastError();
  return d;
}

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
