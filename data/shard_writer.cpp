#include "data/shard_writer.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/atomic_file.h"
#include "common/error.h"
#include "data/token_shards.h"

namespace {
std::string staging_dir(const std::string& dir, const std::string& name) { return dir + "/." + name + ".tokenize"; }

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (const dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

void write_small(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}

// Removes the staging folder and what is in it (two levels: new/, old/ and their files).
void remove_staging(const std::string& stage) {
  for (const std::string sub : {"new", "old"}) {
    for (const std::string& f : list_dir(stage + "/" + sub)) std::remove((stage + "/" + sub + "/" + f).c_str());
    rmdir((stage + "/" + sub).c_str());
  }
  for (const std::string& f : list_dir(stage)) std::remove((stage + "/" + f).c_str());
  rmdir(stage.c_str());
}

void move(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    user_error("cannot rename '", from, "' to '", to, "': ", std::strerror(errno), ".");
}

bool process_running(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }
}  // namespace

std::vector<std::string> dataset_files(const std::string& dir, const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& f : list_dir(dir))
    for (const std::string kind : {"_val_", "_train_"}) {
      const std::string head = name + kind;
      if (f.size() < head.size() + 10 || f.compare(0, head.size(), head) != 0 || f.substr(f.size() - 4) != ".bin")
        continue;
      const std::string digits = f.substr(head.size(), f.size() - 4 - head.size());
      if (digits.find_first_not_of("0123456789") == std::string::npos) out.push_back(f);
    }
  return out;
}

bool recover_dataset(const std::string& dir, const std::string& name) {
  const std::string stage = staging_dir(dir, name);
  if (!exists(stage)) return false;
  long pid = 0;
  std::ifstream(stage + "/pid") >> pid;
  if (pid != long(getpid()) && process_running(pid_t(pid)))
    user_error("another run (process ", pid, ") is writing the dataset '", name, "' in '", dir,
               "'; wait for it to finish, or remove '", stage, "' if no such run exists.");
  if (exists(stage + "/done")) {
    std::fprintf(stderr,
                 "finished the commit of dataset '%s' in '%s' that a killed run left (its old shards deleted)\n",
                 name.c_str(), dir.c_str());
  } else if (exists(stage + "/manifest")) {
    // Step 2 ends before step 3 begins: a new shard no longer in new/ was moved into the folder.
    for (const std::string& f : read_lines(stage + "/manifest"))
      if (!exists(stage + "/new/" + f) && exists(dir + "/" + f)) std::remove((dir + "/" + f).c_str());
    for (const std::string& f : list_dir(stage + "/old")) move(stage + "/old/" + f, dir + "/" + f);
    sync_dir(dir);
    std::fprintf(stderr, "restored dataset '%s' in '%s', whose replacement a killed run left half done\n", name.c_str(),
                 dir.c_str());
  }
  remove_staging(stage);
  return true;
}

ShardWriter::ShardWriter(std::string dir, std::string name, int64_t shard_tokens, int64_t val_tokens)
    : dir_(std::move(dir)), name_(std::move(name)), shard_tokens_(shard_tokens), val_tokens_(val_tokens) {
  CHECK(shard_tokens_ >= 1 && val_tokens_ >= 1);
  if (name_.empty() || name_.find('/') != std::string::npos || name_[0] == '.')
    user_error("a dataset name must be non-empty, without '/', and not begin with '.' (got '", name_, "').");
  stage_ = staging_dir(dir_, name_);
  recover_dataset(dir_, name_);
  for (const std::string& f : dataset_files(dir_, name_)) {  // refused now, not half way through a commit
    struct stat st;
    if (lstat((dir_ + "/" + f).c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      user_error("'", dir_, "/", f, "' has a shard's name but is not a regular file; move it out of the way.");
  }
  if (mkdir(stage_.c_str(), 0700) != 0 || mkdir((stage_ + "/new").c_str(), 0700) != 0)
    user_error("cannot create '", stage_, "/new': ", std::strerror(errno), "; check that '", dir_, "' is writable.");
  try {
    write_small(stage_ + "/pid", std::to_string(getpid()) + "\n");
  } catch (...) {
    remove_staging(stage_);
    throw;
  }
}

ShardWriter::~ShardWriter() {
  if (committed_) return;
  if (!consistent_) {
    std::fprintf(stderr, "could not restore dataset '%s' in '%s': the next run will (see '%s')\n", name_.c_str(),
                 dir_.c_str(), stage_.c_str());
    return;
  }
  remove_staging(stage_);
}

void ShardWriter::add(const std::vector<int>& ids) {
  for (int id : ids) {
    CHECK(id >= 0 && id <= 65535);
    buf_.push_back(uint16_t(id));
    if (int64_t(buf_.size()) == (written_.empty() ? val_tokens_ : shard_tokens_)) flush();
  }
}

void ShardWriter::flush() {
  if (buf_.empty()) return;
  const int index = int(written_.size());
  char file[64];
  std::snprintf(file, sizeof file, "_%s_%06d.bin", index == 0 ? "val" : "train", index);
  written_.push_back(name_ + file);
  write_token_shard(stage_ + "/new/" + written_.back(), buf_);  // fsynced
  total_ += int64_t(buf_.size());
  buf_.clear();
}

// Undoes steps 2-3 in this process: the new shards moved so far leave the folder, the old set comes back.
void ShardWriter::roll_back() {
  consistent_ = false;
  for (const std::string& f : moved_new_)
    if (std::rename((dir_ + "/" + f).c_str(), (stage_ + "/new/" + f).c_str()) != 0) return;
  for (const std::string& f : moved_old_)
    if (std::rename((stage_ + "/old/" + f).c_str(), (dir_ + "/" + f).c_str()) != 0) return;
  sync_dir(dir_);
  consistent_ = true;
}

void ShardWriter::commit(const std::function<void(int)>& after_step) {
  CHECK(!committed_);
  flush();
  if (written_.empty()) user_error("there are no tokens to write; the dataset '", name_, "' was left as it was.");
  sync_dir(stage_ + "/new");
  std::string manifest;
  for (const std::string& f : written_) manifest += f + "\n";
  write_small(stage_ + "/manifest", manifest);
  int step = 0;
  try {
    if (mkdir((stage_ + "/old").c_str(), 0700) != 0)
      user_error("cannot create '", stage_, "/old': ", std::strerror(errno), ".");
    for (const std::string& f : dataset_files(dir_, name_)) {
      move(dir_ + "/" + f, stage_ + "/old/" + f);
      moved_old_.push_back(f);
      if (after_step) after_step(step++);
    }
    for (const std::string& f : written_) {
      move(stage_ + "/new/" + f, dir_ + "/" + f);
      moved_new_.push_back(f);
      if (after_step) after_step(step++);
    }
    sync_dir(dir_);
    sync_dir(stage_ + "/old");
    write_small(stage_ + "/done", "");
  } catch (const UserError& e) {
    roll_back();
    std::string why = e.what();
    if (!why.empty() && why.back() == '.') why.pop_back();
    user_error(why, consistent_ ? "; the previous dataset was restored."
                                : "; the next run for this dataset will restore the previous one.");
  }
  committed_ = true;
  if (after_step) after_step(step++);
  remove_staging(stage_);
}
