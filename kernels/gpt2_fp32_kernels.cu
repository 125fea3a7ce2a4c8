// fp32 GPT-2 kernels. Memory traffic is not tuned yet (the bf16 path is); the point here is exact,
// deterministic arithmetic to test the model and the trainer against the CPU reference.
// Activations are row-major (N, C), N = B*T. LayerNorm and attention give each row one warp (a fixed
// lane-then-warp_sum order); column sums give each column one thread that walks the rows in order; the
// matmuls are cuBLAS SGEMM in fp32 (no TF32), bias and GELU separate element-wise passes.
#include <cmath>

#include "common/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/gelu.cuh"
#include "kernels/gpt2_fp32_kernels.h"

namespace {

// y = (x - mean) * rstd * w + b per row, rstd = 1 / sqrt(var + eps): x, y (N, C); mean, rstd (N) kept for
// backward. One warp per row; the variance from a second pass about the mean (no E[x^2] - mean^2 cancellation).
__global__ void layernorm_fwd_k(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                                int N, int C, float eps) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* xr = x + int64_t(row) * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += xr[c];
  const float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int c = lane; c < C; c += 32) v += (xr[c] - m) * (xr[c] - m);
  const float r = rsqrtf(warp_sum(v) / C + eps);
  for (int c = lane; c < C; c += 32) y[int64_t(row) * C + c] = (xr[c] - m) * r * w[c] + b[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dx += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)), g = dy * w, xhat = (x - mean) * rstd: the mean and
// the variance depend on the whole row, hence the two row means. One warp per row.
__global__ void layernorm_bwd_dx_k(float* dx, const float* dy, const float* x, const float* w, const float* mean,
                                   const float* rstd, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* xr = x + int64_t(row) * C;
  const float* gr = dy + int64_t(row) * C;
  const float m = mean[row], r = rstd[row];
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float g = gr[c] * w[c];
    s1 += g;
    s2 += g * (xr[c] - m) * r;
  }
  s1 = warp_sum(s1) / C;
  s2 = warp_sum(s2) / C;
  for (int c = lane; c < C; c += 32) dx[int64_t(row) * C + c] += r * (gr[c] * w[c] - s1 - (xr[c] - m) * r * s2);
}

// Column sums in a fixed order, one thread per column c over the N rows of dy (stride ld):
// bias: out[c] += sum_n dy[n, c]; LayerNorm (x given): out[c] (dw) += sum_n dy * xhat, out2[c] (db) += sum_n dy.
__global__ void column_sums_k(float* out, float* out2, const float* dy, int ld, const float* x, const float* mean,
                              const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f, s2 = 0.0f;
  for (int n = 0; n < N; n++) {
    const float g = dy[int64_t(n) * ld + c];
    s += g;
    if (x) s2 += g * (x[int64_t(n) * C + c] - mean[n]) * rstd[n];
  }
  if (x) {
    out[c] += s2;  // LayerNorm: dw
    out2[c] += s;  //            db
  } else {
    out[c] += s;  // bias
  }
}

// y[n, o] += b[o]; y's rows have stride ld (q, k or v: a column slice of the (N, 3C) buffer).
__global__ void bias_add_k(float* y, const float* b, int N, int O, int ld) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < int64_t(N) * O) y[(i / O) * ld + i % O] += b[i % O];
}

// GELU in its tanh form (kernels/gelu.cuh), element-wise: y = GELU(x); backward dx = dy * GELU'(x).
__global__ void gelu_fwd_k(float* y, const float* x, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = gelu_value<Gelu::kTanh>(x[i]);
}
__global__ void gelu_bwd_k(float* dx, const float* x, const float* dy, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) dx[i] = dy[i] * gelu_grad<Gelu::kTanh>(x[i]);
}
// y += x: the residual add when dropout is off.
__global__ void add_k(float* y, const float* x, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] += x[i];
}

// Attention, causal, without the (T, T) matrix: for query row i of head h, p_ij = softmax_j(q_i . k_j / sqrt(hs))
// over j <= i and out_i = sum_j z_ij p_ij v_j (z_ij: the dropout factor). q, k, v rows have stride ld (3C in the
// model's (N, 3C) buffer); out is (B, T, NH * hs), heads side by side; lse (B, NH, T) = log sum_j e^(s_ij), the
// softmax's normaliser, which backward uses to recompute p. A row's index is (b NH + h) T + i, also its
// dropout mask's row. Each warp's per-lane accumulators live in shared memory: 32 x hs floats per warp.
constexpr int kMaxHs = 64, kAttWarps = 2;

