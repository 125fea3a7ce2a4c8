#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "common/hash64.h"
#include "common/sections.h"
#include "common/temp_dir.h"
#include "core/chunks.h"
#include "core/param_table.h"
#include "models/model_tables.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"

namespace {
TensorSpec spec(const std::string& name, std::vector<int64_t> shape, Role role = Role::Hidden) {
  return tensor_spec(name, std::move(shape), role);
}
}  // namespace

TEST(ParamTable, OffsetsAlignedAndDerivedFields) {
  ParamTable t;
  t.add(spec("a", {7}, Role::Bias));
  t.add(spec("b", {5, 9}));
  t.add(spec("c", {3, 3, 4, 6}));
  t.add(spec("wte", {50, 8}, Role::Embedding));
  EXPECT_EQ(t.size(), 4);
  for (const auto& ti : t.tensors()) EXPECT_EQ(ti.offset % ParamTable::kAlignElems, 0) << ti.name;
  EXPECT_EQ(t[1].offset, 32);
  EXPECT_EQ(t[2].offset, 96);
  EXPECT_EQ(t.num_params(), 7 + 45 + 216 + 400);
  EXPECT_EQ(t[2].rows(), 4);
  EXPECT_EQ(t[2].cols(), 6);
  EXPECT_EQ(t[2].batch(), 9);
  EXPECT_EQ(t[2].mat_rows(), 3);
  EXPECT_EQ(t[2].mat_cols(), 72);
  EXPECT_EQ(t[2].fan_in, 72);
  EXPECT_EQ(t[0].rows(), 1);
  EXPECT_EQ(t[0].cols(), 7);
  EXPECT_EQ(t[0].resolved_owner(), Owner::AdamW);
  EXPECT_EQ(t[1].resolved_owner(), Owner::Muon);
  EXPECT_EQ(t[3].resolved_owner(), Owner::AdamW);  // embeddings never go to Muon
  EXPECT_EQ(t.find("c"), 2);
  EXPECT_EQ(t.find("zz"), -1);
}

TEST(ParamTable, BadSpecs) {
  ParamTable t;
  t.add(spec("a", {4}));
  expect_user_error([&] { t.add(spec("a", {4})); }, "used twice");
  expect_user_error([&] { t.add(spec("z", {4, 0})); }, "non-positive dimension");
  auto s = spec("v", {4}, Role::Bias);
  s.owner = Owner::Muon;
  expect_user_error([&] { t.add(s); }, "only matrices can be owned by Muon");
}

TEST(ParamTable, FingerprintTracksNamesAndShapes) {
  ParamTable a, b, c;
  a.add(spec("w", {4, 5}));
  b.add(spec("w", {5, 4}));
  c.add(spec("w", {4, 5}));
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(a.fingerprint(), c.fingerprint());
}

TEST(Chunks, CoverEveryElementOnce) {
  ParamTable t;
  t.add(spec("a", {1}));
  t.add(spec("b", {100003}));
  t.add(spec("c", {17, 19}));
  std::vector<int64_t> off;
  int64_t n = plan_state_offsets(t, {0, 2}, &off);
  EXPECT_EQ(off[1], -1);
  EXPECT_EQ(off[2], 32);
  EXPECT_EQ(n, 32 + 352);
  auto all = all_tensors(t);
  std::vector<int64_t> same;
  for (const auto& ti : t.tensors()) same.push_back(ti.offset);
  auto chunks = plan_chunks(t, all, same, 4096);
  std::vector<int> seen(size_t(t.total_elems()), 0);
  for (const auto& c : chunks) {
    EXPECT_LE(c.n, 4096);
    EXPECT_EQ(c.p_begin % 4, 0);
    for (int i = 0; i < c.n; i++) seen[size_t(c.p_begin + i)]++;
  }
  for (const auto& ti : t.tensors())
    for (int64_t i = 0; i < ti.numel; i++) ASSERT_EQ(seen[size_t(ti.offset + i)], 1) << ti.name << " " << i;
}

TEST(Chunks, TilesCoverEverySliceOnce) {
  for (auto [B, R, C] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 5000}, {2, 37, 1500}, {3, 2048, 768}, {1, 5, 3}}) {
    TileGrid g = plan_tile_grid(R, C, 1024, 32768);
    std::vector<Tile> tiles;
    append_tiles(&tiles, 7, B, R, C, g);
    std::vector<int> seen(size_t(B * R * C), 0);
    for (const auto& tl : tiles) {
      EXPECT_EQ(tl.slot, 7);
      EXPECT_LE(tl.nc, 1024);
      EXPECT_LT(tl.tr, g.row_tiles);
      EXPECT_LT(tl.tc, g.col_tiles);
      for (int r = tl.r0; r < tl.r0 + tl.nr; r++)
        for (int c = tl.c0; c < tl.c0 + tl.nc; c++) seen[size_t((tl.b * R + r) * C + c)]++;
    }
    for (int v : seen) ASSERT_EQ(v, 1);
  }
}

