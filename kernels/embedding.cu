// Token + position embedding (kernels/embedding.h). Forward: one thread per element of x (N, C), two
// gathers and a store. Backward: wpe's gradient sums the B rows of each position in batch order; wte's
// gradient sums the rows of each token, found by sorting (token, position) by token (cub's stable radix
// sort), in windows of sorted positions (below), so every sum has one fixed order and no float atomics.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "common/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/embedding.h"

namespace {
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// v[i] = i: the positions that the sort carries along with their tokens.
__global__ void iota_k(int* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = i;
}

// x[n, c] = wte[tok[n], c] + wpe[n % T, c], added in fp32.
template <class X, class P>
__global__ void encoder_fwd_k(X* x, const int* tok, const P* wte, const P* wpe, int N, int T, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(N) * C) return;
  const int n = int(i / C), c = int(i % C);
  x[i] = from_f<X>(to_f(wte[int64_t(tok[n]) * C + c]) + to_f(wpe[int64_t(n % T) * C + c]));
}

// dwpe[t, c] += sum_b dx[b, t, c] (kSet: =): one thread per (t, c), b in order.
template <class X, bool kSet = false>
__global__ void encoder_bwd_wpe_k(float* dwpe, const X* dx, int B, int T, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(T) * C) return;
  float s = 0.0f;
  for (int b = 0; b < B; b++) s += to_f(dx[int64_t(b) * T * C + i]);
  dwpe[i] = kSet ? s : dwpe[i] + s;
}

// The sum of a token's rows goes to dwte[token] (+=), or with kRuns to row (run number) of a compact
// table (=: each run's row is written once), runs[i] being 1 + the run number at sorted position i.
template <bool kRuns>
__device__ __forceinline__ void put_row(float* out, const int* runs, int at, int tok, int C, int c, const float* v,
                                        int n) {
  float* row = out + int64_t(kRuns ? runs[at] - 1 : tok) * C + c;
  for (int e = 0; e < n; e++) row[e] = kRuns ? v[e] : row[e] + v[e];
}

// wte's gradient in two launches. wte_pieces_k: one block per window of sorted positions, whose positions
// fall into pieces of equal tokens, one warp per piece (round-robin), its rows summed in position order, 4
// rows' loads in flight. A piece that is its token's whole run adds its sum to the row at once; one that
// continues a run from the window before (slot 0) or only starts one (slot 1) leaves its sum in
// `partial`, and wte_finish_k, in the window where such a run ends, adds its windows' sums in window
// order to the row. Each token's row is written by one warp or one finish block, so no atomics; and a
// frequent token (" the": 5,000 of 64K tokens of English) is spread over many blocks instead of one.
// kRuns: the rows go to a compact table, one per run (put_row).
constexpr int kPieceWarps = 8;
template <class X, bool kRuns>
__global__ void __launch_bounds__(32 * kPieceWarps)
    wte_pieces_k(float* dwte, float* partial, const X* dx, const int* key, const int* pos, const int* runs, int N,
                 int C) {
  constexpr int kVec = 16 / sizeof(X), kRows = 4;
  const int lo = blockIdx.x * kEmbeddingWindow, n = min(kEmbeddingWindow, N - lo);
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int my_pos = lane < n ? pos[lo + lane] : 0;  // lane j holds the window's j-th row
  const bool head = lane < n && (lane == 0 || key[lo + lane] != key[lo + lane - 1]);
  const unsigned heads = __ballot_sync(0xffffffffu, head);
  int k = 0;
  for (unsigned m = heads; m != 0; m &= m - 1, k++) {
    if (k % kPieceWarps != w) continue;
    const int begin = __ffs(int(m)) - 1, rest = int(m & (m - 1)), end = rest ? __ffs(rest) - 1 : n;
    const int tok = key[lo + begin];
    const bool left = begin == 0 && lo > 0 && key[lo - 1] == tok;
    const bool right = end == n && lo + n < N && key[lo + n] == tok;
    for (int c0 = 0; c0 < C; c0 += 32 * kVec) {
      const int c = c0 + lane * kVec;
      float acc[kVec] = {};
      for (int r = begin; r < end; r += kRows) {
        X v[kRows][kVec] = {};
#pragma unroll
        for (int i = 0; i < kRows; i++) {
          const int p = __shfl_sync(0xffffffffu, my_pos, min(r + i, end - 1));
          if (r + i < end && c < C)
            *reinterpret_cast<uint4*>(v[i]) = *reinterpret_cast<const uint4*>(dx + int64_t(p) * C + c);
        }
#pragma unroll
        for (int i = 0; i < kRows; i++)
          if (r + i < end)
            for (int e = 0; e < kVec; e++) acc[e] += to_f(v[i][e]);
      }
      if (c >= C) continue;
      if (left || right) {  // a part of a run over several windows: wte_finish_k adds it
        float* out = partial + (int64_t(blockIdx.x) * 2 + (left ? 0 : 1)) * C + c;
        for (int e = 0; e < kVec; e++) out[e] = acc[e];
      } else {
        put_row<kRuns>(dwte, runs, lo + begin, tok, C, c, acc, kVec);
      }
    }
  }
}

