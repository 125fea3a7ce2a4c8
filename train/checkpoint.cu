#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/cuda_check.h"
#include "train/checkpoint.h"

namespace {
// What every file of a checkpoint starts with: the model's description and the data-parallel set-up.
void put_identity(SectionWriter& w, const ParamTable& t, const DpRecord& dp) {
  const uint64_t fingerprint = t.fingerprint();
  w.put("model.table", &fingerprint, sizeof fingerprint);
  if (dp.world == 1 && dp.owner.empty()) return;  // as files written before there was data parallelism
  w.put_i64("dp.world", dp.world);
  if (!dp.owner.empty()) w.put_vector("dp.owner", dp.owner);
  if (!dp.cut.empty()) w.put_vector("dp.cut", dp.cut);
}
}  // namespace

void save_checkpoint(const std::string& path, const Arena& arena, const Model& model, const Optimizer& opt,
                     const TrainState& state, const DpRecord& dp) {
  CUDA_CHECK(cudaDeviceSynchronize());
  SectionWriter w(path);
  put_identity(w, arena.table(), dp);
  w.put_vector("model.params", to_natural_layout(arena.table(), arena.get_params_flat()));  // any world size
  w.put_string("model.kernels", model.kernel_choices());
  opt.save_state(w);
  w.put_i64("train.step", state.step);
  w.put_i64("train.dropout_counter", int64_t(state.dropout_counter));
  w.put_vector("train.loader", state.data);
  std::ostringstream r;
  r << state.rng;
  w.put_string("train.sample_rng", r.str());
  w.commit();
}

void save_rank_checkpoint(const std::string& path, const Arena& arena, const Optimizer* opt, const TrainState& state,
                          const DpRecord& dp) {
  CUDA_CHECK(cudaDeviceSynchronize());
  SectionWriter w(path);
  put_identity(w, arena.table(), dp);
  if (opt) opt->save_state(w);
  w.put_i64("train.step", state.step);
  w.put_vector("train.loader", state.data);
  w.commit();
}

void load_checkpoint(const SectionReader& r, Arena& arena, Model& model, Optimizer& opt,
                     const SectionReader* opt_file) {
  const std::vector<float> p = r.get_vector<float>("model.params");
  for (const auto& t : arena.table().tensors()) arena.set_param(t.index, &p[size_t(t.natural)]);
  // the kernel variants of the run that wrote the checkpoint (absent in older checkpoints: keep ours)
  const std::string kernels = r.has("model.kernels") ? r.get_string("model.kernels") : "";
  if (!kernels.empty() && !model.kernel_choices().empty()) model.set_kernel_choices(kernels);
  opt.load_state(opt_file ? *opt_file : r);
  if (r.has("train.dropout_counter")) model.set_dropout_counter(uint64_t(r.get_i64("train.dropout_counter")));
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "/model_%08lld.bin", (long long)step);
  return dir + name;
}

void prepare_ckpt_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    user_error("--ckpt-dir '", dir, "' is a file, not a folder; choose a folder.");
  fs::create_directories(dir, ec);
  if (ec)
    user_error("cannot create the checkpoint folder '", dir, "' (", ec.message(), "); choose another --ckpt-dir.");
  std::string probe = dir + "/.checkpoint_write_test_XXXXXX";
  const int fd = mkstemp(&probe[0]);
  if (fd < 0)
    user_error("cannot write in the checkpoint folder '", dir, "' (", std::strerror(errno),
               "); choose another --ckpt-dir.");
  close(fd);
  unlink(probe.c_str());
}
