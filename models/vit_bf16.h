// ViT in mixed precision (timm's VisionTransformer with a class token): patch embedding as one matmul over
// the image's patches, cls token and position embeddings, the shared transformer blocks
// (models/transformer_block: no mask, exact erf GELU, LayerNorm epsilon 1e-6), a final LayerNorm of the
// cls token and the linear head. Images arrive as bytes (Batch::pixels); normalisation and the batch mix
// (mixup / cutmix) happen on the device as the patches are cut. bf16 activations, fp32 master weights and
// gradients in the arena.
#pragma once
#include <vector>

#include "common/device_buffer.h"
#include "kernels/patch_embed.h"
#include "models/model.h"
#include "models/model_tables.h"
#include "models/transformer_block.h"

// Per-channel normalisation of x / 255 (ImageNet's by default).
struct ImageNorm {
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
};

class VitBf16 : public Model {
 public:
  VitBf16(const VitShape& shape, Arena& arena, int B, const ImageNorm& norm = ImageNorm(),
          Attention attention = Attention::kOurs);
  void set_batch(const Batch& b, cudaStream_t s) override;  // pixels, and labels or soft targets
  void forward(cudaStream_t s) override;
  bool calls_mlp_hook() const override { return true; }
  void loss_and_dlogits(float grad_scale, cudaStream_t s) override;
  void backward(cudaStream_t s) override;
  const float* d_loss() const override { return loss_mean_.get(); }
  BatchShape batch_shape() const override {
    return {0, B_, int64_t(B_) * s_.image * s_.image * s_.in_chans, int64_t(B_) * s_.classes};
  }
  // Synchronous copy of the last forward's logits, (B, classes) fp32.
  void logits_to_host(float* host) const;
  int B() const { return B_; }
  const VitShape& shape() const { return s_; }

 private:
  VitShape s_;
  ImageGeometry geom_;
  PixelNorm norm_;
  int B_, T_, P_, K_, Cp_;  // Cp_: classes padded to a multiple of 8 (the logits' row stride)
  int64_t cls_, pos_, patchw_, patchb_, normw_, normb_, headw_, headb_;
  BlockContext ctx_;
  std::vector<TransformerBlock> blocks_;
  std::vector<DeviceBuffer<bf16>> stream_;  // the residual stream entering block l; stream_[L] leaves the last
  DeviceBuffer<uint8_t> pixels_;
  DeviceBuffer<int> labels_;
  DeviceBuffer<float> soft_;
  DeviceBuffer<ImageMix> mix_;  // the batch's draw, read by the patch kernel
  bool soft_on_ = false;
  DeviceBuffer<bf16> patches_, proj_, cls_rows_, lnf_, logits_, dres_, dcls_;
  DeviceBuffer<float> lnf_mean_, lnf_rstd_, losses_, loss_mean_, head_scratch_;
};
