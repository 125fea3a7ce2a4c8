// VeLO step, per element 68 B (pass A 4, pass B 36, pass C 28; the first step after construction or
// params_changed 72: its pass B reads p), plus the hypernetwork over all tensors:
//   F2 builds each tensor's LSTM input from pass B's sums of the OLD m, v (and p^2) - the LSTM sees the
//   accumulators lagged by one step - then GEMM [linear_1; linear_2], max over tensors, GEMM LSTM,
//   gates, GEMM [rnn_to_controls; step_size], GEMM candidate interpolation (x 100/256).
// GEMMs are FP32 cuBLAS (no TF32); biases ride along as a constant-1 input column.
// 2-D factored tensors run passes B and C in tiles, one column per thread (lo_core.h): 18 of the 30
// features vary per element; the 12 built from R or C alone (15-26) get their sums of squares from the
// R and C vectors (F2) and their share of the first layer once per row / column and step (velo_side),
// so an element's first layer is 18 x 4 multiply-adds on two gathered 4-vectors.
// Files: velo.cu (this: the step's first kernel, pass B, F2, the LSTM and the optimizer), velo_pass_c.cu
// (the side tables and pass C), velo_device.cuh (what they share).
#include <algorithm>
#include <cmath>

#include "optim/lopt/velo_device.cuh"
#include "optim/step_scalars.cuh"

using namespace velo;

