// Muon (torch.optim.Muon semantics) on the hidden matrices, AdamW on everything else (embeddings, head,
// vectors), chosen from each tensor's role in the table. Matrices of one shape are orthogonalised
// together by batched cuBLASLt GEMMs (optim/newton_schulz.h).
#pragma once
#include <memory>
#include <vector>

#include "core/chunks.h"
#include "optim/adamw.h"
#include "optim/newton_schulz.h"
#include "optim/optimizer.h"

struct MuonTensor {  // per table index (zeros for tensors Muon does not own)
  int64_t s_off;
  int32_t chunk_begin, chunk_end;
  float ratio;  // adjusted lr / lr for this shape
  int32_t decay;
};

struct MuonScalars {
  float mu, one_minus_mu, wd_factor, grad_scale;
  double lr;
  AdamWScalars aux;
};

class Muon : public Optimizer {
 public:
  Muon(Arena& arena, const OptimOptions& opts, const Owned& owned = {});
  std::string name() const override { return "muon"; }
  void step(const StepInfo& info, cudaStream_t s) override;

 protected:
  std::vector<StateBuffer> state_buffers() const override;

 private:
  std::vector<int> muon_;  // table indices Muon orthogonalises; aux_ steps the rest
  AdamWCore aux_;
  DeviceBuffer<float> buf_;        // momentum, compact over the Muon tensors (grouped by shape)
  DeviceBuffer<__nv_bfloat16> x_;  // Newton-Schulz input/output, same offsets as buf_
  DeviceBuffer<Chunk> chunks_;
  DeviceBuffer<float> chunk_sq_;
  DeviceBuffer<MuonTensor> mt_;
  DeviceBuffer<MuonScalars> scalars_;
  std::unique_ptr<NewtonSchulz> ns_;
};

// Of the parts `owned`, those Muon orthogonalises (muon = true) or leaves to its AdamW.
std::vector<Part> muon_owned(const ParamTable& t, const std::vector<Part>& owned, bool muon);
