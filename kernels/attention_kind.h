// Which attention a bf16 model runs (--attention): our flash-attention kernels (kernels/flash_attention.h),
// or cuDNN's fused attention (kernels/cudnn_attention.h) with its deterministic backward or with its usual
// one, which sums dQ with atomics. Host-only header, so that the flags can name it.
#pragma once
#include <string>

#include "common/error.h"

enum class Attention { kOurs, kCudnn, kCudnnNondet };

inline Attention attention_by_name(const std::string& name) {
  if (name == "ours") return Attention::kOurs;
  if (name == "cudnn") return Attention::kCudnn;
  if (name == "cudnn-nondet") return Attention::kCudnnNondet;
  user_error("--attention must be ours, cudnn or cudnn-nondet (got '", name, "').");
}
