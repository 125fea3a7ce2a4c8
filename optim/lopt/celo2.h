// CELO2 and ELO_CELO2 on the GPU (celo2.md 5, 11), over the owned tensors of the arena:
//  - matrices (ndim >= 2; ndim >= 3 per slice of the last two axes, as the reference) take the learned
//    rule: moments and factored second moments (LoCore), 30 features normalised per slice, the
//    30-8-8-3 MLP's direction D, Newton-Schulz on D (optim/newton_schulz.h: slices of one shape batched
//    together; bf16 by default, or tf32, or exact fp32 with celo2.ns), the second RMS normalisation and
//    p -= lr (rmsmult O + wd p);
//  - vectors, embeddings and heads (celo2_uses_adamw) take the AdamW side path: own moments (CELO2), or
//    the learned path's decays 0.9 / 0.95 and eps 1e-8 (ELO_CELO2; PyLO keeps them in m_0 and v).
// Every reduction is a fixed-order tree (no float atomics); the step never waits for the host, so it can
// be captured in a CUDA graph. Launches per step: clip partials (clip_grad), begin, AdamW side, pass A,
// F1, F1b, pass B, side sums, sigma, pass C, ||D||, NS input, 15 GEMMs per slice shape, sum of O^2, RMS scale,
// apply.
#pragma once
#include <memory>

#include "optim/lopt/celo2_weights.h"
#include "optim/lopt/lo_core.h"
#include "optim/newton_schulz.h"
#include "optim/optimizer.h"

// One learned tensor (slot k of LoCore = the k-th learned tensor): `slices` matrices rows x cols.
struct C2Mat {
  int64_t rows, cols, slices;
  int32_t first_slice, n_slices;
  float wd;        // weight decay (0 where the tensor's decay flag is off)
  int64_t dx = 0;  // its first slice's first element in the direction buffer
};
struct C2Slice {
  int32_t slot, first_item, n_items;
  int64_t elems;  // rows * cols
  // LoCore's tile2d tensors (2-D, factored): pass C runs over the tensor's tiles (LoCore work items
  // [first_tile, first_tile + n_tiles)) instead of its items; 0 tiles otherwise.
  int32_t first_tile = 0, n_tiles = 0;
};
// A run of at most kC2Run elements of one slice: one block of passes B, C and apply.
struct C2Item {
  int32_t slot, slice;
  int64_t begin;  // first element in the tensor
  int64_t dx;     // first element in the direction buffer (Newton-Schulz layout: slices grouped by shape)
  int32_t n;
};
// Written by each step's first kernel.
struct C2Scalars {
  float gs, clip, gs_total;  // trainer's scale, CELO2's global clip factor, and their product (LoCore)
  float lr, lr_adam, bc1, bc2;
  int64_t count;  // earlier steps (the bf16 records' draws, celo2.bf16_record)
};

// Which of the two optimizers a Celo2 is.
enum class Celo2Mode {
  kCelo2,     // CELO2, options opts.celo2
  kEloCelo2,  // ELO_CELO2, options opts.elo_celo2: other weights and defaults, AdamW on the learned moments
};

class Celo2 : public Optimizer {
 public:
  // cross (optimizer.h): the global clip is then over the whole table.
  Celo2(Arena& arena, const OptimOptions& opts, const Celo2Weights& w, Celo2Mode mode, const Owned& owned = {},
        CrossRank* cross = nullptr);
  std::string name() const override { return elo_ ? "elo_celo2" : "celo2"; }
  void step(const StepInfo& info, cudaStream_t s) override;
  void params_changed() override { p2_ready_ = false; }
  // Pass A sums the trainer's norm over the learned matrices (the clipper keeps the AdamW side). Not in a
  // sharded step: this core numbers its own tiles, not the whole table's.
  bool take_clip(GradClipper* clipper) override;

 protected:
  std::vector<StateBuffer> state_buffers() const override;

 private:
  void plan_learned(const std::vector<int>& learned);
  void plan_adam(const std::vector<Part>& adam);
  void plan_clip();
  void learned_step(cudaStream_t s);  // celo2_learned.cu
  template <typename T, bool k16>
  void direction_passes(T* dx, cudaStream_t s);

  bool elo_;  // ELO_CELO2
  Celo2Options h_;
  LoDecays dec_;
  std::unique_ptr<LoCore> core_;  // null when no owned tensor takes the learned rule
  std::vector<C2Mat> host_mats_;  // per LoCore slot
  int n_slices_ = 0, n_items_ = 0;
  DeviceBuffer<C2Mat> mats_;
  DeviceBuffer<C2Slice> slices_;
  DeviceBuffer<C2Item> items_;
  DeviceBuffer<float> weights_;              // the MLP, copied to constant memory by each step (see the .cu)
  DeviceBuffer<double> partial_, partial1_;  // per item: 31 channel sums; one sum of squares
  // per item: the sum of p^2 that the apply pass took as it wrote p; the next pass B uses it in place of
  // reading p (p2_ready_), which only the first step after construction or params_changed() must do.
  DeviceBuffer<double> p2_;
  bool p2_ready_ = false;
  DeviceBuffer<int32_t> c_items_, c_tiles_;    // pass C's blocks: items of the other tensors; tile2d tensors' tiles
  DeviceBuffer<double> tile_partial_;          // pass C's sum of D^2 per LoCore work item (tiles)
  DeviceBuffer<float> sigma_;                  // per slice: 30 input normalisers (padded to 32)
  DeviceBuffer<double> side_sums_;             // per slice of a tile2d tensor: channels 15-26's sums of squares
  DeviceBuffer<float4> rsr_, rsc_;             // 1 / sqrt(R + 1e-8), 1 / sqrt(C + 1e-8) per LoCore R / C entry
  DeviceBuffer<float4> side_r_, side_c_;       // tile2d tensors: 2 per R / C entry, the first layer's share of 15-26
  DeviceBuffer<double> psq_, dnorm_, rscale_;  // per slice: sum p^2, ||D||_F + eps, rmsmult / rms(O)
  // D, then O in place: slices of one shape back to back at NewtonSchulz's stride; bf16 when Newton-Schulz
  // runs in bf16, else float.
  DeviceBuffer<char> dx_;
  bool dx_bf16_ = false;
  std::unique_ptr<NewtonSchulz> ns_;
  // AdamW side path.
  int64_t adam_elems_ = 0;
  DeviceBuffer<Chunk> adam_chunks_;
  DeviceBuffer<float> adam_m_, adam_v_, adam_wd_;  // moments; weight decay per table index
  // Global clipping (clip_grad) over every owned tensor, or with a CrossRank over the whole table.
  DeviceBuffer<Chunk> clip_chunks_;
  DeviceBuffer<double> clip_partial_;
  DeviceBuffer<C2Scalars> scalars_;
};