// One block per window: if a run that began in an earlier window ends in this one, its windows' sums (slot
// 1 in its first window, slot 0 after) added in window order, then to its row (put_row).
template <bool kRuns>
__global__ void wte_finish_k(float* dwte, const float* partial, const int* key, const int* runs, int N, int C) {
  const int lo = blockIdx.x * kEmbeddingWindow, n = min(kEmbeddingWindow, N - lo);
  if (lo == 0 || key[lo - 1] != key[lo]) return;
  const int tok = key[lo];
  if (key[lo + n - 1] == tok && lo + n < N && key[lo + n] == tok) return;  // it goes on past this window
  int a = 0, b = lo;  // its first position: the first key equal to tok (the keys are sorted)
  while (a < b) {
    const int mid = (a + b) / 2;
    if (key[mid] < tok)
      a = mid + 1;
    else
      b = mid;
  }
  const int first = a / kEmbeddingWindow, last = int(blockIdx.x);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float s = 0.0f;
#pragma unroll 8
    for (int win = first; win <= last; win++) s += partial[(int64_t(win) * 2 + (win == first ? 1 : 0)) * C + c];
    put_row<kRuns>(dwte, runs, lo, tok, C, c, &s, 1);
  }
}

// heads[i] = 1 where sorted position i starts a run of equal tokens.
__global__ void run_heads_k(int* heads, const int* key, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) heads[i] = i == 0 || key[i] != key[i - 1];
}

// The token sums' header: the count of runs, and each run's token id at its number.
__global__ void run_ids_k(int* count, int* ids, const int* key, const int* runs, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  if (i == 0 || key[i] != key[i - 1]) ids[runs[i] - 1] = key[i];
  if (i == N - 1) *count = runs[i];
}

// One block per row: blocks [0, N) add the used token rows to their tokens' rows of dwte, blocks [N, N + T)
// the position rows to dwpe, 16 bytes per thread at a time.
__global__ void add_token_sums_k(float* dwte, float* dwpe, const int* count, const int* ids, const float* rows,
                                 const float* wpe, int N, int C) {
  const int u = blockIdx.x;
  if (u < N && u >= *count) return;
  float* dst = u < N ? dwte + int64_t(ids[u]) * C : dwpe + int64_t(u - N) * C;
  const float* src = u < N ? rows + int64_t(u) * C : wpe + int64_t(u - N) * C;
  for (int c = threadIdx.x * 4; c < C; c += blockDim.x * 4) {
    const float4 a = *reinterpret_cast<const float4*>(src + c);
    float4 d = *reinterpret_cast<float4*>(dst + c);
    d.x += a.x, d.y += a.y, d.z += a.z, d.w += a.w;
    *reinterpret_cast<float4*>(dst + c) = d;
  }
}

