// Checkpoints: one section file (common/sections.h: checksummed, written to a temporary file, fsynced
// and renamed, so a crash never leaves a half-written one) holding the model's own description, the
// parameters, the kernel choices, the optimizer state and the training state. A run resumed from it
// continues bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/sections.h"
#include "models/model.h"
#include "optim/optimizer.h"

// What a checkpoint holds besides the model and the optimizer.
struct TrainState {
  int64_t step = 0;              // optimizer steps done
  std::vector<int64_t> data;     // where the training data continues: the loader's position as integers
  std::mt19937_64 rng;           // the sampling generator
  uint64_t dropout_counter = 0;  // micro-batches trained with dropout so far (the masks' counter)
};

// Writes path, the model described by its parameter table's fingerprint (names, shapes, roles), which the
// load side checks first.
void save_checkpoint(const std::string& path, const Arena& arena, const Model& model, const Optimizer& opt,
                     const TrainState& state);
// The training state, read before any GPU work (the caller has checked the model's description).
TrainState read_train_state(const SectionReader& r);
// UserError unless the file holds the model of `table` (its fingerprint; in files written before there
// was one, the parameters' size). flags_hint: which flags choose the model, for the message.
void check_checkpoint_params(const SectionReader& r, const ParamTable& table, const std::string& flags_hint);
// The rest, into the arena, the model (kernel choices, dropout counter) and the optimizer.
void load_checkpoint(const SectionReader& r, Arena& arena, Model& model, Optimizer& opt);

// "<dir>/model_<step, 8 digits>.bin"
std::string checkpoint_path(const std::string& dir, int64_t step);
// Makes the checkpoint folder and writes a file in it, so that a path that is a file, or a folder that
// cannot be written, is refused at start and not at the first checkpoint, possibly hours later.
void prepare_ckpt_dir(const std::string& dir);