// The dropout factor of probability (row, j): 0 or the scale when kept (1 without dropout).
__device__ __forceinline__ float att_keep(const DropoutArgs& d, uint32_t row_hash, int j) {
  return !d.on() ? 1.0f : dropout_keep(row_hash, uint32_t(j), d.threshold) ? d.scale : 0.0f;
}
__device__ __forceinline__ uint64_t att_key(const DropoutArgs& d) {
  return d.on() ? dropout_site_key(d.seed, *d.counter, d.site) : 0;
}

// One warp per (b, h, i): each lane walks keys j = lane, lane + 32, ... <= i with its own online softmax
// (running max m, sum l, accumulator acc rescaled by e^(m_old - m_new)); the 32 lanes are merged in a fixed
// order at the end: out = sum_t acc_t e^(m_t - M) / sum_t l_t e^(m_t - M), M the warp's max.
__global__ void __launch_bounds__(32 * kAttWarps)
    attention_fwd_k(float* out, float* lse, const float* q, const float* k, const float* v, int ld, int B, int T,
                    int NH, int hs, DropoutArgs drop) {
  __shared__ float acc[kAttWarps][32][kMaxHs + 1];
  __shared__ float qs[kAttWarps][kMaxHs], ms[kAttWarps][32], ls[kAttWarps][32];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kAttWarps + w;  // (b, h, i) flattened with i fastest
  if (row >= int64_t(B) * NH * T) return;
  const int i = int(row % T), h = int((row / T) % NH), b = int(row / (int64_t(T) * NH));
  const float scale = rsqrtf(float(hs));
  for (int e = lane; e < hs; e += 32) qs[w][e] = q[(int64_t(b) * T + i) * ld + h * hs + e] * scale;
  for (int e = 0; e < hs; e++) acc[w][lane][e] = 0.0f;
  __syncwarp();
  const uint64_t key = att_key(drop);
  const uint32_t rh = dropout_row(key, uint32_t(row));  // row = (b NH + h) T + i, the mask's row
  float m = -INFINITY, l = 0.0f;
  for (int j = lane; j <= i; j += 32) {
    const float* kj = k + (int64_t(b) * T + j) * ld + h * hs;
    const float* vj = v + (int64_t(b) * T + j) * ld + h * hs;
    float s = 0.0f;
    for (int e = 0; e < hs; e++) s += qs[w][e] * kj[e];
    const float mn = fmaxf(m, s), a = expf(m - mn), p = expf(s - mn), pz = p * att_keep(drop, rh, j);
    l = l * a + p;  // the softmax's sum is of the probabilities before dropout
    for (int e = 0; e < hs; e++) acc[w][lane][e] = acc[w][lane][e] * a + pz * vj[e];
    m = mn;
  }
  const float M = warp_max(m);
  const float f = (m == -INFINITY) ? 0.0f : expf(m - M);
  ms[w][lane] = f;
  ls[w][lane] = l * f;
  __syncwarp();
  float L = 0.0f;
  for (int t = 0; t < 32; t++) L += ls[w][t];
  for (int e = lane; e < hs; e += 32) {
    float o = 0.0f;
    for (int t = 0; t < 32; t++) o += acc[w][t][e] * ms[w][t];
    out[(int64_t(b) * T + i) * int64_t(NH * hs) + h * hs + e] = o / L;
  }
  if (lane == 0) lse[row] = M + logf(L);
}

// D_i = dout_i . out_i = sum_j p_ij z_ij dp_ij (dp_ij = dout_i . v_j), the softmax backward's row term, read
// off the output instead of summed over keys. One warp per (b, h, i) row.
__global__ void attention_D_k(float* D, const float* dout, const float* out, int B, int T, int NH, int hs) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= int64_t(B) * NH * T) return;
  const int i = int(row % T), h = int((row / T) % NH), b = int(row / (int64_t(T) * NH));
  const int64_t o = (int64_t(b) * T + i) * int64_t(NH * hs) + h * hs;
  float s = 0.0f;
  for (int e = lane; e < hs; e += 32) s += dout[o + e] * out[o + e];
  s = warp_sum(s);
  if (lane == 0) D[row] = s;
}

