// Batched Newton-Schulz orthogonalisation (Muon's quintic) through cuBLASLt, in one of three precisions:
// bf16 operands with fp32 accumulation (Muon, CELO2's default), fp32 operands on TF32 tensor cores, or exact
// fp32 (pedantic: no TF32, no reduced-precision reductions; CELO2's exact mode, as PyLO's float32). Matrices of one
// shape are stored back to back at a fixed stride, so each iteration of a whole group is three strided-batched GEMMs:
//     A = X X^T            B = c A A + b A            X' = a X + B X
// X is kept in the parameter's own row-major layout; tall matrices (rows > cols) are handled by
// choosing transposes, so the smaller Gram matrix is always the one formed and nothing is copied.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <memory>
#include <string>
#include <vector>

#include "common/device_buffer.h"

enum class NsPrecision { Bf16, Tf32, Fp32 };
// "bf16" | "tf32" | "fp32"; UserError otherwise.
NsPrecision parse_ns_precision(const std::string& s, const std::string& key);
// Bytes of one element of X in that precision.
size_t ns_elem_bytes(NsPrecision p);

// Elements between consecutive matrices of a group (rows x cols each): NewtonSchulz requires exactly this
// stride (128-byte aligned starts), so callers lay their groups out with it.
inline int64_t ns_matrix_stride(int64_t rows, int64_t cols) { return (rows * cols + 31) / 32 * 32; }

struct NsGroup {
  int64_t rows, cols;  // shape of every matrix in the group (row-major)
  int64_t first;       // element offset of the first matrix in the X buffer
  int64_t stride;      // elements between consecutive matrices
  int count;
};

class NewtonSchulz {
 public:
  NewtonSchulz(std::vector<NsGroup> groups, int steps, double a, double b, double c, size_t workspace_bytes,
               NsPrecision precision = NsPrecision::Bf16);
  ~NewtonSchulz();
  // Orthogonalises every matrix of x in place (x holds Frobenius-normalised inputs, __nv_bfloat16 for Bf16,
  // float otherwise).
  void run(void* x, cudaStream_t s);

 private:
  struct Gemm;
  struct Plan;  // one sub-batch of one group
  std::vector<NsGroup> groups_;
  std::vector<std::unique_ptr<Plan>> plans_;
  int steps_;
  float a_, b_, c_;
  NsPrecision precision_;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer<char> scratch_;
  DeviceBuffer<char> lt_workspace_;
};