namespace {
constexpr int kChunk = 4096;  // LoCore's chunk map (small_fc_lopt's exact pass C; VeLO's passes use LoWork)

// One warp, lane j the loss EMA of decay j (j < 10): each lane computes what the one-thread loop computed
// for its j, in the same expressions, so the bits are the same; 4 us under ncu where the loop took 10 (the
// step's first kernel: nothing runs beside it).
__global__ void __launch_bounds__(32)
    velo_begin(int64_t* step, VeloLossState* lb, const float* loss, int64_t num_steps, double lr, LrSchedule sched,
               const float* gscale, VeloScalars* scalars) {
  const int j = int(threadIdx.x), jj = j < 10 ? j : 0;  // lanes 10-31 repeat lane 0: a max over them is lane 0's
  const int64_t t = *step;
  const float L = *loss;
  VeloLossState& b = *lb;
  const int64_t it = b.it;
  const float decay = b.decay[jj], unbias = 1.0f - powf(decay, float(it + 1));
  float approx_max = L;
  if (it > 0) {
    approx_max = b.means[jj] / unbias;
    for (int o = 16; o > 0; o >>= 1) approx_max = fmaxf(approx_max, __shfl_xor_sync(0xffffffffu, approx_max, o));
  }
  const float lc = fminf(2.0f * fabsf(approx_max), L);
  // As the loop compiled: decay * mean fused into the add of the other product (the same bits).
  const float mean = __fmaf_rn(decay, b.means[jj], lc * (1.0f - decay));
  const float cm = mean / unbias, run_min = fminf(b.running_min[jj], cm);
  const float cm_next = __shfl_down_sync(0xffffffffu, cm, 1);
  __syncwarp();  // every lane has read the state before lanes 0-9 write it
  if (j < 10) {
    b.means[j] = mean;
    b.running_min[j] = run_min;
  }
  const float tau[9] = {0.03f, 0.1f, 0.2f, 0.4f, 0.6f, 0.8f, 0.9f, 1.0f, 1.1f};
  if (j < 9) {
    const float frac = float(double(t) / double(num_steps));
    scalars->lstm_shared[j] = tanhf(10.0f * (frac - tau[j]));
    const float num = cm - run_min, den = fmaxf(1e-8f, cm_next - run_min);
    scalars->lstm_shared[9 + j] = it + 1 <= 2 ? 0.0f : fminf(1.0f, fmaxf(-1.0f, num / den - 1.0f));
  }
  if (j == 0) {
    b.it = it + 1;
    scalars->count = t;
    scalars->step.grad_scale = read_grad_scale(gscale);
    scalars->step.lr = float(lr * sched.factor(t));
    *step = t + 1;
  }
}

// Pass B: moments, and per block the sums of squares of the features plus the old state's sums (LSTM
// inputs). Channels 15-26 of factored tensors are left to F2 (lo_side_sums). kReadP false: p is not read
// and channel 2 (the sum of p^2) is psq[block], which the last pass C summed over the same elements in the
// same order as it wrote them (so the same bits), 4 of pass B's 40 bytes an element.
// k16: the records in bf16 (velo.bf16_record), rounded with the tensor's key of this step.
template <bool kReadP, bool k16>
__global__ void __launch_bounds__(kLoThreads)
    velo_pass_b(const LoPassB<VeloScalars> a, const double* __restrict__ psq) {
  LO_PASS_B_POINTERS(a);
  LoRec<k16>* __restrict__ rs = reinterpret_cast<LoRec<k16>*>(state);
  const LoDecays& d = a.d;
  const LoWork w = works[blockIdx.x];
  const LoTensor t = ts[w.tensor];
  const float gs = sc->step.grad_scale;
  const uint64_t key = k16 ? lo_r16_tensor_key(uint64_t(sc->count), uint32_t(t.table)) : 0;
  float acc[kS];
#pragma unroll
  for (int k = 0; k < kS; k++) acc[k] = 0.0f;
  auto old_sums = [&](float4 old) {
    acc[kF + 0] += old.x;
    acc[kF + 1] += old.y;
    acc[kF + 2] += old.z;
    acc[kF + 3] += old.x * old.x;
    acc[kF + 4] += old.y * old.y;
    acc[kF + 5] += old.z * old.z;
    acc[kF + 6] += old.w;
    acc[kF + 7] += old.w * old.w;
  };
  if (w.tile) {
    const LoSides sd = lo_sides(t, rfac, cfac);
    const int64_t col = w.col0 + int(threadIdx.x);
    const float4 fb = col < t.nb ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    lo_tile_column<4, kReadP>(w, t, g, p, rs, [&](int64_t row, int64_t at, float gv, float pv, float4 old) {
      float sg[3];
      lo_tile_sg(sd.fac_a[row], fb, sg);
      const float gg = velo_g(gv, gs);
      old_sums(old);
      const float4 st = lo_step_record(rs, t.s_off + at, old, gg, d, key, at);
      float x[18];
      velo_elem18(gg, pv, st, sg, x);
      lo_add_squares_tile<kLead, 18>(x, acc);
    });
  } else {
    const Chunk c{t.p_off + w.row0, t.s_off + w.row0, w.n, w.tensor};
    const LoFactorView fv{rrec, crec, rfac, cfac, diag};
    auto body = [&](int e, float gv, float pv, const float4 old) {
      const int64_t i = w.row0 + e;
      const float gg = velo_g(gv, gs);
      old_sums(old);
      LoElem el;
      lo_flat_step<true>(t, i, gg, pv, old, rs, c.s_begin + e, diag, fv, d, el, key);
      float x[kF];
      velo_features(el, x);
      lo_add_squares_flat<kLead, kF>(x, t.factored, acc);
    };
    lo_for_each_pair<kLoThreads, kReadP>(c, g, p, rs, body);
  }
  lo_block_sums<kS>(acc, partial + int64_t(blockIdx.x) * kS);
  if (!kReadP) {
    __syncthreads();  // after lo_block_sums' store of channel 2
    if (threadIdx.x == 0) partial[int64_t(blockIdx.x) * kS + 2] = psq[blockIdx.x];
  }
}

__device__ __forceinline__ float velo_la(double x) {
  return 0.5f * fminf(5.0f, fmaxf(-5.0f, float(log(1e-8 + fabs(10.0 * x)))));
}

// One block of 1024 threads per tensor: normalisers, param scale, and the LSTM input row.
__global__ void __launch_bounds__(1024)
    velo_norms(const LoTensor* __restrict__ ts, const double* __restrict__ partial, const double* __restrict__ side,
               const VeloScalars* __restrict__ sc, float* __restrict__ norm, float* __restrict__ x) {
  const LoTensor t = ts[blockIdx.x];
  __shared__ double S[kS];
  lo_tensor_sums<kS>(partial, t.work_begin, t.work_end, S);
  if (t.factored) lo_add_side_sums<kLead>(side + blockIdx.x * 12, S);
  const int k = threadIdx.x;
  const double n = double(t.numel);
  if (k < kF) norm[blockIdx.x * kNormLd + k] = lo_normaliser(S[k], n);
  if (k == kF) norm[blockIdx.x * kNormLd + kF] = sqrtf(float(S[2] / n) + 1e-9f);
  if (k != 0) return;
  float* row = x + blockIdx.x * kLdX;
  for (int j = 0; j < 18; j++) row[j] = sc->lstm_shared[j];
  const double nm = 1.0 / sqrt(fmax(1e-9, S[2] / n));
  const double mean_v = nm * S[kF + 6] / n, ev2 = nm * nm * S[kF + 7] / n;
  row[18] = velo_la(mean_v);
  for (int r = 0; r < 5; r++) row[19 + r] = t.rank_class == r ? 1.0f : 0.0f;
  for (int q = 0; q < 3; q++) {
    const double mu = nm * S[kF + q] / n;
    const double var_m = fmax(0.0, nm * nm * S[kF + 3 + q] / n - mu * mu);
    const double var_v = fmax(0.0, ev2 - 2.0 * mu * mean_v + mu * mu);
    row[24 + q] = velo_la(var_m);
    row[27 + q] = velo_la(var_v);
  }
  row[30] = 1.0f;
  row[31] = 0.0f;
}

// pooled[o] = max over tensors of relu(linear_1): 16 blocks of 32 channels x 32 row strides.
__global__ void __launch_bounds__(1024) velo_pool(int n, const float* __restrict__ mix, float* __restrict__ pooled) {
  __shared__ float part[32][33];
  const int c = threadIdx.x % 32, j = threadIdx.x / 32, o = blockIdx.x * 32 + c;
  float mx = 0.0f;  // = max_i relu(a_i)
  for (int i = j; i < n; i += 32) mx = fmaxf(mx, mix[i * 1024 + o]);
  part[j][c] = mx;
  __syncthreads();
  if (j == 0) {
    for (int k = 1; k < 32; k++) mx = fmaxf(mx, part[k][c]);
    pooled[o] = mx;
  }
}

// [U | h | 1 | 0...] rows for the LSTM GEMM, U = linear_2 + pooled.
__global__ void velo_lstm_in(int n, const float* __restrict__ mix, const float* __restrict__ pooled,
                             const float* __restrict__ h, float* __restrict__ uh) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n * kLdUH) return;
  const int i = idx / kLdUH, k = idx % kLdUH;
  uh[idx] = k < 512 ? mix[i * 1024 + 512 + k] + pooled[k] : k < 1024 ? h[i * 512 + k - 512] : (k == 1024 ? 1.0f : 0.0f);
}

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

