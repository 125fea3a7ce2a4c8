#include "models/model_tables.h"

#include <cmath>

#include "common/error.h"

Gpt2Shape gpt2_shape(const std::string& name) {
  struct Size {
    const char *depth, *params;
    int layers, channels, heads;
  };
  static const Size kSizes[] = {{"d12", "124m", 12, 768, 12},
                                {"d24", "355m", 24, 1024, 16},
                                {"d36", "774m", 36, 1280, 20},
                                {"d48", "1558m", 48, 1600, 25}};
  for (const Size& z : kSizes)
    if (name == z.depth || name == z.params) {
      Gpt2Shape s;
      s.layers = z.layers;
      s.channels = z.channels;
      s.heads = z.heads;
      return s;
    }
  user_error("unknown GPT-2 size '", name, "'; choose d12, d24, d36 or d48 (124m, 355m, 774m, 1558m).");
}

ParamTable gpt2_param_table(const Gpt2Shape& s, Gpt2Tensors* indices) {
  ParamTable t;
  Gpt2Tensors ix;
  const int64_t C = s.channels;
  const float sd = 0.02f, proj_sd = float(0.02 / std::sqrt(2.0 * s.layers));  // residual projections: GPT-2's scaling
  // Each kind of tensor starts as its role says: weights normal, gains one, biases zero.
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Role role, bool decay, float std_dev = 0.02f) {
    TensorSpec x = tensor_spec(name, std::move(shape), role, decay);
    x.init = role == Role::NormGain                         ? Init::Ones
             : role == Role::Bias || role == Role::NormBias ? Init::Zeros
                                                            : Init::Normal;
    x.init_std = x.init == Init::Normal ? std_dev : 0.0f;
    if (name == "wte") x.reserve = int64_t(gpt2_padded_vocab(s.vocab)) * C;  // the head's zero rows
    return t.add(x);
  };
  ix.wte = add("wte", {s.vocab, C}, Role::Embedding, true, sd);  // tied with the LM head
  ix.wpe = add("wpe", {s.max_seq, C}, Role::PosEmbedding, true, sd);
  for (int l = 0; l < s.layers; l++) {
    const std::string p = "h." + std::to_string(l) + ".";
    Gpt2BlockTensors b{};
    b.ln1w = add(p + "ln_1.weight", {C}, Role::NormGain, false);
    b.ln1b = add(p + "ln_1.bias", {C}, Role::NormBias, false);
    if (s.separate_qkv) {  // weights then biases, so that each trio is one contiguous (3C, C) / (3C) block
      const char* qkv[3] = {"q", "k", "v"};
      for (int k = 0; k < 3; k++) b.qkvw[k] = add(p + "attn." + qkv[k] + ".weight", {C, C}, Role::Hidden, true, sd);
      for (int k = 0; k < 3; k++) b.qkvb[k] = add(p + "attn." + qkv[k] + ".bias", {C}, Role::Bias, false);
    } else {
      b.qkvw[0] = add(p + "attn.qkv.weight", {3 * C, C}, Role::Hidden, true, sd);
      b.qkvb[0] = add(p + "attn.qkv.bias", {3 * C}, Role::Bias, false);
      b.qkvw[1] = b.qkvw[2] = b.qkvb[1] = b.qkvb[2] = -1;
    }
    b.projw = add(p + "attn.proj.weight", {C, C}, Role::Hidden, true, proj_sd);
    b.projb = add(p + "attn.proj.bias", {C}, Role::Bias, false);
    b.ln2w = add(p + "ln_2.weight", {C}, Role::NormGain, false);
    b.ln2b = add(p + "ln_2.bias", {C}, Role::NormBias, false);
    b.fcw = add(p + "mlp.fc.weight", {4 * C, C}, Role::Hidden, true, sd);
    b.fcb = add(p + "mlp.fc.bias", {4 * C}, Role::Bias, false);
    b.fcprojw = add(p + "mlp.proj.weight", {C, 4 * C}, Role::Hidden, true, proj_sd);
    b.fcprojb = add(p + "mlp.proj.bias", {C}, Role::Bias, false);
    ix.blocks.push_back(b);
  }
  ix.lnfw = add("ln_f.weight", {C}, Role::NormGain, false);
  ix.lnfb = add("ln_f.bias", {C}, Role::NormBias, false);
  if (indices) *indices = ix;
  return t;
}

Gpt2Tensors gpt2_tensors(const ParamTable& t, const Gpt2Shape& s) {
  Gpt2Tensors ix;
  CHECK(gpt2_param_table(s, &ix).fingerprint() == t.fingerprint());
  return ix;
}

ParamTable vit_param_table(const VitShape& s) {
  ParamTable t;
  const int64_t C = s.channels, tokens = int64_t(s.image / s.patch) * (s.image / s.patch) + 1;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Role role, bool decay) {
    t.add(tensor_spec(name, std::move(shape), role, decay));
  };
  add("cls_token", {1, 1, C}, Role::PosEmbedding, false);
  add("pos_embed", {1, tokens, C}, Role::PosEmbedding, false);
  add("patch_embed.proj.weight", {C, s.in_chans, s.patch, s.patch}, Role::InputProj, true);
  add("patch_embed.proj.bias", {C}, Role::Bias, false);
  for (int l = 0; l < s.layers; l++) {
    std::string p = "blocks." + std::to_string(l) + ".";
    add(p + "norm1.weight", {C}, Role::NormGain, false);
    add(p + "norm1.bias", {C}, Role::NormBias, false);
    add(p + "attn.qkv.weight", {3 * C, C}, Role::Hidden, true);
    add(p + "attn.qkv.bias", {3 * C}, Role::Bias, false);
    add(p + "attn.proj.weight", {C, C}, Role::Hidden, true);
    add(p + "attn.proj.bias", {C}, Role::Bias, false);
    add(p + "norm2.weight", {C}, Role::NormGain, false);
    add(p + "norm2.bias", {C}, Role::NormBias, false);
    add(p + "mlp.fc1.weight", {s.mlp, C}, Role::Hidden, true);
    add(p + "mlp.fc1.bias", {s.mlp}, Role::Bias, false);
    add(p + "mlp.fc2.weight", {C, s.mlp}, Role::Hidden, true);
    add(p + "mlp.fc2.bias", {C}, Role::Bias, false);
  }
  add("norm.weight", {C}, Role::NormGain, false);
  add("norm.bias", {C}, Role::NormBias, false);
  add("head.weight", {s.classes, C}, Role::Head, true);
  add("head.bias", {s.classes}, Role::Bias, false);
  return t;
}

ParamTable model_table_by_name(const std::string& name) {
  if (name == "vit-b16") return vit_param_table(VitShape{});
  if (name.rfind("gpt2-", 0) == 0) return gpt2_param_table(gpt2_shape(name.substr(5)));
  user_error("unknown model '", name, "'; choose gpt2-124m, gpt2-355m, gpt2-774m, gpt2-1558m or vit-b16.");
}