TEST(ModelTables, Gpt2CountsMatchTheKnownSizes) {
  EXPECT_EQ(model_table_by_name("gpt2-124m").num_params(), 124439808);
  EXPECT_EQ(model_table_by_name("gpt2-355m").num_params(), 354823168);
  EXPECT_EQ(model_table_by_name("gpt2-774m").num_params(), 774030080);
  EXPECT_EQ(model_table_by_name("gpt2-1558m").num_params(), 1557611200);
  Gpt2Shape fused = gpt2_shape("d12");
  fused.separate_qkv = false;
  EXPECT_EQ(gpt2_param_table(fused).num_params(), 124439808);
  EXPECT_EQ(model_table_by_name("vit-b16").num_params(), 86567656);  // timm vit_base_patch16_224
  // Muon takes exactly the hidden matrices: 12*L*C^2.
  int64_t hidden = 0;
  ParamTable t = model_table_by_name("gpt2-124m");
  for (const auto& ti : t.tensors())
    if (ti.resolved_owner() == Owner::Muon) hidden += ti.numel;
  EXPECT_EQ(hidden, 12ll * 12 * 768 * 768);
  expect_user_error([] { model_table_by_name("gpt3"); }, "unknown model");
  expect_user_error([] { gpt2_shape("d13"); }, "unknown GPT-2 size");
}

// The indices gpt2_param_table records are the tensors their names say, and each row carries GPT-2's
// initialisation (the residual projections scaled by 1/sqrt(2L)).
TEST(Tables, Gpt2IndicesAndInitialisation) {
  for (bool separate : {true, false}) {
    Gpt2Shape s = gpt2_shape("d12");
    s.separate_qkv = separate;
    Gpt2Tensors ix;
    const ParamTable t = gpt2_param_table(s, &ix);
    EXPECT_EQ(t[ix.wte].name, "wte");
    EXPECT_EQ(t[ix.lnfb].name, "ln_f.bias");
    const BlockTensors& b = ix.blocks[7];
    EXPECT_EQ(t[b.fcprojw].name, "h.7.mlp.proj.weight");
    EXPECT_EQ(t[b.ln2b].name, "h.7.ln_2.bias");
    EXPECT_EQ(t[b.qkvw[0]].name, separate ? "h.7.attn.q.weight" : "h.7.attn.qkv.weight");
    if (separate)
      EXPECT_EQ(t[b.qkvb[2]].name, "h.7.attn.v.bias");
    else
      EXPECT_EQ(b.qkvw[1], -1);
    const float proj_sd = float(0.02 / std::sqrt(24.0));
    EXPECT_EQ(t[b.projw].init_std, proj_sd);
    EXPECT_EQ(t[b.fcprojw].init_std, proj_sd);
    EXPECT_EQ(t[b.fcw].init_std, 0.02f);
    EXPECT_EQ(t[ix.wpe].init_std, 0.02f);
    EXPECT_TRUE(t[b.ln1w].init == Init::Ones && t[b.fcb].init == Init::Zeros && t[b.qkvw[0]].init == Init::Normal);
    EXPECT_EQ(gpt2_tensors(t, s).blocks[7].fcprojw, b.fcprojw);
  }
}

// The backward hook's groups: block l's tensors by name, the rest (embeddings, final norm, head) last, and
// every tensor of the table in exactly one group.
TEST(Tables, HookGroupsPartitionTheTableByBlock) {
  for (bool separate : {true, false}) {
    Gpt2Shape s = gpt2_shape("d12");
    s.separate_qkv = separate;
    const ParamTable t = gpt2_param_table(s);
    const auto groups = hook_groups(t, gpt2_tensors(t, s).blocks);
    ASSERT_EQ(groups.size(), 13u);
    std::vector<int> seen(size_t(t.size()), 0);
    for (size_t g = 0; g < groups.size(); g++)
      for (int i : groups[g]) {
        seen[size_t(i)]++;
        const std::string prefix = "h." + std::to_string(g) + ".";
        if (g < 12)
          EXPECT_EQ(t[i].name.rfind(prefix, 0), 0u) << t[i].name << " in group " << g;
        else
          EXPECT_NE(t[i].name.rfind("h.", 0), 0u) << t[i].name << " in the last group";
      }
    for (int i = 0; i < t.size(); i++) EXPECT_EQ(seen[size_t(i)], 1) << t[i].name;
    EXPECT_EQ(groups[3].size(), separate ? 16u : 12u);
    EXPECT_EQ(groups[12].size(), 4u);  // wte, wpe, ln_f weight and bias
  }
  const VitShape v = vit_shape("vit-b16");
  const ParamTable t = vit_param_table(v);
  const auto groups = hook_groups(t, vit_tensors(t, v).blocks);
  ASSERT_EQ(groups.size(), 13u);
  EXPECT_EQ(groups[12].size(), 8u);  // cls, pos, patch weight and bias, norm weight and bias, head weight and bias
}

