#include "core/param_table.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "common/error.h"
#include "common/hash64.h"

const char* role_name(Role r) {
  switch (r) {
    case Role::Embedding:
      return "embedding";
    case Role::PosEmbedding:
      return "pos_embedding";
    case Role::InputProj:
      return "input_proj";
    case Role::Hidden:
      return "hidden";
    case Role::Head:
      return "head";
    case Role::Bias:
      return "bias";
    case Role::NormGain:
      return "norm_gain";
    case Role::NormBias:
      return "norm_bias";
  }
  return "?";
}

TensorSpec tensor_spec(std::string name, std::vector<int64_t> shape, Role role, bool decay) {
  TensorSpec s;
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.role = role;
  s.decay = decay;
  return s;
}

Owner TensorInfo::resolved_owner() const {
  if (owner != Owner::Auto) return owner;
  return (role == Role::Hidden && ndim() >= 2) ? Owner::Muon : Owner::AdamW;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

int ParamTable::add(TensorSpec spec) {
  if (spec.name.empty()) user_error("a parameter tensor needs a name.");
  if (find(spec.name) >= 0) user_error("parameter name '", spec.name, "' is used twice in the table.");
  TensorInfo t;
  static_cast<TensorSpec&>(t) = std::move(spec);
  t.numel = 1;
  for (int64_t d : t.shape) {
    if (d <= 0) user_error("parameter '", t.name, "' has a non-positive dimension in shape ", shape_str(t.shape), ".");
    t.numel *= d;
  }
  if (t.owner == Owner::Muon && t.ndim() < 2)
    user_error("parameter '", t.name, "' is ", t.ndim(), "-D; only matrices can be owned by Muon.");
  if (t.fan_in == 0) t.fan_in = t.ndim() >= 2 ? t.numel / t.shape[0] : 1;
  t.index = int(tensors_.size());
  // A piece's tensors must fill their slots, so that the next one starts where each ends.
  CHECK(tensors_.empty() || !tensors_.back().with_next || tensors_.back().numel % kAlignElems == 0);
  // The tensor's slot: its elements (or its reserve, for padded rows), rounded up to 128 bytes.
  t.offset = t.natural = total_;
  total_ += (std::max(t.numel, t.reserve) + kAlignElems - 1) / kAlignElems * kAlignElems;
  natural_total_ = total_;
  params_ += t.numel;
  tensors_.push_back(std::move(t));
  return tensors_.back().index;
}

int ParamTable::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return t.index;
  return -1;
}

// Names, shapes and roles (not offsets): a checkpoint or weight file of another model is refused by it.
uint64_t ParamTable::fingerprint() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 64-bit
  auto mix = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  };
  for (const auto& t : tensors_) {
    mix(t.name.data(), t.name.size());
    mix(t.shape.data(), t.shape.size() * sizeof(int64_t));
    uint8_t r = uint8_t(t.role);
    mix(&r, 1);
  }
  return h;
}

// Moves the tensors to `offsets` (the sharded mode's rank-by-rank layout); checks that the slots stay aligned,
// inside `total` and disjoint, and that the tensors of a piece stay back to back.
void ParamTable::set_layout(const std::vector<int64_t>& offsets, int64_t total) {
  CHECK(offsets.size() == tensors_.size() && total % kAlignElems == 0);
  std::vector<std::pair<int64_t, int64_t>> spans;  // [begin, end) of each tensor's slot
  for (auto& t : tensors_) {
    const int64_t slot = (std::max(t.numel, t.reserve) + kAlignElems - 1) / kAlignElems * kAlignElems;
    t.offset = offsets[size_t(t.index)];
    CHECK(t.offset >= 0 && t.offset % kAlignElems == 0 && t.offset + slot <= total);
    spans.push_back({t.offset, t.offset + slot});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); k++) CHECK(spans[k].first >= spans[k - 1].second);
  for (const Piece& p : pieces()) CHECK(back_to_back(p.first, p.count));
  total_ = total;
}

// Runs of tensors chained by with_next (q, k, v of one block: one matmul reads them as one matrix).
std::vector<ParamTable::Piece> ParamTable::pieces() const {
  std::vector<Piece> v;
  for (int i = 0; i < size(); i++) {
    if (i > 0 && tensors_[size_t(i - 1)].with_next)
      v.back().count++;
    else
      v.push_back({i, 1});
  }
  return v;
}

