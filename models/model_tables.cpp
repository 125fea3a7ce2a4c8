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
  const float sd = 0.02f;
  const BlockInit init{sd, float(0.02 / std::sqrt(2.0 * s.layers))};  // residual projections: GPT-2's scaling
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Role role, bool decay, Init how) {
    TensorSpec x = tensor_spec(name, std::move(shape), role, decay);
    x.init = how;
    x.init_std = how == Init::Normal ? sd : 0.0f;
    if (name == "wte") x.reserve = int64_t(gpt2_padded_vocab(s.vocab)) * C;  // the head's zero rows
    return t.add(x);
  };
  ix.wte = add("wte", {s.vocab, C}, Role::Embedding, true, Init::Normal);  // tied with the LM head
  ix.wpe = add("wpe", {s.max_seq, C}, Role::PosEmbedding, true, Init::Normal);
  for (int l = 0; l < s.layers; l++)
    ix.blocks.push_back(add_block(t, "h." + std::to_string(l) + ".", s.block(), kGpt2BlockNames, init));
  ix.lnfw = add("ln_f.weight", {C}, Role::NormGain, false, Init::Ones);
  ix.lnfb = add("ln_f.bias", {C}, Role::NormBias, false, Init::Zeros);
  if (indices) *indices = ix;
  return t;
}

Gpt2Tensors gpt2_tensors(const ParamTable& t, const Gpt2Shape& s) {
  Gpt2Tensors ix;
  CHECK(gpt2_param_table(s, &ix).fingerprint() == t.fingerprint());
  return ix;
}

VitShape vit_shape(const std::string& name) {
  struct Size {
    const char* name;
    int layers, channels, heads;
  };
  static const Size kSizes[] = {{"ti", 12, 192, 3}, {"s", 12, 384, 6}, {"b", 12, 768, 12}, {"l", 24, 1024, 16}};
  VitShape v;
  if (name == "vit-test") {
    v.layers = 2;
    v.channels = 64;
    v.heads = 1;
    v.image = 8;
    v.patch = 4;
    v.classes = 10;
    return v;
  }
  for (const Size& z : kSizes) {
    const std::string stem = std::string("vit-") + z.name;
    if (name.rfind(stem, 0) != 0 || name.size() == stem.size()) continue;
    const std::string digits = name.substr(stem.size());
    if (digits.size() > 2 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    v.layers = z.layers;
    v.channels = z.channels;
    v.heads = z.heads;
    v.patch = std::stoi(digits);
    if (v.patch >= 1) return v;
  }
  user_error("unknown ViT '", name, "'; choose vit-ti16, vit-s16, vit-b16 or vit-l16 (another patch size, e.g. ",
             "vit-ti4, is fine) or vit-test.");
}

ParamTable vit_param_table(const VitShape& s, VitTensors* indices) {
  if (s.patch < 1 || s.image < s.patch || s.image % s.patch != 0)
    user_error("the image size (", s.image, ") must be a positive multiple of the patch size (", s.patch, ").");
  if (s.in_chans < 1 || s.classes < 2 || s.layers < 0 || s.heads < 1 || s.channels != 64 * s.heads)
    user_error("a ViT needs 1 or more input channels, 2 or more classes and 64 channels per head (got ", s.in_chans,
               ", ", s.classes, ", ", s.channels, " for ", s.heads, " heads).");
  ParamTable t;
  VitTensors ix;
  const int64_t C = s.channels;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Role role, bool decay, Init how, float a) {
    TensorSpec x = tensor_spec(name, std::move(shape), role, decay);
    x.init = how;
    x.init_std = a;
    return t.add(x);
  };
  const float conv_bound = float(1.0 / std::sqrt(double(s.patch_dim())));
  ix.cls = add("cls_token", {1, 1, C}, Role::PosEmbedding, false, Init::Normal, 1e-6f);
  ix.pos = add("pos_embed", {1, s.tokens(), C}, Role::PosEmbedding, false, Init::Normal, 0.02f);
  ix.patchw = add("patch_embed.proj.weight", {C, s.in_chans, s.patch, s.patch}, Role::InputProj, true, Init::Uniform,
                  conv_bound);
  ix.patchb = add("patch_embed.proj.bias", {C}, Role::Bias, false, Init::Uniform, conv_bound);
  for (int l = 0; l < s.layers; l++)
    ix.blocks.push_back(add_block(t, "blocks." + std::to_string(l) + ".", s.block(), kTimmBlockNames, BlockInit{}));
  ix.normw = add("norm.weight", {C}, Role::NormGain, false, Init::Ones, 0.0f);
  ix.normb = add("norm.bias", {C}, Role::NormBias, false, Init::Zeros, 0.0f);
  ix.headw = add("head.weight", {s.classes, C}, Role::Head, true, Init::Normal, 0.02f);
  ix.headb = add("head.bias", {s.classes}, Role::Bias, false, Init::Zeros, 0.0f);
  if (indices) *indices = ix;
  return t;
}

VitTensors vit_tensors(const ParamTable& t, const VitShape& s) {
  VitTensors ix;
  CHECK(vit_param_table(s, &ix).fingerprint() == t.fingerprint());
  return ix;
}

ParamTable model_table_by_name(const std::string& name) {
  if (name == "vit-b16") return vit_param_table(vit_shape(name));
  if (name.rfind("gpt2-", 0) == 0) return gpt2_param_table(gpt2_shape(name.substr(5)));
  user_error("unknown model '", name, "'; choose gpt2-124m, gpt2-355m, gpt2-774m, gpt2-1558m or vit-b16.");
}