// LSTM cell (gate order i, g, f, o; forget bias +1), then [h_new | 1] for the output GEMM.
__global__ void velo_gates(int n, const float* __restrict__ z, float* __restrict__ h, float* __restrict__ c,
                           float* __restrict__ hx) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n * 512) return;
  const int i = idx / 512, o = idx % 512;
  const float* zi = z + int64_t(i) * 2048;
  const float cn = sigm(zi[1024 + o] + 1.0f) * c[idx] + sigm(zi[o]) * tanhf(zi[512 + o]);
  const float hn = sigm(zi[1536 + o]) * tanhf(cn);
  c[idx] = cn;
  h[idx] = hn;
  hx[i * kLdHX + o] = hn;
  if (o < kLdHX - 512) hx[i * kLdHX + 512 + o] = o == 0 ? 1.0f : 0.0f;
}

// Row-major `out` (rows x m) = `in` (rows x k, ld ldi) * W^T, W row-major (m x k, ld ldw).
void gemm_rows(cublasHandle_t h, int rows, int m, int k, const float* W, int ldw, const float* in, int ldi, float* out,
               int ldo) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, rows, k, &alpha, W, ldw, in, ldi, &beta, out, ldo));
}

std::vector<float> with_bias_cols(const std::vector<float>& w, const std::vector<float>& b, int rows, int k, int ld) {
  std::vector<float> out(size_t(rows) * size_t(ld), 0.0f);
  for (int r = 0; r < rows; r++) {
    std::copy_n(&w[size_t(r) * size_t(k)], k, &out[size_t(r) * size_t(ld)]);
    out[size_t(r) * size_t(ld) + size_t(k)] = b[size_t(r)];
  }
  return out;
}
}  // namespace

