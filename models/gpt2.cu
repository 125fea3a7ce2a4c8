// make_gpt2: --precision's name to the Gpt2 implementation it builds (Gpt2Fp32 or Gpt2Bf16).
#include "models/gpt2.h"
#include "models/gpt2_bf16.h"
#include "models/gpt2_fp32.h"

std::unique_ptr<Gpt2> make_gpt2(const std::string& precision, const Gpt2Shape& shape, Arena& arena, int B, int T,
                                Attention attention) {
  if (precision == "fp32") {
    if (attention != Attention::kOurs)
      user_error("--attention cudnn runs in the bf16 model only; use --precision bf16 or --attention ours.");
    return std::make_unique<Gpt2Fp32>(shape, arena, B, T);
  }
  if (precision == "bf16") {
    if (!arena.params_bf16()) user_error("the bf16 model needs an arena with a bf16 parameter copy.");
    return std::make_unique<Gpt2Bf16>(shape, arena, B, T, attention);
  }
  user_error("--precision must be bf16 or fp32 (got '", precision, "').");
}