// The MLP hook's part of each block: its ln_2 and MLP tensors (GPT-2) or norm2 and MLP (ViT), all in the
// block's own group, two thirds of the block's weights.
TEST(Tables, MlpListIsTheBlocksMlpPart) {
  Gpt2Shape s = gpt2_shape("d12");
  const ParamTable t = gpt2_param_table(s);
  const auto blocks = gpt2_tensors(t, s).blocks;
  const auto groups = hook_groups(t, blocks);
  for (size_t l = 0; l < blocks.size(); l++) {
    const std::vector<int> mlp = block_mlp_list(blocks[l]);
    ASSERT_EQ(mlp.size(), 6u);
    ASSERT_TRUE(std::is_sorted(mlp.begin(), mlp.end()));
    int64_t in_mlp = 0, in_block = 0;
    for (int i : groups[l]) in_block += t[i].numel;
    for (int i : mlp) {
      EXPECT_TRUE(std::count(groups[l].begin(), groups[l].end(), i)) << t[i].name;
      const std::string prefix = "h." + std::to_string(l) + ".";
      EXPECT_TRUE(t[i].name.rfind(prefix + "mlp.", 0) == 0 || t[i].name.rfind(prefix + "ln_2.", 0) == 0) << t[i].name;
      in_mlp += t[i].numel;
    }
    EXPECT_NEAR(double(in_mlp) / double(in_block), 2.0 / 3.0, 0.01);
  }
  const VitShape v = vit_shape("vit-b16");
  const ParamTable vt = vit_param_table(v);
  for (int i : block_mlp_list(vit_tensors(vt, v).blocks[5]))
    EXPECT_TRUE(vt[i].name.find(".mlp.") != std::string::npos || vt[i].name.find(".norm2.") != std::string::npos)
        << vt[i].name;
}

namespace {
// Element i of tensor k as init_params' header states the draws, computed here apart from its code.
float init_draw(Init kind, uint64_t seed, int k, int64_t i, float sd) {
  const uint64_t G = 0x9e3779b97f4a7c15ull, key = mix64(mix64(seed + G) ^ (uint64_t(k) + G));
  if (kind == Init::Uniform)
    return float(-double(sd) + 2.0 * double(sd) * (double(mix64(key + uint64_t(i) * G) >> 11) / 0x1.0p53));
  const uint64_t h = mix64(key + uint64_t(i / 2) * G);
  const float u1 = (float(uint32_t(h >> 32)) + 0.5f) / 4294967296.0f, u2 = float(uint32_t(h)) / 4294967296.0f;
  const float rad = sd * std::sqrt(-2.0f * std::log(u1)), angle = 6.28318530718f * u2;
  return i % 2 ? rad * std::sin(angle) : rad * std::cos(angle);
}
}  // namespace

TEST(Tables, InitParamsFollowsTheRows) {
  ParamTable t;
  TensorSpec a = tensor_spec("a", {4, 8}, Role::Hidden);
  a.init = Init::Normal;
  a.init_std = 0.5f;
  TensorSpec g = tensor_spec("g", {8}, Role::NormGain, false);
  g.init = Init::Ones;
  t.add(a);
  t.add(g);
  t.add(tensor_spec("b", {8}, Role::Bias, false));
  const std::vector<float> p = init_params(t, 3), q = init_params(t, 3), r = init_params(t, 4);
  EXPECT_EQ(p, q);
  EXPECT_NE(p, r);
  for (int64_t i = 0; i < 32; i++) EXPECT_EQ(p[size_t(i)], init_draw(Init::Normal, 3, 0, i, 0.5)) << i;
  // Into a buffer of NaNs: every element written, the padding between the tensors zero.
  ASSERT_GT(t.total_elems(), 48);
  std::vector<float> raw(size_t(t.total_elems()), NAN);
  init_params_into(t, 3, raw.data(), 2);
  EXPECT_EQ(raw, p);
  for (int i = 0; i < 8; i++) {
    EXPECT_EQ(p[size_t(t[1].offset + i)], 1.0f);
    EXPECT_EQ(p[size_t(t[2].offset + i)], 0.0f);
  }
}

