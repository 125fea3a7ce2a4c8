// bf16 data for the kernel tests: random bf16-representable values (so a CPU reference sees exactly what
// the GPU sees) and the trips to and from the device.
#pragma once
#include <cuda_bf16.h>

#include <random>
#include <vector>

#include "common/bf16_host.h"
#include "common/device_buffer.h"

inline std::vector<float> randv(size_t n, float sd, uint32_t seed) {
  std::mt19937 r(seed);
  std::normal_distribution<float> z(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_round(z(r));
  return v;
}
inline DeviceBuffer<__nv_bfloat16> to_dev(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> b(v.size());
  for (size_t i = 0; i < v.size(); i++) b[i] = __float2bfloat16_rn(v[i]);
  DeviceBuffer<__nv_bfloat16> d(v.size());
  d.upload(b);
  return d;
}
inline std::vector<float> from_dev(const DeviceBuffer<__nv_bfloat16>& d) {
  std::vector<__nv_bfloat16> b = d.download();
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); i++) v[i] = __bfloat162float(b[i]);
  return v;
}
