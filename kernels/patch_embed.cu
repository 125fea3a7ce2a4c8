// The ViT's image side around the patch projection (kernels/patch_embed.h has the layouts). All three
// kernels are element-wise gathers, memory-bound: image_patches reads each byte of the batch once (twice
// for a mixed pixel) and writes B*P*patch_dim bf16; tokens_forward / tokens_backward touch (B, 1 + P, C).
#include "common/cuda_check.h"
#include "kernels/patch_embed.h"

namespace {
// One thread per output element of rows (B*P, patch_dim); consecutive threads write consecutive columns of a
// row. Column col = c*p*p + ky*p + kx of patch k holds pixel (y, x) of channel c, normalised as
// (u / 255 - mean[c]) / std[c], then mixed with image B-1-b's pixel as the batch's ImageMix says.
__global__ void image_patches_k(bf16* rows, const uint8_t* pixels, ImageGeometry g, PixelNorm n, const ImageMix* mix) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int K = g.patch_dim(), P = g.patches(), pp = g.patch * g.patch;
  if (i >= int64_t(g.B) * P * K) return;
  const int col = int(i % K);
  const int64_t row = i / K;
  const int b = int(row / P), k = int(row % P);
  const int c = col / pp, ky = (col % pp) / g.patch, kx = col % g.patch;
  const int y = (k / g.grid_w()) * g.patch + ky, x = (k % g.grid_w()) * g.patch + kx;
  auto value = [&](int img) {
    const uint8_t u = pixels[((int64_t(img) * g.H + y) * g.W + x) * g.channels + c];
    return (float(u) * (1.0f / 255.0f) - n.mean[c]) * n.inv_std[c];
  };
  float v = value(b);
  const ImageMix m = *mix;
  const int partner = g.B - 1 - b;
  if (m.mode == ImageMix::kMixup) v = m.lambda * v + (1.0f - m.lambda) * value(partner);
  if (m.mode == ImageMix::kCutmix && y >= m.y0 && y < m.y1 && x >= m.x0 && x < m.x1) v = value(partner);
  rows[i] = __float2bfloat16_rn(v);
}

// x[b, t] = (t == 0 ? cls : proj[b*P + t - 1]) + pos[t], one thread per element of x (B, 1 + P, C).
__global__ void tokens_forward_k(bf16* x, const bf16* proj, const bf16* cls, const bf16* pos, int B, int P, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int T = P + 1;
  if (i >= int64_t(B) * T * C) return;
  const int c = int(i % C), t = int((i / C) % T);
  const int b = int(i / (int64_t(T) * C));
  const float e = t == 0 ? __bfloat162float(cls[c]) : __bfloat162float(proj[(int64_t(b) * P + t - 1) * C + c]);
  x[i] = __float2bfloat16_rn(e + __bfloat162float(pos[int64_t(t) * C + c]));
}

// One thread per (token, channel): sums over the batch in order, so results repeat bit for bit; the patch
// tokens' gradient is also copied out to dproj (B*P, C), the projection matmul's output gradient.
__global__ void tokens_backward_k(float* dcls, float* dpos, bf16* dproj, const bf16* dx, int B, int P, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int T = P + 1;
  if (i >= int64_t(T) * C) return;
  const int c = int(i % C), t = int(i / C);
  float sum = 0.0f;
  for (int b = 0; b < B; b++) {
    const bf16 d = dx[(int64_t(b) * T + t) * C + c];
    sum += __bfloat162float(d);
    if (t > 0) dproj[(int64_t(b) * P + t - 1) * C + c] = d;
  }
  dpos[i] += sum;
  if (t == 0) dcls[c] += sum;
}

unsigned blocks_for(int64_t n) { return unsigned((n + 255) / 256); }
}  // namespace

void image_patches(bf16* rows, const uint8_t* pixels, const ImageGeometry& g, const PixelNorm& norm,
                   const ImageMix* mix, cudaStream_t s) {
  if (g.B < 1 || g.patch < 1 || g.H % g.patch != 0 || g.W % g.patch != 0 || g.channels < 1 || g.channels > 3)
    user_error("image_patches: bad geometry (B=", g.B, ", ", g.H, "x", g.W, "x", g.channels, ", patch ", g.patch, ").");
  const int64_t n = int64_t(g.B) * g.patches() * g.patch_dim();
  image_patches_k<<<blocks_for(n), 256, 0, s>>>(rows, pixels, g, norm, mix);
  CUDA_CHECK_LAUNCH();
}

void tokens_forward(bf16* x, const bf16* proj, const bf16* cls, const bf16* pos, int B, int P, int C, cudaStream_t s) {
  tokens_forward_k<<<blocks_for(int64_t(B) * (P + 1) * C), 256, 0, s>>>(x, proj, cls, pos, B, P, C);
  CUDA_CHECK_LAUNCH();
}

void tokens_backward(float* dcls, float* dpos, bf16* dproj, const bf16* dx, int B, int P, int C, cudaStream_t s) {
  tokens_backward_k<<<blocks_for(int64_t(P + 1) * C), 256, 0, s>>>(dcls, dpos, dproj, dx, B, P, C);
  CUDA_CHECK_LAUNCH();
}
