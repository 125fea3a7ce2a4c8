// CELO2's fast pass C (celo2.fast, celo2_fast.cu): the per-element MLP on tensor cores for the tile2d tensors
// (2-D, factored: nearly all of a model's matrices), in place of celo2_learned.cu's exact fp32 tile kernel.
// Same inputs and outputs: D = dir exp(exp_mult mag) (x rms(p) with param_scale_mult) into the direction
// buffer, and per tile the sum of D^2.
#pragma once
#include <cuda_runtime.h>

#include "optim/lopt/celo2.h"

struct C2FastArgs {
  const LoWork* works;  // LoCore's work items; tiles: the ones this launch runs, one block each
  const int32_t* tiles;
  int n_tiles;
  const LoTensor* ts;
  const C2Mat* mats;
  const float* g;
  const float* p;
  const float4* state;  // {m0, m1, m2, v}, after pass B
  const float4* rfac;   // Adafactor factors per R and C entry
  const float4* cfac;
  const float4* side_r;  // per R / C entry: the first layer's share of channels 15-26 (c2_side), 8 floats
  const float4* side_c;
  const float* sigma;  // per slice: the 30 input normalisers (kPart apart)
  const double* psq;   // per slice: sum of p^2 (param_scale_mult)
  const float* mlp;    // the MLP's weights as uploaded (celo2_device.cuh's layout)
  const C2Scalars* sc;
  float cv, exp_mult;
  int param_scale_mult;
  double* tile_partial;  // per work item: the tile's sum of D^2
  bool rec16;            // state holds the records in bf16 (celo2.bf16_record): 8 bytes an element
};

// T: float or __nv_bfloat16 (the direction buffer's type).
template <typename T>
void c2_pass_c_fast(const C2FastArgs& a, T* dx, cudaStream_t s);
