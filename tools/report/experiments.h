// What `report pylo` reads: the experiment files of scripts/reproduce_pylo.sh (DIR/exp/NAME.jsonl: a header
// line, the programs' JSON lines, one "run" line per program run, an end line) and the paper's figures
// (tools/report/pylo_paper.jsonl), with the lookups the report's sections share.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "common/json.h"

namespace report {

struct Run {
  std::string cmd;
  int exit = 0;
  double wall_s = 0;
  bool skipped = false;  // not started: the deadline
  std::string commit;    // the commit it ran at (a resumed experiment carries runs of an earlier call)
};

struct Experiment {
  std::string name, title, status = "not run", reason, gpu, commit, invocation, started;
  bool present = false, quick = false;
  double wall_s = 0;
  Json header;              // the {"experiment":{...}} object's inside
  std::vector<Json> lines;  // every line between the header and the end line that is not a run line
  std::vector<Run> runs;
  int failed = 0;
  bool done() const { return status == "ok" || status == "partial"; }
  std::string header_str(const std::string& key) const;
  // "commit abc1234", or where carried runs ran at other commits "commits abc1234 (41 runs), def5678 (22 runs)"
  // in the order of their first run; "" when none is known.
  std::string commits() const;
};

// DIR/exp/NAME.jsonl, or an Experiment with present = false when there is none.
Experiment read_experiment(const std::string& dir, const std::string& name);
Experiment experiment_of(const std::vector<Json>& lines, const std::string& name);

// The paper's figures: one Json object per value (item, model, optimizer, impl, mode, quantity, value, gpu,
// source, B, schedule).
class Paper {
 public:
  explicit Paper(std::vector<Json> rows) : rows_(std::move(rows)) {}
  static Paper read(const std::string& path);
  // The value whose fields equal every key of `match` (absent keys in a row count as ""); NaN if none.
  double value(const std::map<std::string, std::string>& match) const;
  const Json* row(const std::map<std::string, std::string>& match) const;
  // The GPU the paper names for `item` ("" when none).
  std::string gpu(const std::string& item) const;
  const std::vector<Json>& rows() const { return rows_; }

 private:
  std::vector<Json> rows_;
};

// Names. A bench script's "extra" flags to our optimizer's name ("-o small_fc_lopt --set small_fc_lopt.fast=1"
// -> "small_fc_lopt:fast"); a program's model name to bench_optim's (d12 -> gpt2-124m); display names.
std::string optimizer_of_extra(const std::string& extra);
std::string canonical_model(const std::string& model);
std::string model_title(const std::string& model);    // "GPT-2 124M", "ViT-B/16", "MLP 4096 x 4 layers", ...
std::string optimizer_title(const std::string& opt);  // "small_fc_lopt (fast)", "AdamW", ...
// Our optimizer entry as the paper's (and the peers') name: small_fc_lopt:fast -> small_fc_lopt.
std::string base_optimizer(const std::string& opt);

}  // namespace report