// dq_i = sum_j ds_ij k_j / sqrt(hs), ds_ij = p_ij (z_ij dp_ij - D_i), dp_ij = dout_i . v_j, p recomputed from
// lse. One warp per query row, lanes over keys; the lanes' partial sums added in lane order.
__global__ void __launch_bounds__(32 * kAttWarps)
    attention_dq_k(float* dq, const float* dout, const float* lse, const float* D, const float* q, const float* k,
                   const float* v, int ld, int B, int T, int NH, int hs, DropoutArgs drop) {
  __shared__ float acc[kAttWarps][32][kMaxHs + 1];
  __shared__ float qs[kAttWarps][kMaxHs], gs[kAttWarps][kMaxHs];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kAttWarps + w;
  if (row >= int64_t(B) * NH * T) return;
  const int i = int(row % T), h = int((row / T) % NH), b = int(row / (int64_t(T) * NH));
  const float scale = rsqrtf(float(hs));
  for (int e = lane; e < hs; e += 32) {
    qs[w][e] = q[(int64_t(b) * T + i) * ld + h * hs + e] * scale;
    gs[w][e] = dout[(int64_t(b) * T + i) * int64_t(NH * hs) + h * hs + e];
  }
  for (int e = 0; e < hs; e++) acc[w][lane][e] = 0.0f;
  __syncwarp();
  const float li = lse[row], Di = D[row];
  const uint64_t key = att_key(drop);
  const uint32_t rh = dropout_row(key, uint32_t(row));
  for (int j = lane; j <= i; j += 32) {
    const float* kj = k + (int64_t(b) * T + j) * ld + h * hs;
    const float* vj = v + (int64_t(b) * T + j) * ld + h * hs;
    float s = 0.0f, dp = 0.0f;
    for (int e = 0; e < hs; e++) {
      s += qs[w][e] * kj[e];
      dp += gs[w][e] * vj[e];
    }
    const float ds = expf(s - li) * (dp * att_keep(drop, rh, j) - Di) * scale;
    for (int e = 0; e < hs; e++) acc[w][lane][e] += ds * kj[e];
  }
  __syncwarp();
  for (int e = lane; e < hs; e += 32) {
    float o = 0.0f;
    for (int t = 0; t < 32; t++) o += acc[w][t][e];
    dq[(int64_t(b) * T + i) * ld + h * hs + e] = o;
  }
}

// dv_j = sum_i z_ij p_ij dout_i and dk_j = sum_i ds_ij q_i / sqrt(hs): one warp per key row j, lanes over the
// queries i >= j that see it.
__global__ void __launch_bounds__(32 * kAttWarps)
    attention_dkv_k(float* dk, float* dv, const float* dout, const float* lse, const float* D, const float* q,
                    const float* k, const float* v, int ld, int B, int T, int NH, int hs, DropoutArgs drop) {
  __shared__ float ak[kAttWarps][32][kMaxHs + 1], av[kAttWarps][32][kMaxHs + 1];
  __shared__ float ks[kAttWarps][kMaxHs], vs[kAttWarps][kMaxHs];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kAttWarps + w;
  if (row >= int64_t(B) * NH * T) return;
  const int j = int(row % T), h = int((row / T) % NH), b = int(row / (int64_t(T) * NH));
  const float scale = rsqrtf(float(hs));
  for (int e = lane; e < hs; e += 32) {
    ks[w][e] = k[(int64_t(b) * T + j) * ld + h * hs + e];
    vs[w][e] = v[(int64_t(b) * T + j) * ld + h * hs + e];
  }
  for (int e = 0; e < hs; e++) ak[w][lane][e] = av[w][lane][e] = 0.0f;
  __syncwarp();
  const uint64_t key = att_key(drop);
  for (int i = j + lane; i < T; i += 32) {
    const float* qi = q + (int64_t(b) * T + i) * ld + h * hs;
    const float* gi = dout + (int64_t(b) * T + i) * int64_t(NH * hs) + h * hs;
    const int64_t ri = (int64_t(b) * NH + h) * T + i;
    float s = 0.0f, dp = 0.0f;
    for (int e = 0; e < hs; e++) {
      s += qi[e] * scale * ks[w][e];
      dp += gi[e] * vs[w][e];
    }
    const float z = att_keep(drop, dropout_row(key, uint32_t(ri)), j);
    const float p = expf(s - lse[ri]), ds = p * (z * dp - D[ri]) * scale;
    for (int e = 0; e < hs; e++) {
      av[w][lane][e] += z * p * gi[e];
      ak[w][lane][e] += ds * qi[e];
    }
  }
  __syncwarp();
  for (int e = lane; e < hs; e += 32) {
    float ok = 0.0f, ov = 0.0f;
    for (int t = 0; t < 32; t++) {
      ok += ak[w][t][e];
      ov += av[w][t][e];
    }
    dk[(int64_t(b) * T + j) * ld + h * hs + e] = ok;
    dv[(int64_t(b) * T + j) * ld + h * hs + e] = ov;
  }
}

