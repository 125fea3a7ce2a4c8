// One process of the PeerSumGpu tests (tests/gpu/test_peer_sum_gpu.cu): `world` of these on one GPU sum
// a fixed set of runs with PeerSum (train/peer_sum.h), swapping their IPC handles through files in `dir`,
// and compare every element with the sums the host makes in the same order (bit for bit). Eagerly, then in
// a captured CUDA graph replayed twice. Before any sum the comparison must find differences, so that it
// cannot pass on data nothing summed. Exit 0: every element equal; 1: a difference, printed.
// Usage: peer_sum_probe RANK WORLD DIR
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/atomic_file.h"
#include "common/cuda_check.h"
#include "common/cuda_graph.h"
#include "common/device_buffer.h"
#include "train/peer_sum.h"

namespace {
constexpr int64_t kElems = 300007;
constexpr int64_t kMost = 1024;  // small chunks: the runs below take several pieces

// Every rank writes dir/<tag>.<rank> (whole, then renamed: common/atomic_file.h) and reads every rank's
// once it is there.
void swap_files(const std::string& dir, const std::string& tag, int rank, int world, const void* mine, void* all,
                size_t bytes) {
  AtomicFile own(dir + "/" + tag + "." + std::to_string(rank));
  own.write(mine, bytes);
  own.commit();
  for (int q = 0; q < world; q++) {
    const std::string path = dir + "/" + tag + "." + std::to_string(q);
    for (int waited = 0;; waited++) {
      std::ifstream f(path, std::ios::binary);
      if (f && f.read(static_cast<char*>(all) + size_t(q) * bytes, std::streamsize(bytes))) break;
      if (waited > 60000) {
        std::fprintf(stderr, "rank %d: no %s from rank %d after 60 s\n", rank, tag.c_str(), q);
        std::exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

// Distinct for each rank and element, with exponents spread so that the order of the adds matters.
float value(int rank, int64_t i) {
  uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(rank + 1) * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return std::ldexp(float(int(h % 2001) - 1000), int((h >> 16) % 24) - 12);
}

// Four calls, as four hook groups would make them: all-reduce runs aligned and not, of 1 and 3 elements
// and of many pieces; runs onto each root; a call with roots only (no second barrier).
std::vector<std::vector<PeerSum::Run>> calls(int world) {
  return {{{0, 1, -1}, {5, 3, -1}, {16, 10000, -1}},
          {{10017, 4097, -1}, {20000, 5000, 0}, {26001, 7001, world - 1}},
          {{50000, 250000, -1}},
          {{40000, 2, 0}, {40010, 3000, world > 2 ? 1 : 0}, {45000, 4096, world - 1}}};
}

std::vector<float> expected(int rank, int world) {
  std::vector<float> v(static_cast<size_t>(kElems));
  for (int64_t i = 0; i < kElems; i++) v[size_t(i)] = value(rank, i);
  for (const auto& call : calls(world))
    for (const PeerSum::Run& r : call) {
      if (r.root >= 0 && r.root != rank) continue;
      for (int64_t i = r.begin; i < r.begin + r.n; i++) {
        float acc = value(0, i);
        for (int q = 1; q < world; q++) acc += value(q, i);
        v[size_t(i)] = acc;
      }
    }
  return v;
}

int differences(const DeviceBuffer<float>& d, const std::vector<float>& want, const char* what, bool quiet) {
  const std::vector<float> got = d.download(want.size());
  int bad = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (got[i] != want[i] && bad++ < 3 && !quiet)
      std::fprintf(stderr, "%s: element %zu is %.9g, the host's sum %.9g\n", what, i, got[i], want[i]);
  return bad;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: peer_sum_probe RANK WORLD DIR\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]), world = std::atoi(argv[2]);
  const std::string dir = argv[3];
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  CUDA_CHECK(cudaSetDevice(rank % devices));
  std::vector<float> start(static_cast<size_t>(kElems));
  for (int64_t i = 0; i < kElems; i++) start[size_t(i)] = value(rank, i);
  const std::vector<float> want = expected(rank, world);
  DeviceBuffer<float> grads(static_cast<size_t>(kElems), "gradients");
  grads.upload(start);
  int n_swaps = 0;
  auto host_barrier = [&] {
    char none = 0;
    std::vector<char> all(static_cast<size_t>(world));
    swap_files(dir, "barrier" + std::to_string(n_swaps++), rank, world, &none, all.data(), 1);
  };
  PeerSum peer(
      rank, world,
      [&](const void* mine, void* all, size_t bytes) { swap_files(dir, "handles", rank, world, mine, all, bytes); },
      grads.get(), kMost);
  if (differences(grads, want, "", true) == 0) {
    std::fprintf(stderr, "rank %d: the comparison passes on data nothing summed\n", rank);
    return 1;
  }
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto step = [&] {
    peer.begin_step();
    for (const auto& call : calls(world)) peer.sum(call, s);
  };
  step();
  CUDA_CHECK(cudaStreamSynchronize(s));
  int bad = differences(grads, want, "eager", false);
  host_barrier();  // every rank has read what it pulls before any resets its gradients
  CudaGraph g = CudaGraph::capture(s, step);
  for (int replay = 0; replay < 2; replay++) {
    grads.upload(start);
    host_barrier();
    g.launch(s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    bad += differences(grads, want, replay ? "second replay" : "first replay", false);
    host_barrier();
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  std::printf("rank %d of %d: %d differences\n", rank, world, bad);
  return bad ? 1 : 0;
}
