#include "models/block_table.h"

#include <algorithm>

const BlockNames kGpt2BlockNames = {"ln_1", "q", "k", "v", "qkv", "attn.proj", "ln_2", "mlp.fc", "mlp.proj"};
const BlockNames kTimmBlockNames = {"norm1", "q", "k", "v", "qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"};

namespace {
// Each kind of tensor starts as its role says: weights normal, gains one, biases zero.
int add(ParamTable& t, const std::string& name, std::vector<int64_t> shape, Role role, bool decay, float sd = 0.0f,
        bool with_next = false) {
  TensorSpec x = tensor_spec(name, std::move(shape), role, decay);
  x.init = role == Role::NormGain ? Init::Ones : role == Role::Hidden ? Init::Normal : Init::Zeros;
  x.init_std = x.init == Init::Normal ? sd : 0.0f;
  x.with_next = with_next;
  return t.add(x);
}
}  // namespace

BlockTensors add_block(ParamTable& t, const std::string& prefix, const BlockShape& s, const BlockNames& n,
                       const BlockInit& init) {
  const int64_t C = s.channels, H = s.hidden;
  const std::string p = prefix, attn = p + "attn.";
  BlockTensors b{};
  b.ln1w = add(t, p + n.ln1 + ".weight", {C}, Role::NormGain, false);
  b.ln1b = add(t, p + n.ln1 + ".bias", {C}, Role::NormBias, false);
  if (s.separate_qkv) {
    const char* qkv[3] = {n.q, n.k, n.v};
    // The GPU block reads the three weights as one (3C, C) matrix and the biases as one (3C) vector: each
    // trio is one piece. Its widths (64 per head) fill whole slots; the CPU reference's tiny ones need
    // not, as it reads q, k and v apart.
    const bool piece = C % ParamTable::kAlignElems == 0;
    for (int k = 0; k < 3; k++)
      b.qkvw[k] = add(t, attn + qkv[k] + ".weight", {C, C}, Role::Hidden, true, init.std, piece && k < 2);
    for (int k = 0; k < 3; k++)
      b.qkvb[k] = add(t, attn + qkv[k] + ".bias", {C}, Role::Bias, false, 0.0f, piece && k < 2);
  } else {
    b.qkvw[0] = add(t, attn + n.qkv + ".weight", {3 * C, C}, Role::Hidden, true, init.std);
    b.qkvb[0] = add(t, attn + n.qkv + ".bias", {3 * C}, Role::Bias, false);
    b.qkvw[1] = b.qkvw[2] = b.qkvb[1] = b.qkvb[2] = -1;
  }
  b.projw = add(t, p + n.proj + ".weight", {C, C}, Role::Hidden, true, init.proj_std);
  b.projb = add(t, p + n.proj + ".bias", {C}, Role::Bias, false);
  b.ln2w = add(t, p + n.ln2 + ".weight", {C}, Role::NormGain, false);
  b.ln2b = add(t, p + n.ln2 + ".bias", {C}, Role::NormBias, false);
  b.fcw = add(t, p + n.fc + ".weight", {H, C}, Role::Hidden, true, init.std);
  b.fcb = add(t, p + n.fc + ".bias", {H}, Role::Bias, false);
  b.fcprojw = add(t, p + n.fc_proj + ".weight", {C, H}, Role::Hidden, true, init.proj_std);
  b.fcprojb = add(t, p + n.fc_proj + ".bias", {C}, Role::Bias, false);
  return b;
}

bool qkv_is_one_piece(const ParamTable& t, const BlockTensors& b) {
  return b.qkvw[1] < 0 || (b.qkvw[1] == b.qkvw[0] + 1 && b.qkvw[2] == b.qkvw[0] + 2 && b.qkvb[1] == b.qkvb[0] + 1 &&
                           b.qkvb[2] == b.qkvb[0] + 2 && t.back_to_back(b.qkvw[0], 3) && t.back_to_back(b.qkvb[0], 3));
}

std::vector<int> block_tensor_list(const BlockTensors& b) {
  std::vector<int> v = {b.ln1w,    b.ln1b,    b.ln2w,  b.ln2b,  b.qkvw[0], b.qkvw[1], b.qkvw[2], b.qkvb[0],
                        b.qkvb[1], b.qkvb[2], b.projw, b.projb, b.fcw,     b.fcb,     b.fcprojw, b.fcprojb};
  v.erase(std::remove(v.begin(), v.end(), -1), v.end());
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int> block_mlp_list(const BlockTensors& b) {
  std::vector<int> v = {b.ln2w, b.ln2b, b.fcw, b.fcb, b.fcprojw, b.fcprojb};
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::vector<int>> hook_groups(const ParamTable& t, const std::vector<BlockTensors>& blocks) {
  std::vector<std::vector<int>> groups;
  std::vector<char> in_block(size_t(t.size()), 0);
  for (const BlockTensors& b : blocks) {
    groups.push_back(block_tensor_list(b));
    for (int i : groups.back()) in_block[size_t(i)] = 1;
  }
  groups.emplace_back();
  for (int i = 0; i < t.size(); i++)
    if (!in_block[size_t(i)]) groups.back().push_back(i);
  return groups;
}
