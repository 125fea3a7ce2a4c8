// Owning device allocation (cudaMalloc/cudaFree) with element type T. Out-of-memory becomes a
// UserError that says how much was asked for and what is free, instead of a crash later on.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "common/cuda_check.h"

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n, const char* what = "buffer") { alloc(n, what); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }

  void alloc(size_t n, const char* what = "buffer") {
    release();
    if (n == 0) return;
    cudaError_t e = cudaMalloc(&p_, n * sizeof(T));
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      p_ = nullptr;
      user_error("out of GPU memory allocating ", what, " (", (n * sizeof(T)) >> 20, " MiB; ", free_b >> 20,
                 " MiB free of ", total_b >> 20, " MiB); use a smaller model or batch size.");
    }
    CUDA_CHECK(e);
    n_ = n;
  }
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  void zero(cudaStream_t s = 0) {
    if (n_) CUDA_CHECK(cudaMemsetAsync(p_, 0, n_ * sizeof(T), s));
  }
  void upload(const T* src, size_t n, size_t at = 0) {
    CHECK(at + n <= n_);
    if (n) CUDA_CHECK(cudaMemcpy(p_ + at, src, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  void upload(const std::vector<T>& v) { upload(v.data(), v.size()); }
  std::vector<T> download(size_t n, size_t at = 0) const {
    CHECK(at + n <= n_);
    std::vector<T> v(n);
    if (n) CUDA_CHECK(cudaMemcpy(v.data(), p_ + at, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  std::vector<T> download() const { return download(n_); }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};