struct SumsLayout {  // token_sums' buffer, byte offsets
  size_t ids, rows, wpe, bytes;
};
SumsLayout sums_layout(int N, int T, int C) {
  SumsLayout l;
  l.ids = 16;
  l.rows = l.ids + (size_t(N) * 4 + 15) / 16 * 16;
  l.wpe = l.rows + size_t(N) * size_t(C) * 4;
  l.bytes = l.wpe + size_t(T) * size_t(C) * 4;
  return l;
}
}  // namespace

// bits_: the sort looks at the token's low bits only, enough for ids < vocab. The constructor asks cub how
// much scratch the sort needs (a call with null pointers) and allocates it once.
TokenGroups::TokenGroups(int N, int vocab, int channels) : N_(N), C_(channels), bits_(1) {
  while ((1 << bits_) < vocab) bits_++;
  for (auto* b : {&vals_in_, &keys_out_, &vals_out_}) b->alloc(size_t(N), "token groups");
  partial_.alloc(size_t(blocks(N, kEmbeddingWindow)) * 2 * size_t(channels), "embedding backward sums");
  iota_k<<<blocks(N, 256), 256>>>(vals_in_.get(), N);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes_, static_cast<const int*>(nullptr),
                                             static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
                                             static_cast<int*>(nullptr), N, 0, bits_));
  temp_.alloc(temp_bytes_, "token groups");
}

void TokenGroups::keep_runs() {
  if (runs_.get()) return;
  heads_.alloc(size_t(N_), "token runs");
  runs_.alloc(size_t(N_), "token runs");
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes_, static_cast<const int*>(nullptr),
                                           static_cast<int*>(nullptr), N_));
  scan_temp_.alloc(scan_bytes_, "token runs");
}

// (token, position) sorted by token, stably; with keep_runs, the runs numbered (a scan of their heads).
void TokenGroups::build(const int* d_tokens, cudaStream_t s) {
  size_t bytes = temp_bytes_;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.get(), bytes, d_tokens, keys_out_.get(), vals_in_.get(),
                                             vals_out_.get(), N_, 0, bits_, s));
  if (!runs_.get()) return;
  run_heads_k<<<blocks(N_, 256), 256, 0, s>>>(heads_.get(), keys_out_.get(), N_);
  CUDA_CHECK_LAUNCH();
  bytes = scan_bytes_;
  CUDA_CHECK(cub::DeviceScan::InclusiveSum(scan_temp_.get(), bytes, heads_.get(), runs_.get(), N_, s));
}

template <class X, class P>
void encoder_forward(X* x, const int* tok, const P* wte, const P* wpe, int N, int T, int C, cudaStream_t s) {
  encoder_fwd_k<<<blocks(int64_t(N) * C, 256), 256, 0, s>>>(x, tok, wte, wpe, N, T, C);
  CUDA_CHECK_LAUNCH();
}

template <class X>
void encoder_backward(float* dwte, float* dwpe, const X* dx, const TokenGroups& g, int B, int T, int C,
                      cudaStream_t s) {
  encoder_bwd_wpe_k<<<blocks(int64_t(T) * C, 256), 256, 0, s>>>(dwpe, dx, B, T, C);
  CUDA_CHECK_LAUNCH();
  CHECK(C % (16 / int(sizeof(X))) == 0 && C == g.channels() && g.N() == B * T);
  const unsigned windows = blocks(g.N(), kEmbeddingWindow);
  wte_pieces_k<X, false><<<windows, 32 * kPieceWarps, 0, s>>>(dwte, g.partial(), dx, g.sorted_tokens(), g.sorted_pos(),
                                                              nullptr, g.N(), C);
  CUDA_CHECK_LAUNCH();
  wte_finish_k<false><<<windows, 256, 0, s>>>(dwte, g.partial(), g.sorted_tokens(), nullptr, g.N(), C);
  CUDA_CHECK_LAUNCH();
}