bool ParamTable::back_to_back(int first, int count) const {
  CHECK(first >= 0 && count >= 1 && first + count <= size());
  for (int i = first; i + 1 < first + count; i++)
    if (tensors_[size_t(i + 1)].offset != tensors_[size_t(i)].offset + tensors_[size_t(i)].numel) return false;
  return true;
}

std::vector<float> to_natural_layout(const ParamTable& t, const std::vector<float>& flat) {
  CHECK(int64_t(flat.size()) == t.total_elems());
  std::vector<float> out(size_t(t.natural_total()), 0.0f);
  for (const auto& ti : t.tensors()) std::copy_n(&flat[size_t(ti.offset)], ti.numel, &out[size_t(ti.natural)]);
  return out;
}

std::vector<float> from_natural_layout(const ParamTable& t, const std::vector<float>& natural) {
  CHECK(int64_t(natural.size()) == t.natural_total());
  std::vector<float> out(size_t(t.total_elems()), 0.0f);
  for (const auto& ti : t.tensors()) std::copy_n(&natural[size_t(ti.natural)], ti.numel, &out[size_t(ti.offset)]);
  return out;
}

namespace {
// Elements [begin, end) of tensor ti into x (its first element): begin is even, so that a normal tensor's
// Box-Muller pairs are whole (init_params' header has the draws).
void fill_init(const TensorInfo& ti, uint64_t key, int64_t begin, int64_t end, float* x) {
  const float sd = ti.init_std;
  if (ti.init == Init::Zeros) std::fill(x + begin, x + end, 0.0f);
  if (ti.init == Init::Ones) std::fill(x + begin, x + end, 1.0f);
  if (ti.init == Init::Normal) {  // float math: ~15 ns a pair on one core of the machine without a GPU
    constexpr float kTwoPi = 6.28318530718f;
    for (int64_t i = begin; i < end; i += 2) {
      const uint64_t h = mix64(key + uint64_t(i / 2) * kGolden64);
      const float u1 = (float(uint32_t(h >> 32)) + 0.5f) * 0x1.0p-32f, u2 = float(uint32_t(h)) * 0x1.0p-32f;
      const float r = sd * std::sqrt(-2.0f * std::log(u1)), a = kTwoPi * u2;
      x[i] = r * std::cos(a);
      if (i + 1 < end) x[i + 1] = r * std::sin(a);
    }
  } else if (ti.init == Init::Uniform) {
    for (int64_t i = begin; i < end; i++)
      x[i] = float(-double(sd) + 2.0 * double(sd) * (double(mix64(key + uint64_t(i) * kGolden64) >> 11) * 0x1.0p-53));
  }
}
}  // namespace

void init_params_into(const ParamTable& t, uint64_t seed, float* out, int threads) {
  // Pieces of at most 1M elements (even starts), taken in turn by the threads; zero rows too, so that the
  // threads are the first to touch every page of the tensors.
  constexpr int64_t kPiece = int64_t(1) << 20;
  struct Piece {
    int tensor;
    int64_t begin, end;
  };
  std::vector<Piece> pieces;
  for (const auto& ti : t.tensors())
    for (int64_t b = 0; b < ti.numel; b += kPiece) pieces.push_back({ti.index, b, std::min(ti.numel, b + kPiece)});
  const uint64_t base = mix64(seed + kGolden64);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < pieces.size();) {
      const TensorInfo& ti = t[pieces[k].tensor];
      fill_init(ti, mix64(base ^ (uint64_t(ti.index) + kGolden64)), pieces[k].begin, pieces[k].end, out + ti.offset);
    }
  };
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int i = 1; i < std::min(threads, int(pieces.size())); i++) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  // The padding between the tensors (the layout's alignment), zero.
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& ti : t.tensors()) spans.push_back({ti.offset, ti.offset + ti.numel});
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const auto& [b, e] : spans) {
    if (at < b) std::fill(out + at, out + b, 0.0f);
    at = std::max(at, e);
  }
  std::fill(out + at, out + t.total_elems(), 0.0f);
}

std::vector<float> init_params(const ParamTable& t, uint64_t seed, int threads) {
  std::vector<float> p(size_t(t.total_elems()));
  init_params_into(t, seed, p.data(), threads);
  return p;
}
