// Which GELU a model uses: the tanh approximation (GPT-2; cuBLASLt can fuse it into a matmul) or the exact
// erf form u * Phi(u) (timm's ViT). Host-only header, so that tables and CPU references can name it.
#pragma once

enum class Gelu { kTanh, kErf };
