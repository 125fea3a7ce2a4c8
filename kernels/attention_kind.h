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

// Why cuDNN `version` (e.g. 91400 for 9.14.0) cannot run the attention backward at T, or empty where it
// can: its known bugs (those cudnn-frontend also steps around), and T = 1, which it does not take. Host-only,
// so that the CPU suite checks it for every version.
inline std::string cudnn_backward_refusal(int version, int T, bool causal) {
  if (T == 1) return "cuDNN does not take T = 1; use --attention ours.";
  if (version >= 91000 && version < 91002)
    return str_cat("cuDNN ", version, " has a known bug in the attention backward; use cuDNN 9.10.2 or later, or ",
                   "--attention ours.");
  if (version <= 91500 && !causal && T % 128 != 0)
    return str_cat("cuDNN ", version, " has a known bug in the non-causal backward when T (", T,
                   ") is not a multiple of 128; use cuDNN 9.15.1 or later, or --attention ours.");
  return "";
}