// Tensors of several 1M-element pieces: the same values with 1 thread and with 8, the normal one's mean and
// standard deviation and the uniform one's range and variance those of its row.
TEST(Tables, InitParamsIsTheSameOnAnyThreadsAndHasItsRowsMoments) {
  ParamTable t;
  TensorSpec n = tensor_spec("n", {2100, 1000}, Role::Hidden);
  n.init = Init::Normal;
  n.init_std = 0.02f;
  TensorSpec u = tensor_spec("u", {1500, 1000}, Role::Hidden);
  u.init = Init::Uniform;
  u.init_std = 0.1f;
  t.add(n);
  t.add(u);
  const std::vector<float> one = init_params(t, 9, 1), many = init_params(t, 9, 8);
  ASSERT_EQ(one, many);
  for (int k = 0; k < 2; k++) {  // an element in every piece, the last element
    for (int64_t i : {int64_t(5), (int64_t(1) << 20) + 3, (int64_t(2) << 20) + 8, t[k].numel - 1}) {
      if (i >= t[k].numel) continue;
      EXPECT_EQ(one[size_t(t[k].offset + i)], init_draw(t[k].init, 9, k, i, t[k].init_std)) << k << " " << i;
    }
  }
  auto moments = [&](int k, double* mean, double* sd, float* lo, float* hi) {
    double s = 0, s2 = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (int64_t i = 0; i < t[k].numel; i++) {
      const float x = one[size_t(t[k].offset + i)];
      s += x, s2 += double(x) * x, *lo = std::min(*lo, x), *hi = std::max(*hi, x);
    }
    *mean = s / double(t[k].numel);
    *sd = std::sqrt(s2 / double(t[k].numel) - *mean * *mean);
  };
  double mean, sd;
  float lo, hi;
  moments(0, &mean, &sd, &lo, &hi);
  EXPECT_LT(std::fabs(mean), 0.005 * 0.02);  // 7 standard errors
  EXPECT_NEAR(sd, 0.02, 0.005 * 0.02);
  moments(1, &mean, &sd, &lo, &hi);
  EXPECT_TRUE(lo >= -0.1f && hi <= 0.1f && lo < -0.0999f && hi > 0.0999f) << lo << " " << hi;
  EXPECT_NEAR(sd, 0.1 / std::sqrt(3.0), 0.005 * 0.1);
}

// ViT tables: timm's names and shapes, the shared block's options (non-causal, erf GELU, epsilon 1e-6),
// timm's initialisation, and the configurations' sizes.
TEST(Tables, VitNamesShapesAndInitialisation) {
  VitShape s = vit_shape("vit-b16");
  EXPECT_EQ(s.tokens(), 197);
  EXPECT_FALSE(s.block().causal);
  EXPECT_EQ(s.block().gelu, Gelu::kErf);
  EXPECT_EQ(s.block().ln_eps, 1e-6f);
  VitTensors ix;
  const ParamTable t = vit_param_table(s, &ix);
  EXPECT_EQ(t[ix.pos].shape, (std::vector<int64_t>{1, 197, 768}));
  EXPECT_EQ(t[ix.patchw].shape, (std::vector<int64_t>{768, 3, 16, 16}));
  EXPECT_EQ(t[ix.blocks[3].fcw].name, "blocks.3.mlp.fc1.weight");
  EXPECT_EQ(t[ix.blocks[3].fcprojb].name, "blocks.3.mlp.fc2.bias");
  EXPECT_EQ(t[ix.blocks[0].ln1w].name, "blocks.0.norm1.weight");
  EXPECT_EQ(t[ix.blocks[0].qkvw[0]].name, "blocks.0.attn.qkv.weight");
  EXPECT_EQ(t[ix.headw].shape, (std::vector<int64_t>{1000, 768}));
  EXPECT_EQ(t[ix.patchw].init, Init::Uniform);
  EXPECT_FLOAT_EQ(t[ix.patchw].init_std, 1.0f / std::sqrt(768.0f));
  EXPECT_EQ(t[ix.cls].init_std, 1e-6f);
  EXPECT_EQ(t[ix.blocks[5].fcprojw].init_std, 0.02f);  // timm does not scale the residual projections
  EXPECT_EQ(t[ix.headw].resolved_owner(), Owner::AdamW);
  EXPECT_EQ(t[ix.patchw].resolved_owner(), Owner::AdamW);
  EXPECT_EQ(t[ix.blocks[2].fcw].resolved_owner(), Owner::Muon);
  EXPECT_EQ(vit_param_table(vit_shape("vit-ti16")).num_params(), 5717416);   // timm vit_tiny_patch16_224
  EXPECT_EQ(vit_param_table(vit_shape("vit-s16")).num_params(), 22050664);   // timm vit_small_patch16_224
  EXPECT_EQ(vit_param_table(vit_shape("vit-l16")).num_params(), 304326632);  // timm vit_large_patch16_224
  s.separate_qkv = true;
  const ParamTable sep = vit_param_table(s, &ix);
  EXPECT_EQ(sep.num_params(), t.num_params());
  EXPECT_EQ(sep[ix.blocks[1].qkvw[1]].name, "blocks.1.attn.k.weight");
  EXPECT_EQ(sep[ix.blocks[1].qkvw[1]].offset, sep[ix.blocks[1].qkvw[0]].offset + 768 * 768);
}

