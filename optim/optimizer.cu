#include <algorithm>

#include "optim/adafactor.h"
#include "optim/adamw.h"
#include "optim/lopt/celo2.h"
#include "optim/lopt/small_fc_lopt.h"
#include "optim/lopt/velo.h"
#include "optim/muon.h"
#include "optim/optimizer.h"

std::vector<int> owned_tensors(const ParamTable& t, const Owned& owned) { return part_tensors(owned_parts(t, owned)); }

Optimizer::Optimizer(Arena& arena, const OptimOptions& opts, const Owned& owned, CrossRank* cross)
    : arena_(arena), opts_(opts), parts_(owned_parts(arena.table(), owned)), cut_(owned.cut), cross_(cross) {
  owned_ = part_tensors(parts_);
  d_step_.alloc(1, "step counter");
  d_step_.zero();
}

void Optimizer::require_whole(const std::vector<int>& tensors) const {
  const ParamTable& t = arena_.table();
  for (const Part& p : parts_)  // the shard plan cuts only where shard_cut_unit allows
    if (std::binary_search(tensors.begin(), tensors.end(), p.tensor)) CHECK(p.begin == 0 && p.end == t[p.tensor].numel);
}

namespace {
// The owned parts that are not whole, as (tensor, begin, end) triples: what a checkpoint records of them.
std::vector<int64_t> partial_parts(const ParamTable& t, const std::vector<Part>& parts) {
  std::vector<int64_t> v;
  for (const Part& p : parts)
    if (p.begin != 0 || p.end != t[p.tensor].numel) v.insert(v.end(), {p.tensor, p.begin, p.end});
  return v;
}
}  // namespace

size_t Optimizer::state_bytes() const {
  size_t n = 0;
  for (const auto& b : state_buffers()) n += b.bytes;
  return n;
}

int64_t Optimizer::steps_done() const { return d_step_.download(1)[0]; }

std::vector<Optimizer::StateBuffer> Optimizer::saved_buffers() const {
  std::vector<StateBuffer> bufs = state_buffers();
  bufs.insert(bufs.begin(), StateBuffer{"counter", d_step_.get(), sizeof(int64_t)});
  return bufs;
}

void Optimizer::save_state(SectionWriter& w) const {
  CUDA_CHECK(cudaDeviceSynchronize());
  w.put_string("optim.name", name());
  uint64_t fp = arena_.table().fingerprint();
  w.put("optim.fingerprint", &fp, sizeof fp);
  w.put_vector("optim.owned", owned_);
  const std::vector<int64_t> partial = partial_parts(arena_.table(), parts_);
  if (!partial.empty()) w.put_vector("optim.parts", partial);  // absent: every owned tensor whole
  if (groups() > 1) w.put_i64("optim.groups", groups());       // absent: one group, as in files written before
  const size_t piece = size_t(64) << 20;
  std::vector<char> host(piece);
  auto dump = [&](const std::string& name, const void* dptr, size_t bytes) {
    w.begin(name, bytes);
    for (size_t off = 0; off < bytes; off += piece) {
      size_t n = std::min(piece, bytes - off);
      CUDA_CHECK(cudaMemcpy(host.data(), static_cast<const char*>(dptr) + off, n, cudaMemcpyDeviceToHost));
      w.write(host.data(), n);
    }
    w.end();
  };
  for (const auto& b : saved_buffers()) dump("optim." + b.name, b.ptr, b.bytes);
}

void Optimizer::load_state(const SectionReader& r) {
  std::string saved = r.get_string("optim.name");
  if (saved != name())
    user_error("'", r.path(), "' holds the state of optimizer '", saved, "', not '", name(), "'; resume with -o ",
               saved, " or start without the state file.");
  uint64_t fp = 0;
  r.read("optim.fingerprint", &fp, sizeof fp);
  if (fp != arena_.table().fingerprint())
    user_error("'", r.path(), "' was saved for a different model (parameter names or shapes differ).");
  // Written since optimizers own subsets; older files hold the state of every tensor.
  const std::vector<int> saved_owned =
      r.has("optim.owned") ? r.get_vector<int>("optim.owned") : all_tensors(arena_.table());
  if (saved_owned != owned_)
    user_error("'", r.path(), "' holds optimizer state for ", saved_owned.size(), " tensors, not the ", owned_.size(),
               " this run steps; resume with the same number of GPUs and sharding.");
  const std::vector<int64_t> saved_parts =
      r.has("optim.parts") ? r.get_vector<int64_t>("optim.parts") : std::vector<int64_t>{};
  if (saved_parts != partial_parts(arena_.table(), parts_))
    user_error("'", r.path(), "' holds optimizer state for other parts of the tensors than this run steps; resume ",
               "with the same number of GPUs and sharding.");
  const int64_t saved_groups = r.has("optim.groups") ? r.get_i64("optim.groups") : 1;
  if (saved_groups != groups())
    user_error("'", r.path(), "' holds optimizer state stepped ",
               saved_groups > 1 ? "block by block (--overlap)" : "over the whole model at once",
               ", and this run steps ", groups() > 1 ? "block by block (--overlap)" : "it at once",
               "; resume with the --overlap setting of the run that wrote it.");
  const auto bufs = saved_buffers();
  for (const auto& b : bufs)  // check everything before overwriting anything
    if (r.size("optim." + b.name) != b.bytes)
      r.fail("optim." + b.name, str_cat("holds ", r.size("optim." + b.name), " bytes but this optimizer needs ",
                                        b.bytes, "; it was saved with other settings"));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (const auto& b : bufs)
    r.read_pieces("optim." + b.name, b.bytes, size_t(64) << 20, [&](const void* p, size_t n, uint64_t off) {
      CUDA_CHECK(cudaMemcpy(static_cast<char*>(b.ptr) + off, p, n, cudaMemcpyHostToDevice));
    });
  params_changed();  // a checkpoint's weights come with its state
}

// AdamW, Adafactor and Muon step each tensor on its own: they need nothing from other ranks.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const OptimOptions& opts, Arena& arena,
                                          const Owned& owned, CrossRank* cross) {
  validate_options(name, opts);
  if (name == "adamw") return std::make_unique<AdamW>(arena, opts, owned);
  if (name == "adafactor") return std::make_unique<Adafactor>(arena, opts, owned);
  if (name == "muon") return std::make_unique<Muon>(arena, opts, owned);
  if (name == "small_fc_lopt")
    return std::make_unique<SmallFcLopt>(arena, opts, load_small_fc_weights(opts.small_fc.weights),
                                         SmallFcMode::kSmallFc, owned, cross);
  if (name == "velo") return std::make_unique<Velo>(arena, opts, load_velo_weights(opts.velo.weights), owned, cross);
  if (name == "celo2")
    return std::make_unique<Celo2>(arena, opts, load_celo2_weights(opts.celo2.weights), Celo2Mode::kCelo2, owned,
                                   cross);
  if (name == "elo_celo2")
    return std::make_unique<Celo2>(arena, opts, load_elo_celo2_weights(opts.elo_celo2.weights), Celo2Mode::kEloCelo2,
                                   owned, cross);
  if (name == "elo")  // small_fc_lopt's network and passes in ELO's mode (small_fc_lopt.h)
    return std::make_unique<SmallFcLopt>(arena, opts, load_elo_weights(opts.elo.weights), SmallFcMode::kElo, owned,
                                         cross);
  user_error("unknown optimizer '", name, "'.");  // unreachable: validate_options checked the name
}
