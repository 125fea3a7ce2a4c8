// The parameter table: one row per model tensor, built once per model. Everything an optimizer needs to
// know about a tensor is here, so no code indexes tensors by magic numbers. Offsets are in elements
// into the arena's flat buffers and aligned to kAlignElems (128 bytes of fp32) for vector loads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

enum class Role : uint8_t {
  Embedding,     // token embedding (GPT-2: tied to the LM head)
  PosEmbedding,  // learned position embedding, ViT cls token
  InputProj,     // ViT patch embedding (input layer: fan-in is the fixed data width)
  Hidden,        // hidden weight matrix (q, k, v, attn proj, mlp fc, mlp proj)
  Head,          // output / classifier weights
  Bias,
  NormGain,
  NormBias,
};
const char* role_name(Role r);

// How a tensor starts: zeros, ones, normal(0, init_std), or uniform(-init_std, init_std) (PyTorch's default
// for a convolution, which timm's ViT keeps for its patch embedding).
enum class Init : uint8_t { Zeros, Ones, Normal, Uniform };

// Which optimizer family updates a tensor when a "matrix" optimizer (Muon) is chosen.
enum class Owner : uint8_t { Auto, AdamW, Muon };

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // torch layout: Linear weights are (out, in), convs (out, in, kh, kw)
  Role role = Role::Hidden;
  bool decay = true;          // decoupled weight decay applies
  int64_t fan_in = 0;         // 0 = derived: product of all dims but the first (matrices), 1 otherwise
  Owner owner = Owner::Auto;  // Auto: Muon takes Hidden matrices, AdamW takes the rest
  int64_t reserve = 0;        // elements to reserve if more than numel: zero padding a model may
                              // read as extra rows (GPT-2's head pads the vocabulary); never optimized
  Init init = Init::Zeros;    // the model's initialisation of this tensor
  float init_std = 0.0f;      // Init::Normal: the standard deviation; Init::Uniform: the bound
  bool with_next = false;     // a kernel reads it and the next tensor as one piece (separate q, k, v as
                              // one (3C, C) matrix): every layout keeps the two back to back, in order
};

TensorSpec tensor_spec(std::string name, std::vector<int64_t> shape, Role role, bool decay = true);

struct TensorInfo : TensorSpec {
  int index = 0;
  int64_t offset = 0;   // elements into the arena
  int64_t natural = 0;  // where add() put it: the offset in every layout but a data-parallel shard layout
  int64_t numel = 0;
  int ndim() const { return int(shape.size()); }
  // Last two dims (torch Adafactor factoring), with all leading dims as a batch. 1-D: rows = 1.
  int64_t rows() const { return ndim() >= 2 ? shape[ndim() - 2] : 1; }
  int64_t cols() const { return ndim() >= 1 ? shape[ndim() - 1] : 1; }
  int64_t batch() const { return numel / (rows() * cols()); }
  // The 2-D view used by matrix optimizers: (shape[0], rest), conv (out, in*kh*kw).
  int64_t mat_rows() const { return ndim() >= 1 ? shape[0] : 1; }
  int64_t mat_cols() const { return mat_rows() ? numel / mat_rows() : 0; }
  Owner resolved_owner() const;  // Auto resolved from role and rank
};

class ParamTable {
 public:
  static constexpr int64_t kAlignElems = 32;  // 128 bytes of fp32

  // Adds a tensor; returns its index. Names must be unique, dims positive.
  int add(TensorSpec spec);
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo& operator[](int i) const { return tensors_[size_t(i)]; }
  int size() const { return int(tensors_.size()); }
  int find(const std::string& name) const;        // -1 if absent
  int64_t total_elems() const { return total_; }  // padded arena length
  int64_t num_params() const { return params_; }  // sum of numel
  // Stable hash of names, shapes and roles: a checkpoint stores it to refuse a different model.
  uint64_t fingerprint() const;
  // The same tensors at other places (the rank-by-rank layout of core/shard_plan.h): offsets[i] for
  // tensor i, aligned and not overlapping, within `total` elements. Each tensor keeps its natural offset,
  // the layout checkpoints use, so that they do not depend on how many GPUs wrote them.
  // The layout must keep every piece (pieces()) back to back.
  void set_layout(const std::vector<int64_t>& offsets, int64_t total);
  // The runs of tensors a kernel reads as one piece (with_next), in table order: {first index, count};
  // every other tensor is a piece of one.
  struct Piece {
    int first, count;
  };
  std::vector<Piece> pieces() const;
  // Whether tensor i and the count - 1 after it lie back to back in this layout, each starting where the
  // one before it ends: what a kernel that reads them as one piece needs.
  bool back_to_back(int first, int count) const;
  int64_t natural_total() const { return natural_total_; }

 private:
  std::vector<TensorInfo> tensors_;
  int64_t total_ = 0, params_ = 0, natural_total_ = 0;
};

std::string shape_str(const std::vector<int64_t>& shape);

// Every tensor initialised as its row says; fp32 in the arena's flat layout, padding zero. Counter-based:
// tensor k's key is mix64(mix64(seed + G) ^ (k + G)) (common/hash64.h, G its increment); a normal tensor's
// elements 2j and 2j + 1 are one Box-Muller pair from h = mix64(key + j G), in float: u1 = (h's high 32 bits
// + 1/2) / 2^32, u2 = (its low 32 bits) / 2^32, std sqrt(-2 ln u1) cos(2 pi u2) and ... sin(2 pi u2); a uniform
// one's element i is -std + 2 std u in double, u = (mix64(key + i G) >> 11) / 2^53. So every value follows from
// (seed, k, i) alone, not from the layout, the thread count or the order of filling, and `threads` (0: the
// machine's) fill at once.
std::vector<float> init_params(const ParamTable& t, uint64_t seed, int threads = 0);
// The same into `out` (t.total_elems() floats, every one written), so that a caller's uninitialised buffer is
// first touched by the threads rather than zero-filled by one (6 GB at GPT-2 1558M).
void init_params_into(const ParamTable& t, uint64_t seed, float* out, int threads = 0);
// Between the arena's flat layout and the natural one (ParamTable::natural): what checkpoints hold.
std::vector<float> to_natural_layout(const ParamTable& t, const std::vector<float>& flat);
std::vector<float> from_natural_layout(const ParamTable& t, const std::vector<float>& natural);