size_t token_sums_bytes(int N, int T, int C) { return sums_layout(N, T, C).bytes; }

template <class X>
void token_sums(void* sums, const X* dx, const TokenGroups& g, int B, int T, int C, cudaStream_t s) {
  CHECK(g.runs() && C % (16 / int(sizeof(X))) == 0 && C == g.channels() && g.N() == B * T);
  const SumsLayout l = sums_layout(g.N(), T, C);
  char* p = static_cast<char*>(sums);
  int* count = reinterpret_cast<int*>(p);
  float *rows = reinterpret_cast<float*>(p + l.rows), *wpe = reinterpret_cast<float*>(p + l.wpe);
  run_ids_k<<<blocks(g.N(), 256), 256, 0, s>>>(count, reinterpret_cast<int*>(p + l.ids), g.sorted_tokens(), g.runs(),
                                               g.N());
  CUDA_CHECK_LAUNCH();
  encoder_bwd_wpe_k<X, true><<<blocks(int64_t(T) * C, 256), 256, 0, s>>>(wpe, dx, B, T, C);
  CUDA_CHECK_LAUNCH();
  const unsigned windows = blocks(g.N(), kEmbeddingWindow);
  wte_pieces_k<X, true><<<windows, 32 * kPieceWarps, 0, s>>>(rows, g.partial(), dx, g.sorted_tokens(), g.sorted_pos(),
                                                             g.runs(), g.N(), C);
  CUDA_CHECK_LAUNCH();
  wte_finish_k<true><<<windows, 256, 0, s>>>(rows, g.partial(), g.sorted_tokens(), g.runs(), g.N(), C);
  CUDA_CHECK_LAUNCH();
}

void add_token_sums(float* dwte, float* dwpe, const void* sums, int N, int T, int C, cudaStream_t s) {
  CHECK(C % 4 == 0);
  const SumsLayout l = sums_layout(N, T, C);
  const char* p = static_cast<const char*>(sums);
  add_token_sums_k<<<unsigned(N + T), 256, 0, s>>>(
      dwte, dwpe, reinterpret_cast<const int*>(p), reinterpret_cast<const int*>(p + l.ids),
      reinterpret_cast<const float*>(p + l.rows), reinterpret_cast<const float*>(p + l.wpe), N, C);
  CUDA_CHECK_LAUNCH();
}

template void encoder_forward(float*, const int*, const float*, const float*, int, int, int, cudaStream_t);
template void encoder_forward(__nv_bfloat16*, const int*, const __nv_bfloat16*, const __nv_bfloat16*, int, int, int,
                              cudaStream_t);
template void encoder_backward(float*, float*, const float*, const TokenGroups&, int, int, int, cudaStream_t);
template void encoder_backward(float*, float*, const __nv_bfloat16*, const TokenGroups&, int, int, int, cudaStream_t);
template void token_sums(void*, const float*, const TokenGroups&, int, int, int, cudaStream_t);
template void token_sums(void*, const __nv_bfloat16*, const TokenGroups&, int, int, int, cudaStream_t);

TokenBatch::TokenBatch(int N, int vocab, int channels) : N_(N), groups_(N, vocab, channels) {
  tokens_.alloc(size_t(N), "tokens");
  targets_.alloc(size_t(N), "targets");
}

void TokenBatch::set(const int* tokens, const int* targets, cudaStream_t s) {
  CUDA_CHECK(cudaMemcpyAsync(tokens_.get(), tokens, size_t(N_) * sizeof(int), cudaMemcpyHostToDevice, s));
  if (targets)
    CUDA_CHECK(cudaMemcpyAsync(targets_.get(), targets, size_t(N_) * sizeof(int), cudaMemcpyHostToDevice, s));
  groups_.build(tokens_.get(), s);
}
