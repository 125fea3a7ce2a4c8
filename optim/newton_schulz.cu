// cuBLASLt is column-major. A row-major (R x C) matrix is, to cuBLAS, the column-major (C x R) matrix
// X^T. With m = min(R, C), n = max(R, C) and X the (m x n) matrix Newton-Schulz works on:
//   wide (R <= C): stored = X^T (n x m, ld n):  A = st^T st;   X' = st * B + a st   (B symmetric)
//   tall (R >  C): stored = X   (m x n, ld m):  A = st st^T;   X' = B * st + a st
// Either way X' lands in the same storage layout as X, i.e. the parameter's own.
#include "common/cuda_check.h"
#include "common/error.h"
#include "optim/newton_schulz.h"

namespace {
constexpr size_t kLtWorkspace = size_t(32) << 20;

cudaDataType_t data_type(NsPrecision p) { return p == NsPrecision::Bf16 ? CUDA_R_16BF : CUDA_R_32F; }

cublasComputeType_t compute_type(NsPrecision p) {
  if (p == NsPrecision::Tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  if (p == NsPrecision::Fp32) return CUBLAS_COMPUTE_32F_PEDANTIC;
  return CUBLAS_COMPUTE_32F;
}

cublasLtMatrixLayout_t layout(NsPrecision p, int64_t rows, int64_t cols, int64_t ld, int batch, int64_t stride) {
  cublasLtMatrixLayout_t l;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, data_type(p), uint64_t(rows), uint64_t(cols), ld));
  int32_t bc = batch;
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
  CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  return l;
}
}  // namespace

NsPrecision parse_ns_precision(const std::string& s, const std::string& key) {
  if (s == "bf16") return NsPrecision::Bf16;
  if (s == "tf32") return NsPrecision::Tf32;
  if (s == "fp32") return NsPrecision::Fp32;
  user_error(key, " must be bf16, tf32 or fp32 (got '", s, "').");
}

size_t ns_elem_bytes(NsPrecision p) { return p == NsPrecision::Bf16 ? 2 : 4; }

// D = alpha op(A) op(B) + beta C over a batch, with its algorithm chosen once at construction.
struct NewtonSchulz::Gemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;

  Gemm(cublasLtHandle_t lt, NsPrecision p, bool ta, bool tb, int64_t ar, int64_t ac, int64_t lda, int64_t sa,
       int64_t br, int64_t bcol, int64_t ldb, int64_t sb, int64_t cr, int64_t cc, int64_t ldc, int64_t scs, int batch) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, compute_type(p), CUDA_R_32F));
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    la = layout(p, ar, ac, lda, batch, sa);
    lb = layout(p, br, bcol, ldb, batch, sb);
    lc = layout(p, cr, cc, ldc, batch, scs);
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = kLtWorkspace;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) throw CudaError("cuBLASLt found no algorithm for a Newton-Schulz GEMM");
    algo = res.algo;
  }
  ~Gemm() {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }
  void run(cublasLtHandle_t lt, float alpha, const void* A, const void* B, float beta, const void* C, void* D, void* ws,
           cudaStream_t s) const {
    CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, D, lc, &algo, ws, kLtWorkspace, s));
  }
};

struct NewtonSchulz::Plan {
  int64_t first;   // offset of the sub-batch's first matrix in x
  int64_t count;   // matrices in the sub-batch
  int64_t xs, gs;  // stride of X matrices (in x and in scratch alike) and of Gram matrices
  bool wide;       // rows <= cols
  std::unique_ptr<Gemm> gram, poly, update;
};

