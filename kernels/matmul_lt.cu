#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "common/cuda_check.h"
#include "common/event_timer.h"
#include "kernels/matmul_choices.h"
#include "kernels/matmul_lt.h"

namespace {
constexpr size_t kWorkspace = size_t(32) << 20;  // what cuBLASLt's Hopper kernels like to have

int alignment(const void* p) {  // largest power of two <= 256 dividing the address
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int al = 256;
  while (al > 2 && (a % uintptr_t(al))) al /= 2;
  return al;
}
}  // namespace

struct LtMatmul::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    for (auto l : {a, b, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

LtMatmul::LtMatmul(int tune_candidates) {
  const char* env = std::getenv("MATMUL_TUNE");
  if (tune_candidates == 0 && env && std::atoi(env) > 1) {
    tune_candidates = std::atoi(env);
    print_tuned_ = true;
    std::fprintf(stderr,
                 "MATMUL_TUNE=%d: the first call of each matmul times its algorithms on its own buffers, "
                 "which it overwrites or adds to several times: a run to discover choices, not to train.\n",
                 tune_candidates);
  }
  tune_candidates_ = std::max(1, tune_candidates);
  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) gpu_ = prop.name;
  if (print_tuned_) std::fprintf(stderr, "  {\"%s\", %zu, ...}\n", gpu_.c_str(), cublasLtGetVersion());
  CUBLAS_CHECK(cublasLtCreate(&lt_));
  workspace_.alloc(kWorkspace, "cuBLASLt workspace");
}

LtMatmul::~LtMatmul() {
  for (auto& kv : plans_) delete kv.second;
  if (lt_) cublasLtDestroy(lt_);
}

// A plan per (transposes, shape, leading dimensions, epilogue, pointer alignments): made and, with tuning,
// timed on the first call; every later call only sets the epilogue's pointers and runs.
void LtMatmul::gemm(bool ta, bool tb, int m, int n, int k, const bf16* A, int lda, const bf16* B, int ldb, void* D,
                    bool d_fp32, int ldd, const void* C, Epi epi, const bf16* bias, const bf16* aux, int ldaux,
                    cudaStream_t s) {
  const int al_a = alignment(A), al_b = alignment(B), al_d = std::min(alignment(D), C ? alignment(C) : 256);
  const auto key = std::make_tuple(
      int64_t(ta) | int64_t(tb) << 1 | int64_t(d_fp32) << 2 | int64_t(epi) << 3 | int64_t(C != nullptr) << 6,
      int64_t(m), int64_t(n), int64_t(k), int64_t(lda) << 32 | ldb, int64_t(ldd) << 32 | ldaux,
      int64_t(al_a) << 32 | al_b, int64_t(al_d) << 32 | (aux ? alignment(aux) : 0));
  Plan*& p = plans_[key];
  if (!p) {
    p = new Plan;
    describe(p, ta, tb, m, n, k, lda, ldb, d_fp32, ldd, epi, ldaux);
    const int64_t k8[8] = {std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key),
                           std::get<4>(key), std::get<5>(key), std::get<6>(key), std::get<7>(key)};
    // A measured choice is an index into the heuristic's list of kMatmulChoiceCandidates.
    const int chosen = tune_candidates_ > 1 ? 0 : matmul_choice(gpu_, cublasLtGetVersion(), k8);
    const int count = chosen > 0 ? kMatmulChoiceCandidates : tune_candidates_;
    const std::vector<cublasLtMatmulHeuristicResult_t> res = candidates(p, m, n, k, epi, al_a, al_b, al_d, count);
    p->algo = res[size_t(chosen) < res.size() ? size_t(chosen) : 0].algo;
    if (tune_candidates_ > 1 && res.size() > 1) {
      set_pointers(p, epi, bias, aux);
      tune(p, res, m, n, k, A, B, D, C, s, k8);
    }
  }
  set_pointers(p, epi, bias, aux);
  run(p, A, B, D, C, s);
}

// The plan's operation (fp32 accumulation, transposes, epilogue and its data types) and matrix layouts:
// A and B bf16; C and D bf16, or fp32 for weight gradients (d_fp32).
void LtMatmul::describe(Plan* p, bool ta, bool tb, int m, int n, int k, int lda, int ldb, bool d_fp32, int ldd, Epi epi,
                        int ldaux) {
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
  const cublasLtEpilogue_t e = epi == kBias       ? CUBLASLT_EPILOGUE_BIAS
                               : epi == kGeluBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                               : epi == kDGelu    ? CUBLASLT_EPILOGUE_DGELU
                                                  : CUBLASLT_EPILOGUE_DEFAULT;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
  if (epi == kBias || epi == kGeluBias) {
    const cudaDataType_t bt = CUDA_R_16BF;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
  }
  if (epi == kGeluBias || epi == kDGelu) {  // aux: the GELU's input, written by forward, read by DGELU
    const int64_t ld = ldaux;
    const cudaDataType_t at = CUDA_R_16BF;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof at));
  }
  const cudaDataType_t dt = d_fp32 ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, dt, m, n, ldd));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, dt, m, n, ldd));
}

