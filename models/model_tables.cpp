#include "models/model_tables.h"

#include "common/error.h"

Gpt2Shape gpt2_shape(const std::string& name) {
  Gpt2Shape s;
  if (name == "d12" || name == "124m") s.layers = 12, s.channels = 768, s.heads = 12;
  else if (name == "d24" || name == "355m") s.layers = 24, s.channels = 1024, s.heads = 16;
  else if (name == "d36" || name == "774m") s.layers = 36, s.channels = 1280, s.heads = 20;
  else if (name == "d48" || name == "1558m") s.layers = 48, s.channels = 1600, s.heads = 25;
  else user_error("unknown GPT-2 size '", name, "'; choose d12, d24, d36 or d48 (124m, 355m, 774m, 1558m).");
  return s;
}

ParamTable gpt2_param_table(const Gpt2Shape& s) {
  ParamTable t;
  const int64_t C = s.channels;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, Role role, bool decay) {
    t.add(tensor_spec(name, std::move(shape), role, decay));
  };
  {
    TensorSpec wte = tensor_spec("wte", {s.vocab, C}, Role::Embedding, true);  // tied with the LM head
    wte.reserve = int64_t(gpt2_padded_vocab(s.vocab)) * C;
    t.add(wte);
  }
  add("wpe", {s.max_seq, C}, Role::PosEmbedding, true);
  for (int l = 0; l < s.layers; l++) {
    std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C}, Role::NormGain, false);
    add(p + "ln_1.bias", {C}, Role::NormBias, false);
    if (s.separate_qkv) {  // weights then biases, so that each trio is one contiguous (3C, C) / (3C) block
      for (const char* q : {"q", "k", "v"}) add(p + "attn." + q + ".weight", {C, C}, Role::Hidden, true);
      for (const char* q : {"q", "k", "v"}) add(p + "attn." + q + ".bias", {C}, Role::Bias, false);
    } else {
      add(p + "attn.qkv.weight", {3 * C, C}, Role::Hidden, true);
      add(p + "attn.qkv.bias", {3 * C}, Role::Bias, false);
    }
    add(p + "attn.proj.weight", {C, C}, Role::Hidden, true);
    add(p + "attn.proj.bias", {C}, Role::Bias, false);
    add(p + "ln_2.weight", {C}, Role::NormGain, false);
    add(p + "ln_2.bias", {C}, Role::NormBias, false);
    add(p + "mlp.fc.weight", {4 * C, C}, Role::Hidden, true);
    add(p + "mlp.fc.bias", {4 * C}, Role::Bias, false);
    add(p + "mlp.proj.weight", {C, 4 * C}, Role::Hidden, true);
    add(p + "mlp.proj.bias", {C}, Role::Bias, false);
  }
  add("ln_f.weight", {C}, Role::NormGain, false);
  add("ln_f.bias", {C}, Role::NormBias, false);
  return t;
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
