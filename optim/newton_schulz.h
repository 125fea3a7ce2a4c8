// Batched Newton-Schulz orthogonalisation (Muon's quintic, bf16 operands, fp32 accumulation) through
// cuBLASLt. Matrices of one shape are stored back to back at a fixed stride, so each iteration of a
// whole group is three strided-batched GEMMs:
//     A = X X^T            B = c A A + b A            X' = a X + B X
// X is kept in the parameter's own row-major layout; tall matrices (rows > cols) are handled by
// choosing transposes, so the smaller Gram matrix is always the one formed and nothing is copied.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <memory>
#include <vector>

#include "common/device_buffer.h"

struct NsGroup {
  int64_t rows, cols;  // shape of every matrix in the group (row-major)
  int64_t first;       // element offset of the first matrix in the X buffer
  int64_t stride;      // elements between consecutive matrices
  int count;
};

class NewtonSchulz {
 public:
  NewtonSchulz(std::vector<NsGroup> groups, int steps, double a, double b, double c, size_t workspace_bytes);
  ~NewtonSchulz();
  // Orthogonalises every matrix of x in place (x holds Frobenius-normalised inputs).
  void run(__nv_bfloat16* x, cudaStream_t s);

 private:
  struct Gemm;
  struct Plan;  // one sub-batch of one group
  std::vector<NsGroup> groups_;
  std::vector<std::unique_ptr<Plan>> plans_;
  int steps_;
  float a_, b_, c_;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer<__nv_bfloat16> scratch_;
  DeviceBuffer<char> lt_workspace_;
};