Velo::Velo(Arena& arena, const OptimOptions& opts, const VeloWeights& w, const Owned& owned, CrossRank* cross)
    : Optimizer(arena, opts, owned, cross),
      core_(arena, parts_, cut_, cross, parse_tie_rule(opts.velo.tie, kVeloPyloTie), false, kChunk,
            opts.velo.bf16_record),
      dec_(nominal_decays()),
      n_(core_.n_tensors) {
  CUBLAS_CHECK(cublasCreate(&blas_));
  CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH));  // full FP32, never TF32
  std::vector<float> mix = with_bias_cols(w.mix2_w, w.mix2_b, 512, 30, kLdX);
  std::vector<float> fin = with_bias_cols(w.final_w, w.final_b, 512, 30, kLdX);
  mix.insert(mix.end(), fin.begin(), fin.end());
  w_mix_.alloc(mix.size(), "VeLO mixing weights");
  w_mix_.upload(mix);
  std::vector<float> lstm = with_bias_cols(w.lstm_w, w.lstm_b, 2048, 1024, kLdUH);
  w_lstm_.alloc(lstm.size(), "VeLO LSTM weights");
  w_lstm_.upload(lstm);
  std::vector<float> ctrl = w.ctrl_w, cb = w.ctrl_b;
  ctrl.insert(ctrl.end(), w.ss_w.begin(), w.ss_w.end());
  cb.push_back(w.ss_b[0]);
  std::vector<float> out = with_bias_cols(ctrl, cb, kCS, 512, kLdHX);
  w_out_.alloc(out.size(), "VeLO output weights");
  w_out_.upload(out);
  cand_.alloc(w.cand.size(), "VeLO candidate MLPs");
  cand_.upload(w.cand);
  std::vector<float> h0, c0;
  for (int i = 0; i < n_; i++) {
    h0.insert(h0.end(), w.init_h.begin(), w.init_h.end());
    c0.insert(c0.end(), w.init_c.begin(), w.init_c.end());
  }
  h_.alloc(h0.size(), "VeLO LSTM h");
  h_.upload(h0);
  c_.alloc(c0.size(), "VeLO LSTM c");
  c_.upload(c0);
  VeloLossState ls{};
  velo_loss_decays(opts.velo.num_steps, ls.decay);
  for (int j = 0; j < 10; j++) {
    ls.means[j] = 0.0f;
    ls.running_min[j] = kVeloLossMinStart;
  }
  loss_.alloc(1, "VeLO loss buffer");
  loss_.upload(&ls, 1);
  // A rank's share of a sharded step runs its GEMMs with as many rows as the whole table has tensors
  // (the rows past n_ zero), so that cuBLAS picks the whole table's algorithm and rounds as one GPU does.
  alloc_rows(cross ? std::max(n_, arena_.table().size()) : n_);
  pooled_.alloc(512, "VeLO pooled mixing");
  partial_.alloc(core_.work.size() * kS, "VeLO partial sums");
  psq_.alloc(core_.work.size(), "VeLO sums of p^2 from pass C");
  core_.reserve_item_sums(kS);
  core_.reserve_side_sums();
  side_a_.alloc(size_t(core_.side_a_len), "VeLO row-side first-layer shares");
  side_b_.alloc(size_t(core_.side_b_len), "VeLO column-side first-layer shares");
  norm_.alloc(size_t(n_) * kNormLd, "VeLO normalisers");
  scalars_.alloc(1, "VeLO scalars");
  pass_b_ = core_.pass_b(partial_.get(), scalars_.get(), dec_);
}

void Velo::alloc_rows(int rows) {
  rows_ = rows;
  x_.alloc(size_t(rows_) * kLdX, "VeLO LSTM inputs");
  mix_.alloc(size_t(rows_) * 1024, "VeLO mixing");
  uh_.alloc(size_t(rows_) * kLdUH, "VeLO LSTM input");
  z_.alloc(size_t(rows_) * 2048, "VeLO gates");
  hx_.alloc(size_t(rows_) * kLdHX, "VeLO LSTM output");
  cs_.alloc(size_t(rows_) * kCS, "VeLO controls");
  theta_.alloc(size_t(rows_) * kTheta, "VeLO per-tensor MLPs");
  for (DeviceBuffer<float>* b : {&x_, &mix_, &uh_, &z_, &hx_, &cs_, &theta_}) b->zero();  // the rows past n_ stay 0
}