// The heuristic's best algorithms for the plan (up to tune_candidates_, at least one), given the workspace
// and the pointers' alignments (al_*, bytes).
std::vector<cublasLtMatmulHeuristicResult_t> LtMatmul::candidates(Plan* p, int m, int n, int k, Epi epi, int al_a,
                                                                  int al_b, int al_d, int count) {
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspace;
  const uint32_t aa = uint32_t(al_a), ab = uint32_t(al_b), ad = uint32_t(al_d);
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad));
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(count));
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_, p->op, p->a, p->b, p->c, p->d, pref, count, res.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw CudaError(
        str_cat("cuBLASLt has no algorithm for a ", m, "x", n, "x", k, " bf16 matmul (epilogue ", int(epi), ")"));
  res.resize(size_t(found));
  return res;
}

// Times each candidate on the call's own buffers (median of 5) and keeps the fastest; logs it against the first.
void LtMatmul::tune(Plan* p, const std::vector<cublasLtMatmulHeuristicResult_t>& res, int m, int n, int k,
                    const bf16* A, const bf16* B, void* D, const void* C, cudaStream_t s, const int64_t (&key)[8]) {
  const int found = int(res.size());
  int best = 0;
  std::vector<float> ms(static_cast<size_t>(found));
  for (int i = 0; i < found; i++) {
    ms[size_t(i)] = 1e30f;
    if (res[size_t(i)].state != CUBLAS_STATUS_SUCCESS) continue;
    p->algo = res[size_t(i)].algo;
    ms[size_t(i)] = median_event_ms([&] { run(p, A, B, D, C, s); }, s, 5);
    if (ms[size_t(i)] < ms[size_t(best)]) best = i;
  }
  p->algo = res[size_t(best)].algo;
  tune_log_.push_back({m, n, k, best, found, ms[0], ms[size_t(best)]});
  if (print_tuned_)  // kernels/matmul_choices.cpp's form, then what was measured
    std::fprintf(
        stderr, "    {{%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld}, %d},  // %dx%dx%d %.4f -> %.4f ms of %d\n",
        (long long)key[0], (long long)key[1], (long long)key[2], (long long)key[3], (long long)key[4],
        (long long)key[5], (long long)key[6], (long long)key[7], best, m, n, k, ms[0], ms[size_t(best)], found);
}

void LtMatmul::set_pointers(Plan* p, Epi epi, const bf16* bias, const bf16* aux) {
  if (epi == kBias || epi == kGeluBias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  if (epi == kGeluBias || epi == kDGelu)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
}

void LtMatmul::run(Plan* p, const bf16* A, const bf16* B, void* D, const void* C, cudaStream_t s) {
  const float alpha = 1.0f, beta = C ? 1.0f : 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(lt_, p->op, &alpha, A, p->a, B, p->b, &beta, C ? C : D, p->c, D, p->d, &p->algo,
                              workspace_.get(), kWorkspace, s));
}

void LtMatmul::forward(bf16* y, int ldy, const bf16* x, int ldx, const bf16* W, const bf16* b, int N, int I, int O,
                       cudaStream_t s, const bf16* residual, bf16* gelu_pre) {
  // Column-major view: y^T (O x N) = W (O x I, stored as I x O, transposed) * x^T (I x N).
  CHECK(!(gelu_pre && residual) && (!gelu_pre || b));
  const Epi epi = gelu_pre ? kGeluBias : b ? kBias : kNone;
  gemm(true, false, O, N, I, W, I, x, ldx, y, false, ldy, residual, epi, b, gelu_pre, ldy, s);
}

void LtMatmul::backward_dx(bf16* dx, int lddx, bool accumulate, const bf16* dy, int lddy, const bf16* W, int N, int I,
                           int O, cudaStream_t s, const bf16* gelu_pre) {
  CHECK(!(gelu_pre && accumulate));
  // dx^T (I x N) = W^T (I x O: W stored as I x O) * dy^T (O x N)
  gemm(false, false, I, N, O, W, I, dy, lddy, dx, false, lddx, accumulate ? dx : nullptr, gelu_pre ? kDGelu : kNone,
       nullptr, gelu_pre, lddx, s);
}

void LtMatmul::backward_dw(float* dW, const bf16* dy, int lddy, const bf16* x, int ldx, int N, int I, int O,
                           cudaStream_t s) {
  // dW^T (I x O, i.e. row-major dW) += x^T (I x N) * dy (N x O)
  gemm(false, true, I, O, N, x, ldx, dy, lddy, dW, true, I, dW, kNone, nullptr, nullptr, 0, s);
}