NewtonSchulz::NewtonSchulz(std::vector<NsGroup> groups, int steps, double a, double b, double c, size_t workspace_bytes,
                           NsPrecision precision)
    : groups_(std::move(groups)), steps_(steps), a_(float(a)), b_(float(b)), c_(float(c)), precision_(precision) {
  const size_t eb = ns_elem_bytes(precision);
  CUBLAS_CHECK(cublasLtCreate(&lt_));
  lt_workspace_.alloc(kLtWorkspace, "cuBLASLt workspace");
  // Scratch per matrix: two X buffers (ping-pong) and the Gram matrices A and B.
  size_t scratch_elems = 0;
  struct Pending {
    const NsGroup* g;
    int64_t first;
    int count;
  };
  std::vector<Pending> pend;
  for (const auto& g : groups_) {
    int64_t m = std::min(g.rows, g.cols), xs = ns_matrix_stride(g.rows, g.cols), gs = ns_matrix_stride(m, m);
    size_t per = size_t(2 * xs + 2 * gs) * eb;
    const int cap = int(std::min<size_t>(size_t(g.count), std::max<size_t>(1, workspace_bytes / per)));  // fits an int
    for (int i = 0; i < g.count; i += cap) {
      int n = std::min(cap, g.count - i);
      pend.push_back({&g, g.first + i * g.stride, n});
      scratch_elems = std::max(scratch_elems, size_t(n) * size_t(2 * xs + 2 * gs));
    }
  }
  scratch_.alloc(scratch_elems * eb, "Newton-Schulz scratch");
  for (const auto& p : pend) {
    const NsGroup& g = *p.g;
    const int64_t R = g.rows, C = g.cols, m = std::min(R, C), n = std::max(R, C);
    auto plan = std::make_unique<Plan>();
    plan->first = p.first;
    plan->count = p.count;
    plan->xs = ns_matrix_stride(R, C);
    plan->gs = ns_matrix_stride(m, m);
    plan->wide = R <= C;
    const int64_t xs = plan->xs, gs = plan->gs;
    const int nb = p.count;
    // One layout serves x and scratch: the caller stores x matrices at the same stride, ns_matrix_stride.
    CHECK(g.stride == xs);
    if (plan->wide) {  // wide: stored (n x m, ld n)
      plan->gram = std::make_unique<Gemm>(lt_, precision_, true, false, n, m, n, xs, n, m, n, xs, m, m, m, gs, nb);
      plan->update = std::make_unique<Gemm>(lt_, precision_, false, false, n, m, n, xs, m, m, m, gs, n, m, n, xs, nb);
    } else {  // tall: stored (m x n, ld m)
      plan->gram = std::make_unique<Gemm>(lt_, precision_, false, true, m, n, m, xs, m, n, m, xs, m, m, m, gs, nb);
      plan->update = std::make_unique<Gemm>(lt_, precision_, false, false, m, m, m, gs, m, n, m, xs, m, n, m, xs, nb);
    }
    plan->poly = std::make_unique<Gemm>(lt_, precision_, false, false, m, m, m, gs, m, m, m, gs, m, m, m, gs, nb);
    plans_.push_back(std::move(plan));
  }
}

NewtonSchulz::~NewtonSchulz() {
  plans_.clear();
  if (lt_) cublasLtDestroy(lt_);
}

void NewtonSchulz::run(void* x, cudaStream_t s) {
  void* ws = lt_workspace_.get();
  const int64_t eb = int64_t(ns_elem_bytes(precision_));  // offsets below are in elements, pointers in bytes
  char* base = scratch_.get();
  for (const auto& p : plans_) {
    // Scratch for this sub-batch: S0 | S1 | A | B, each holding every matrix of the sub-batch.
    char* S[2] = {base, base + p->count * p->xs * eb};
    char* A = base + 2 * p->count * p->xs * eb;
    char* B = A + p->count * p->gs * eb;
    char* X0 = static_cast<char*>(x) + p->first * eb;
    for (int it = 0; it < steps_; it++) {
      const char* src = it == 0 ? X0 : S[(it - 1) % 2];
      char* dst = (it == steps_ - 1 && steps_ > 1) ? X0 : S[it % 2];
      p->gram->run(lt_, 1.0f, src, src, 0.0f, A, A, ws, s);
      p->poly->run(lt_, c_, A, A, b_, A, B, ws, s);
      if (p->wide)
        p->update->run(lt_, 1.0f, src, B, a_, src, dst, ws, s);
      else
        p->update->run(lt_, 1.0f, B, src, a_, src, dst, ws, s);
    }
    if (steps_ == 1) CUDA_CHECK(cudaMemcpyAsync(X0, S[0], size_t(p->count * p->xs * eb), cudaMemcpyDeviceToDevice, s));
  }
}
