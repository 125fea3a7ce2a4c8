// A captured, instantiated CUDA graph: CudaGraph::capture(s, f) records what f launches on stream s (a
// stream of its own: the legacy default stream cannot be captured) and keeps it ready to replay.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "common/cuda_check.h"

class CudaGraph {
 public:
  CudaGraph() = default;
  template <class F>
  static CudaGraph capture(cudaStream_t s, F&& enqueue) {
    CudaGraph g;
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &g.nodes_));
    CUDA_CHECK(cudaGraphInstantiate(&g.exec_, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return g;
  }
  ~CudaGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  CudaGraph(CudaGraph&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)), nodes_(o.nodes_) {}
  CudaGraph& operator=(CudaGraph&& o) noexcept {
    std::swap(exec_, o.exec_);
    std::swap(nodes_, o.nodes_);
    return *this;
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  explicit operator bool() const { return exec_ != nullptr; }
  void launch(cudaStream_t s) const { CUDA_CHECK(cudaGraphLaunch(exec_, s)); }
  size_t nodes() const { return nodes_; }  // kernels, copies, memsets: the launches a replay saves

 private:
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};
