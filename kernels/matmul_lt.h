// bf16 tensor-core matmuls for the linear layers: cuBLASLt with fp32 accumulation and the bias, GELU
// and GELU-gradient epilogues fused in. Plans (descriptors and the heuristic's algorithm) are made once
// per shape and pointer alignment, then reused, so a step issues only the matmul calls themselves.
// Row-major view throughout, like the model: x (N, I), W (O, I), y (N, O).
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/device_buffer.h"

using bf16 = __nv_bfloat16;

class LtMatmul {
 public:
  // tune_candidates > 1: each new plan times up to that many of the heuristic's algorithms on the call's
  // own buffers and keeps the fastest. The tuning calls overwrite (or accumulate into) the outputs, so
  // tune only in a throw-away step; and the choice depends on timing, so runs that must be bit for bit
  // reproducible keep the default: the algorithm kernels/matmul_choices.cpp names for the plan on this GPU
  // and cuBLASLt version (measured choices), else the heuristic's first. 0 reads MATMUL_TUNE from the
  // environment (a discovery run: each tuned plan is printed to stderr in that table's form).
  explicit LtMatmul(int tune_candidates = 0);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // y = x W^T + b (+ residual).   With gelu_pre: gelu_pre = x W^T + b and y = gelu(gelu_pre) (tanh form).
  // ldy also serves residual and gelu_pre. b may be null.
  void forward(bf16* y, int ldy, const bf16* x, int ldx, const bf16* W, const bf16* b, int N, int I, int O,
               cudaStream_t s, const bf16* residual = nullptr, bf16* gelu_pre = nullptr);
  // dx (+)= dy W.   With gelu_pre: dx = (dy W) * gelu'(gelu_pre) (the input's pre-activation, ld lddx).
  void backward_dx(bf16* dx, int lddx, bool accumulate, const bf16* dy, int lddy, const bf16* W, int N, int I, int O,
                   cudaStream_t s, const bf16* gelu_pre = nullptr);
  // dW += dy^T x, accumulated in fp32 (the arena's gradients). Bias gradients are not fused in: on the H100,
  // with each plan tuned, the dW matmul with cuBLASLt's BGRADB epilogue took longer than it plus the
  // column-sum kernel for fc at every GPT-2 size and for qkv up to 774M (124M qkv: 0.50 against 0.37 +
  // 0.12 ms), and DGELU_BGRAD offers no algorithm with an fp32 bias gradient.
  void backward_dw(float* dW, const bf16* dy, int lddy, const bf16* x, int ldx, int N, int I, int O, cudaStream_t s);

  struct TuneRecord {  // one tuned plan: the heuristic's first algorithm against the fastest one
    int m, n, k, chosen, candidates;
    float ms_first, ms_best;
  };
  const std::vector<TuneRecord>& tune_log() const { return tune_log_; }

 private:
  enum Epi { kNone, kBias, kGeluBias, kDGelu };
  struct Plan;
  // m x n result D (column-major, ldd) = op(A) op(B) (+ C, ldd, when C is given)
  void gemm(bool ta, bool tb, int m, int n, int k, const bf16* A, int lda, const bf16* B, int ldb, void* D, bool d_fp32,
            int ldd, const void* C, Epi epi, const bf16* bias, const bf16* aux, int ldaux, cudaStream_t s);
  int tune_candidates_;
  bool print_tuned_ = false;  // MATMUL_TUNE: print each tuned plan's key and choice
  std::string gpu_;           // the device's name, for the table of measured choices
  std::vector<TuneRecord> tune_log_;
  // gemm's steps on a new plan
  void describe(Plan* p, bool ta, bool tb, int m, int n, int k, int lda, int ldb, bool d_fp32, int ldd, Epi epi,
                int ldaux);
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(Plan* p, int m, int n, int k, Epi epi, int al_a, int al_b,
                                                          int al_d, int count);
  void tune(Plan* p, const std::vector<cublasLtMatmulHeuristicResult_t>& res, int m, int n, int k, const bf16* A,
            const bf16* B, void* D, const void* C, cudaStream_t s, const int64_t (&key)[8]);
  static void set_pointers(Plan* p, Epi epi, const bf16* bias, const bf16* aux);
  void run(Plan* p, const bf16* A, const bf16* B, void* D, const void* C, cudaStream_t s);
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer<char> workspace_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, Plan*> plans_;
};
