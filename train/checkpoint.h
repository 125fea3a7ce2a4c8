// Checkpoints: one section file (common/sections.h: checksummed, written to a temporary file, fsynced
// and renamed, so a crash never leaves a half-written one) holding the model's own description, the
// parameters, the kernel choices, the optimizer state and the training state. A run resumed from it
// continues bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
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

// How the run that wrote a checkpoint was spread over processes (train/data_parallel.h): the world size,
// and in the sharded mode each tensor's owner and where the plan cut a tensor between two owners. Every
// file of a checkpoint records it.
struct DpRecord {
  int world = 1;
  std::vector<int> owner;    // empty: one process, or the all-reduce mode
  std::vector<int64_t> cut;  // per tensor (ShardPlan::cut); empty: no tensor cut
};

// Writes path, the model described by its parameter table's fingerprint (names, shapes, roles), which the
// load side checks first. The parameters are stored in the table's natural layout, whatever the arena's.
void save_checkpoint(const std::string& path, const Arena& arena, const Model& model, const Optimizer& opt,
                     const TrainState& state, const DpRecord& dp = {});

// Data parallel, world > 1: rank r > 0 writes "<rank 0's file>.rank<r>" before rank 0 writes its own (so
// rank 0's file exists only when every rank's does): the step, this rank's data position, and in the
// sharded mode its optimizer state (opt; null in the all-reduce mode, where rank 0's file has it all).
std::string rank_checkpoint_path(const std::string& main, int rank);
void save_rank_checkpoint(const std::string& path, const Arena& arena, const Optimizer* opt, const TrainState& state,
                          const DpRecord& dp);
// UserError unless the file was written with the same world size and, sharded, the same owners and cuts.
void check_checkpoint_dp(const SectionReader& r, const DpRecord& dp);
// A rank file's data position, after checking its model, set-up and step against rank 0's state.
std::vector<int64_t> read_rank_position(const SectionReader& r, const ParamTable& table, const DpRecord& dp,
                                        int64_t step);
// Opens a checkpoint (--resume): checksums verified; a folder is refused with a sentence naming its newest
// checkpoint file.
std::unique_ptr<SectionReader> open_checkpoint(const std::string& path);
// The training state, read before any GPU work (the caller has checked the model's description); a step
// below 0 or a sample generator that does not read back is refused as damage, a step beyond `steps`
// (this run's -x) with what -x to give.
TrainState read_train_state(const SectionReader& r, int64_t steps);
// UserError unless the file holds the state of `optimizer` (-o), stepped as `overlap` (--overlap) steps it;
// before any GPU work (load_checkpoint checks the rest against the optimizer it makes).
void check_checkpoint_optimizer(const SectionReader& r, const std::string& optimizer, bool overlap);
// UserError unless the file holds the model of `table` (its fingerprint; in files written before there
// was one, the parameters' size). flags_hint: which flags choose the model, for the message.
void check_checkpoint_params(const SectionReader& r, const ParamTable& table, const std::string& flags_hint);
// The rest, into the arena, the model (kernel choices, dropout counter) and the optimizer; the optimizer's
// state from opt_file when given (a sharded rank's own file), else from r.
void load_checkpoint(const SectionReader& r, Arena& arena, Model& model, Optimizer& opt,
                     const SectionReader* opt_file = nullptr);

// "<dir>/model_<step, 8 digits>.bin"
std::string checkpoint_path(const std::string& dir, int64_t step);
// Makes the checkpoint folder and writes a file in it, so that a path that is a file, or a folder that
// cannot be written, is refused at start and not at the first checkpoint, possibly hours later.
void prepare_ckpt_dir(const std::string& dir);
