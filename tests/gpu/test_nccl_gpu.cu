// The NCCL path of data-parallel training at world size 1 (what a one-GPU machine can run): joining a
// group of one, and an all-reduce that leaves the data bit for bit as it was, eagerly and inside a captured
// CUDA graph - the property that makes world size 1 through NCCL equal the single-GPU trainer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "common/bf16_host.h"
#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "common/device_buffer.h"
#include "kernels/convert.h"
#include "tests/test_util.h"
#include "train/nccl_comm.h"

namespace {
class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};
}  // namespace

TEST_F(NcclGpu, AllReduceOfOneRankLeavesTheDataAsItWas) {
  ProcessGroup one;
  NcclComm comm(one, "");
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world(), 1);
  std::mt19937 rng(4);
  std::normal_distribution<float> z(0.0f, 3.0f);
  std::vector<float> host(1000003);
  for (auto& x : host) x = z(rng);
  host[5] = -0.0f;
  host[6] = 1e-40f;  // a subnormal
  DeviceBuffer<float> d(host.size(), "data");
  d.upload(host);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  comm.sum(d.get(), host.size(), s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> back = d.download(host.size());
  EXPECT_EQ(std::memcmp(back.data(), host.data(), host.size() * 4), 0) << "eager all-reduce changed the data";
  CudaGraph g = CudaGraph::capture(s, [&] { comm.sum(d.get(), host.size(), s); });
  for (int k = 0; k < 3; k++) g.launch(s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  back = d.download(host.size());
  EXPECT_EQ(std::memcmp(back.data(), host.data(), host.size() * 4), 0) << "captured all-reduce changed the data";
  CUDA_CHECK(cudaStreamDestroy(s));
}

// --grad-comm bf16 at world size 1: the gradients rounded to bf16 (kernels/convert.h), all-reduced in bf16
// and widened back equal the host's round-to-nearest-even of each value (common/bf16_host.h), ties,
// subnormals, infinities and signed zeros included, with nothing past n written.
TEST_F(NcclGpu, Bf16SumOfOneRankIsTheRoundedValue) {
  ProcessGroup one;
  NcclComm comm(one, "");
  std::mt19937 rng(7);
  std::normal_distribution<float> z(0.0f, 5.0f);
  const size_t n = 1000037;
  std::vector<float> host(n + 8);
  for (auto& x : host) x = z(rng);
  const float specials[] = {-0.0f,       1e-40f,   -3e-39f,   1.00390625f /* a tie: rounds to even */,
                            1.01171875f, INFINITY, -INFINITY, 3.4e38f};
  std::copy(std::begin(specials), std::end(specials), host.begin() + 100);
  DeviceBuffer<float> g(host.size(), "gradients");
  DeviceBuffer<__nv_bfloat16> g16(n, "bf16 gradients");
  g.upload(host);
  float_to_bf16(g16.get(), g.get(), n, 0);
  comm.sum(g16.get(), n, 0);
  bf16_to_float(g.get(), g16.get(), n, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> back = g.download(host.size());
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) {
    const float r = bf16_round(host[i]);
    if (std::memcmp(&back[i], &r, 4) != 0) wrong++;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(std::memcmp(&back[n], &host[n], 8 * 4), 0) << "written past n";
}
