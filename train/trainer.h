// The set-up both training programs share, so that each program is its flags, its data, its evaluation
// and a loop a reader sees whole. Two stages:
//  - TrainPlan, before the GPU: the processes (read from the environment here, once), the batch, the
//    optimizer options of the flags, the data-parallel set-up over the model's table and the checkpoint to
//    resume from, each read and checked, so that a mistake costs no GPU time. The program calls its steps
//    between its own checks, in the order in which their mistakes are reported.
//  - Trainer, on the GPU: the processes joined, the log opened, the arena with its initial weights; once
//    the program has made its model on the arena, the optimizer, the clipper and the resumed state; once it
//    has its data, the step runner and the checkpointer. Then, per step: the step itself (micro-batches,
//    clip, update, log line), the rule for a bad shard, and the step's end (checkpoint, stop).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "models/block_table.h"
#include "models/model.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/checkpointer.h"
#include "train/data_parallel.h"
#include "train/step_runner.h"
#include "train/train_flags.h"
#include "train/train_log.h"

struct TrainPlan {
  std::unique_ptr<DataParallel> dp;            // this process among the others (the process group)
  int accum = 1;                               // micro-batches per step
  OptimOptions options;                        // the flags' (train_optimizer_options), checked
  ParamTable table;                            // the model's, natural layout (the arena's: dp->layout(table))
  std::unique_ptr<SectionReader> resume;       // opened, checksums verified, model, optimizer and set-up checked
  std::unique_ptr<SectionReader> rank_resume;  // data parallel, ranks > 0: the rank's own file
  TrainState state;                            // --resume's, else a fresh run's

  // After the program's flag checks: the process group, read from the environment (ranks > 0 neither log
  // nor validate), the output paths, and the batch, of micro-batches of micro_units (tokens, images) per
  // process. Fills in the defaults of f (-u, -d).
  void start(TrainFlags* f, int64_t micro_units);
  // The model's table (in its natural layout): the optimizer options of the flags, checked (learned
  // optimizers' weight files read), and the data-parallel mode over the table.
  void set_model(const TrainFlags& f, ParamTable model_table);
  // --resume (false without it): the checkpoint opened, its model (model_flags: the flags that choose the
  // model, for the message), optimizer and data-parallel set-up checked, its state read. The program then
  // takes its data position from state.data.
  bool open_resume(const TrainFlags& f, const std::string& model_flags);
  // The last check (a GPU), then the checkpoint folder: what the run writes comes after every check.
  void finish(const TrainFlags& f) const;
};

class Trainer {
 public:
  // Joins the other processes (before anything makes a context on another GPU), opens the log (MFU from
  // work_per_step, the model FLOPs of one step; unit: what -d counts, "tok" or "img") and makes the arena
  // (bf16: with a bf16 copy) with the table's initial weights (--seed). plan outlives the Trainer.
  Trainer(const TrainFlags& f, TrainPlan& plan, double work_per_step, const char* unit, bool bf16);
  // The program's model, made on arena(): the optimizer (with --overlap over the hook groups of `blocks`,
  // the model's in the arena's table), the clipper, the checkpoint's weights and state loaded, the stop
  // signals caught.
  void set_model(Model& model, const std::vector<BlockTensors>& blocks);
  // The step runner over the program's batches, and the checkpointer. After the program's header and data.
  void start(BatchSource batches);

  Arena& arena() { return *arena_; }
  const ParamTable& table() const { return arena_->table(); }  // laid out rank by rank when sharded
  const DevicePeak& peak() const { return peak_; }
  TrainLog& log() { return *log_; }
  TrainState& state() { return plan_.state; }
  int64_t first_step() const { return first_step_; }  // the resumed step, or 0

  // The header's lines on how the step runs: --overlap, data parallel.
  void print_step_setup() const;
  // Runs `body`: the program's evaluation and sampling, then step(). A bad shard found in it (DataError)
  // saves the state at the step's start and stops with the error; the failed step's micro-batches changed
  // only gradients, which a checkpoint does not keep. Returns body's answer.
  bool guard(int64_t step, const std::function<bool()>& body);
  // Step `step` (0-based): micro-batches, clip, optimizer update, one log line. True when a process
  // received a stop signal (every process stops after the same step).
  bool step(int64_t step);
  // After the program has recorded its data position in state(): a checkpoint every -n steps and on a
  // signal. True: stop now.
  bool end_step(int64_t step, bool stop);
  // The checkpoint after `step` steps (nothing without --ckpt-dir); its path.
  std::string checkpoint(int64_t step);

 private:
  const TrainFlags& f_;
  TrainPlan& plan_;
  DataParallel& dp_;
  DevicePeak peak_;
  std::unique_ptr<TrainLog> log_;
  std::unique_ptr<Arena> arena_;
  Model* model_ = nullptr;
  std::vector<std::vector<int>> groups_;      // the hook groups (models/block_table.h)
  std::vector<std::vector<int>> mlp_groups_;  // each block's MLP tensors (block_mlp_list)
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<GradClipper> clipper_;
  BatchSource source_;
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<Checkpointer> ckpt_;
  int64_t first_step_ = 0;
};
