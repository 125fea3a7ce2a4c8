// The NCCL path of data-parallel training at world size 1 (what a one-GPU machine can run): joining a
// group of one, and an all-reduce that leaves the data bit for bit as it was, eagerly and inside a captured
// CUDA graph - the property that makes world size 1 through NCCL equal the single-GPU trainer.
#include <cstring>
#include <random>

#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "common/device_buffer.h"
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