TEST(Tables, VitShapesAndErrors) {
  const VitShape small = vit_shape("vit-ti4");
  EXPECT_EQ(small.patch, 4);
  EXPECT_EQ(small.channels, 192);
  VitShape fm = small;
  fm.image = 28;
  fm.in_chans = 1;
  fm.classes = 10;
  EXPECT_EQ(fm.tokens(), 50);
  EXPECT_EQ(fm.patch_dim(), 16);
  const std::vector<float> p = init_params(vit_param_table(fm), 1);
  VitTensors ix;
  const ParamTable t = vit_param_table(fm, &ix);
  const float bound = 1.0f / 4.0f;  // 1 / sqrt(1 * 4 * 4)
  float lo = 1, hi = -1;
  for (int64_t i = 0; i < t[ix.patchw].numel; i++) {
    lo = std::min(lo, p[size_t(t[ix.patchw].offset + i)]);
    hi = std::max(hi, p[size_t(t[ix.patchw].offset + i)]);
  }
  EXPECT_TRUE(lo >= -bound && hi <= bound && hi - lo > bound) << lo << " " << hi;
  fm.image = 30;
  expect_user_error([&] { vit_param_table(fm); }, "multiple of the patch size");
  expect_user_error([] { vit_shape("vit-x16"); }, "unknown ViT");
  expect_user_error([] { vit_shape("vit-b"); }, "unknown ViT");
  expect_user_error([] { vit_shape("vit-b0"); }, "unknown ViT");
}

// A checkpoint names its model by the table's fingerprint: another model (another size, q/k/v layout,
// image size) is refused before anything is read; files from before the fingerprint fall back to the size.
TEST(Checkpoints, RefuseAnotherModel) {
  TempDir dir("ckpt_");
  Gpt2Shape small;  // small, so the files stay small
  small.layers = 1;
  small.channels = 64;
  small.heads = 1;
  small.vocab = 128;
  small.max_seq = 16;
  const ParamTable sep = gpt2_param_table(small);
  Gpt2Shape fused_shape = small;
  fused_shape.separate_qkv = false;
  const ParamTable fused = gpt2_param_table(fused_shape);
  ASSERT_EQ(sep.total_elems(), fused.total_elems());  // same size: only the fingerprint tells them apart
  auto write = [&](const std::string& name, const ParamTable* t) {
    SectionWriter w(dir.path() + "/" + name);
    if (t) {
      const uint64_t f = t->fingerprint();
      w.put("model.table", &f, sizeof f);
    }
    w.put_vector("model.params", std::vector<float>(size_t(sep.total_elems())));
    w.commit();
    return dir.path() + "/" + name;
  };
  const std::string same = write("same.bin", &sep), other = write("other.bin", &fused), old = write("old.bin", nullptr);
  check_checkpoint_params(SectionReader(same), sep, "-e");
  check_checkpoint_params(SectionReader(old), sep, "-e");  // no fingerprint: the size matches
  expect_user_error([&] { check_checkpoint_params(SectionReader(other), sep, "-e and --qkv"); },
                    "holds a different model; resume with the -e and --qkv that wrote it.");
  expect_user_error([&] { check_checkpoint_params(SectionReader(same), vit_param_table(vit_shape("vit-test")), "-e"); },
                    "holds a different model");
}
