// What the model dump tools (gpt2_dump, vit_dump) share: raw binary files for the Python cross-checks, and
// a model's device loss read back.
#pragma once
#include <cuda_runtime.h>

#include <fstream>
#include <string>

#include "common/cuda_check.h"
#include "common/error.h"
#include "models/model.h"

template <class T>
void write_bin(const std::string& path, const T* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data), std::streamsize(n * sizeof(T)));
  if (!f) user_error("writing '", path, "' failed.");
}

inline float read_loss(const Model& m) {
  float v = 0;
  CUDA_CHECK(cudaMemcpy(&v, m.d_loss(), sizeof v, cudaMemcpyDeviceToHost));
  return v;
}
