// tokenize's output: a dataset's token shards (data/token_shards.h), written as llm.c's fineweb.py writes
// them (shard 0, {name}_val_000000.bin, holds val_tokens tokens; {name}_train_000001.bin, ... shard_tokens
// each, the last the rest), replacing the dataset of that name in the folder all or nothing.
//
// How (one staging folder per dataset, <dir>/.<name>.tokenize/):
//   writing   each full shard goes to staging/new/, fsynced; staging/pid names the writing process
//   commit()  1. staging/manifest lists the new shards (fsynced: from here a crash is undone by name)
//             2. the old set's files ({name}_val_*.bin, {name}_train_*.bin) move into staging/old/
//             3. the new shards move into the folder
//             4. staging/done is written (the commit point), then the staging folder is removed
// A failure in steps 2-3 (a rename refused) moves everything back before the UserError: the old set is
// restored and the new shards removed. An error or a signal before commit() removes the staging folder;
// the folder's other files are never touched.
//
// A run killed outright (SIGKILL, power loss) leaves its staging folder; the next writer of the same
// dataset (same folder and name) finishes it before anything else: with `done`, the old set is deleted
// (the new one is complete); otherwise the new shards already moved are removed and the old set moved
// back. Either way the folder holds one complete set, and no old data is lost before the commit point.
// A staging folder whose process is still running is refused (two runs writing one dataset).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string name, int64_t shard_tokens, int64_t val_tokens);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  void add(const std::vector<int>& ids);
  // `after_step` (tests): called after each rename of steps 2-3 and after step 4 with a running count, so a
  // test can stop the process at every point of the commit.
  void commit(const std::function<void(int)>& after_step = nullptr);
  int shards() const { return int(written_.size()); }
  int64_t tokens() const { return total_; }
  const std::string& staging() const { return stage_; }

 private:
  void flush();
  void roll_back();
  std::string dir_, name_, stage_;
  int64_t shard_tokens_, val_tokens_, total_ = 0;
  std::vector<uint16_t> buf_;
  std::vector<std::string> written_;                // the new shards' file names, in staging/new until commit()
  std::vector<std::string> moved_old_, moved_new_;  // by commit() so far
  bool committed_ = false, consistent_ = true;      // consistent_: the folder holds the old set (no half commit)
};

// The names of the files of dataset `name` in `dir` ({name}_val_NNNNNN.bin, {name}_train_NNNNNN.bin), sorted.
std::vector<std::string> dataset_files(const std::string& dir, const std::string& name);
// Finishes or undoes what a killed writer of dataset `name` left in `dir` (see above); false if nothing was
// left. UserError if that writer is still running.
bool recover_dataset(const std::string& dir, const std::string& name);
