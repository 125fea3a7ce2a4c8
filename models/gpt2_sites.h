// Where GPT-2 applies dropout, as site numbers of the mask hash (kernels/dropout.h): the embedding output
// is site 0, layer l's attention probabilities site 3l + 1, its attention-projection output 3l + 2, its
// MLP-projection output 3l + 3. The GPU models and the CPU reference draw the same masks from these.
#pragma once
#include <cstdint>

inline constexpr uint32_t dropout_site_embedding() { return 0; }
inline constexpr uint32_t dropout_site_attention(int layer) { return 3 * uint32_t(layer) + 1; }
inline constexpr uint32_t dropout_site_attn_proj(int layer) { return 3 * uint32_t(layer) + 2; }
inline constexpr uint32_t dropout_site_mlp_proj(int layer) { return 3 * uint32_t(layer) + 3; }
