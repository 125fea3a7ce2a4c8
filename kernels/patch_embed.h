// The image side of a ViT: pixels to patch rows (normalised, optionally mixed with the reversed batch),
// the patch rows' projection added to the cls token and position embeddings, and the backward of that
// assembly. The projection itself is a matmul (kernels/matmul_lt.h): a stride-p convolution with a p x p
// kernel is exactly one (B*P, Cin*p*p) x (Cin*p*p, C) product over non-overlapping patches.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/image_mix.h"
#include "kernels/bf16_vec.cuh"

struct ImageGeometry {
  int B, H, W, channels, patch;  // H, W multiples of patch
  __host__ __device__ int grid_h() const { return H / patch; }
  __host__ __device__ int grid_w() const { return W / patch; }
  __host__ __device__ int patches() const { return grid_h() * grid_w(); }
  __host__ __device__ int patch_dim() const { return channels * patch * patch; }
};
// Per-channel normalisation (x / 255 - mean) / std.
struct PixelNorm {
  float mean[3] = {0.0f, 0.0f, 0.0f}, inv_std[3] = {1.0f, 1.0f, 1.0f};
};

// rows (B*P, patch_dim) bf16: row b*P + gy*grid_w + gx holds patch (gy, gx) of image b, column
// c*p*p + ky*p + kx its pixel (gy*p + ky, gx*p + kx) of channel c (the order of a (C, channels, p, p)
// convolution weight). pixels: (B, H, W, channels) uint8. Mixup: lambda * own + (1 - lambda) * partner's
// normalised value (partner B-1-b); cutmix: the partner's value inside the box. mix: on the device.
void image_patches(bf16* rows, const uint8_t* pixels, const ImageGeometry& g, const PixelNorm& norm,
                   const ImageMix* mix, cudaStream_t s);

// x (B, 1 + P, C): x[b, 0] = cls + pos[0], x[b, 1 + i] = proj[b*P + i] + pos[1 + i] (summed in fp32).
void tokens_forward(bf16* x, const bf16* proj, const bf16* cls, const bf16* pos, int B, int P, int C, cudaStream_t s);
// dcls += sum_b dx[b, 0]; dpos[t] += sum_b dx[b, t] (fixed order over b); dproj[b*P + i] = dx[b, 1 + i].
void tokens_backward(float* dcls, float* dpos, bf16* dproj, const bf16* dx, int B, int P, int C, cudaStream_t s);