// One block per row n of the logits z (N, V): loss[n] = logsumexp(z) - z[target], and z is overwritten with
// its gradient (softmax(z) - onehot(target)) * scale, scale = grad_scale / N (the mean over rows).
__global__ void crossentropy_k(float* z, float* loss, const int* targets, int V, float scale) {
  const int64_t n = blockIdx.x;
  float* zr = z + n * V;
  __shared__ float red[32];
  __shared__ float bc;
  auto block_reduce = [&](float x, bool is_max) {
    x = is_max ? warp_max(x) : warp_sum(x);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
      float r = red[0];
      for (int k = 1; k < int(blockDim.x / 32); k++) r = is_max ? fmaxf(r, red[k]) : r + red[k];
      bc = r;
    }
    __syncthreads();
    const float r = bc;
    __syncthreads();
    return r;
  };
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, zr[v]);
  m = block_reduce(m, true);
  float s = 0.0f;
  for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(zr[v] - m);
  s = block_reduce(s, false);
  const int tgt = targets[n];
  const float lz = m + logf(s);
  if (threadIdx.x == 0) loss[n] = lz - zr[tgt];
  __syncthreads();  // zr[tgt] read before it is overwritten
  for (int v = threadIdx.x; v < V; v += blockDim.x) zr[v] = (expf(zr[v] - lz) - (v == tgt ? 1.0f : 0.0f)) * scale;
}

}  // namespace

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N, int C,
                       float eps, cudaStream_t s) {
  layernorm_fwd_k<<<blocks(N, 8), 256, 0, s>>>(y, mean, rstd, x, w, b, N, C, eps);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                        const float* mean, const float* rstd, int N, int C, cudaStream_t s) {
  layernorm_bwd_dx_k<<<blocks(N, 8), 256, 0, s>>>(dx, dy, x, w, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
  column_sums_k<<<blocks(C, 128), 128, 0, s>>>(dw, db, dy, C, x, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
}

void linear_forward(cublasHandle_t h, float* y, int ldy, const float* x, int ldx, const float* W, const float* b, int N,
                    int I, int O, cudaStream_t s) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSetStream(h, s));
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &one, W, I, x, ldx, &zero, y, ldy));
  if (b) {
    bias_add_k<<<blocks(int64_t(N) * O, 256), 256, 0, s>>>(y, b, N, O, ldy);
    CUDA_CHECK_LAUNCH();
  }
}

void linear_backward(cublasHandle_t h, float* dx, int lddx, bool dx_accumulate, float* dW, float* db, const float* dy,
                     int lddy, const float* x, int ldx, const float* W, int N, int I, int O, cudaStream_t s) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_CHECK(cublasSetStream(h, s));
  if (dx)
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, &one, W, I, dy, lddy, dx_accumulate ? &one : &zero,
                             dx, lddx));
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &one, x, ldx, dy, lddy, &one, dW, I));
  if (db) {
    column_sums_k<<<blocks(O, 128), 128, 0, s>>>(db, nullptr, dy, lddy, nullptr, nullptr, nullptr, N, O);
    CUDA_CHECK_LAUNCH();
  }
}

void gelu_forward(float* y, const float* x, int64_t n, cudaStream_t s) {
  gelu_fwd_k<<<blocks(n, 256), 256, 0, s>>>(y, x, n);
  CUDA_CHECK_LAUNCH();
}
void gelu_backward(float* dx, const float* x, const float* dy, int64_t n, cudaStream_t s) {
  gelu_bwd_k<<<blocks(n, 256), 256, 0, s>>>(dx, x, dy, n);
  CUDA_CHECK_LAUNCH();
}
void add_inplace(float* y, const float* x, int64_t n, cudaStream_t s) {
  add_k<<<blocks(n, 256), 256, 0, s>>>(y, x, n);
  CUDA_CHECK_LAUNCH();
}

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, int ld, int B, int T,
                       int NH, int hs, cudaStream_t s, const DropoutArgs& drop) {
  if (hs > kMaxHs) user_error("attention head size ", hs, " is above the supported ", kMaxHs, ".");
  attention_fwd_k<<<blocks(int64_t(B) * NH * T, kAttWarps), 32 * kAttWarps, 0, s>>>(out, lse, q, k, v, ld, B, T, NH, hs,
                                                                                    drop);
  CUDA_CHECK_LAUNCH();
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, int ld, int B, int T, int NH, int hs, float* D,
                        cudaStream_t s, const DropoutArgs& drop) {
  const int64_t rows = int64_t(B) * NH * T;
  attention_D_k<<<blocks(rows, 8), 256, 0, s>>>(D, dout, out, B, T, NH, hs);
  CUDA_CHECK_LAUNCH();
  attention_dq_k<<<blocks(rows, kAttWarps), 32 * kAttWarps, 0, s>>>(dq, dout, lse, D, q, k, v, ld, B, T, NH, hs, drop);
  CUDA_CHECK_LAUNCH();
  attention_dkv_k<<<blocks(rows, kAttWarps), 32 * kAttWarps, 0, s>>>(dk, dv, dout, lse, D, q, k, v, ld, B, T, NH, hs,
                                                                     drop);
  CUDA_CHECK_LAUNCH();
}

void crossentropy_forward_backward(float* z, float* loss, const int* targets, int N, int V, float grad_scale,
                                   cudaStream_t s) {
  crossentropy_k<<<unsigned(N), 1024, 0, s>>>(z, loss, targets, V, grad_scale / float(N));
  CUDA_CHECK_LAUNCH();
}