Velo::~Velo() {
  if (blas_) cublasDestroy(blas_);
}

bool Velo::take_clip(GradClipper* clipper) { return steps_table() && core_.take_clip(clipper); }

void Velo::step(const StepInfo& info, cudaStream_t s) {
  if (!info.d_loss) user_error("VeLO needs the step's training loss (StepInfo::d_loss); none was given.");
  const VeloOptions& h = opts_.velo;
  core_.run_taken_clip(s);  // when taken: the clip coefficient for velo_begin
  velo_begin<<<1, 32, 0, s>>>(d_step_.get(), loss_.get(), info.d_loss, h.num_steps, h.lr, opts_.schedule,
                              info.d_grad_scale, scalars_.get());
  CUDA_CHECK_LAUNCH();
  core_.factor_passes(&scalars_.get()->step.grad_scale, 1000.0f, dec_, s);
  const unsigned nw = unsigned(core_.work.size());
  const bool b16 = core_.bf16_records;
  if (psq_ready_ && b16)
    velo_pass_b<false, true><<<nw, kLoThreads, 0, s>>>(pass_b_, psq_.get());
  else if (psq_ready_)
    velo_pass_b<false, false><<<nw, kLoThreads, 0, s>>>(pass_b_, psq_.get());
  else if (b16)
    velo_pass_b<true, true><<<nw, kLoThreads, 0, s>>>(pass_b_, nullptr);
  else
    velo_pass_b<true, false><<<nw, kLoThreads, 0, s>>>(pass_b_, nullptr);
  CUDA_CHECK_LAUNCH();
  psq_ready_ = true;                         // pass C below sums p^2 as it writes p
  core_.share_item_sums(partial_.get(), s);  // a cut tensor's sums over its ranks
  const double* side = core_.join_side_sums(s);
  velo_norms<<<unsigned(n_), 1024, 0, s>>>(core_.tensors.get(), partial_.get(), side, scalars_.get(), norm_.get(),
                                           x_.get());
  CUDA_CHECK_LAUNCH();
  CUBLAS_CHECK(cublasSetStream(blas_, s));
  gemm_rows(blas_, rows_, 1024, kLdX, w_mix_.get(), kLdX, x_.get(), kLdX, mix_.get(), 1024);
  velo_pool<<<16, 1024, 0, s>>>(n_, mix_.get(), pooled_.get());
  CUDA_CHECK_LAUNCH();
  if (cross_) cross_->max(pooled_.get(), 512, s);  // the pooling is over every tensor of the table
  velo_lstm_in<<<unsigned((n_ * kLdUH + 255) / 256), 256, 0, s>>>(n_, mix_.get(), pooled_.get(), h_.get(), uh_.get());
  CUDA_CHECK_LAUNCH();
  gemm_rows(blas_, rows_, 2048, kLdUH, w_lstm_.get(), kLdUH, uh_.get(), kLdUH, z_.get(), 2048);
  velo_gates<<<unsigned((n_ * 512 + 255) / 256), 256, 0, s>>>(n_, z_.get(), h_.get(), c_.get(), hx_.get());
  CUDA_CHECK_LAUNCH();
  gemm_rows(blas_, rows_, kCS, kLdHX, w_out_.get(), kLdHX, hx_.get(), kLdHX, cs_.get(), kCS);
  {  // theta (n x 159) = controls (n x 256) * cand (256 x 159) * 100/256
    const float alpha = 100.0f / 256.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, kTheta, rows_, 256, &alpha, cand_.get(), kTheta,
                             cs_.get(), kCS, &beta, theta_.get(), kTheta));
  }
  pass_c(s);  // velo_pass_c.cu
}

std::vector<Optimizer::StateBuffer> Velo::state_buffers() const {
  return {{"lopt.moments", core_.state.get(), core_.state.bytes()},
          {"lopt.vector_factors", core_.diag.get(), core_.diag.bytes()},
          {"lopt.R", core_.rrec.get(), core_.rrec.bytes()},
          {"lopt.C", core_.crec.get(), core_.crec.bytes()},
          {"velo.lstm_h", h_.get(), h_.bytes()},
          {"velo.lstm_c", c_.get(), c_.bytes()},
          {"velo.loss_buffer", loss_.get(), loss_.bytes()}};
}
