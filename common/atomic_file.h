// A file written under a temporary name beside its target and renamed to <path> only by commit(), after
// an fsync of the data and then of the folder: a crash, a signal or an error never leaves a half-written
// file under the final name, and an uncommitted temporary is removed when the object goes away.
// Checkpoints (common/sections), tar and token shards, weight files and the NCCL id file go through it.
//
// The temporary is "<path>.XXXXXX.tmp" (six random characters), created exclusively (O_CREAT | O_EXCL |
// O_NOFOLLOW): a file or symlink planted under any name is never opened or followed, and writers of one
// path at the same time (threads or processes) each write their own temporary; the last rename wins and
// the path always holds one writer's complete file. A temporary of a writer killed by SIGKILL stays
// behind under its .tmp name (no writer can tell it from another live writer's).
#pragma once
#include <sys/types.h>

#include <cstdio>
#include <string>
#include <vector>

class AtomicFile {
 public:
  // buffer_bytes > 0: a stdio buffer of that size (large sequential writes). mode: the file's permissions
  // (less the umask), e.g. 0600 for a file only its owner may read.
  explicit AtomicFile(std::string path, size_t buffer_bytes = 0, mode_t mode = 0666);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* p, size_t n);  // UserError naming the file (disk full?)
  void commit();
  bool committed() const { return committed_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  std::vector<char> buffer_;
  bool committed_ = false;
};

// Fsyncs a folder, or the folder holding `path`, so that a rename or removal in it survives a crash (best
// effort: a folder that cannot be opened is left as it is).
void sync_dir(const std::string& dir);
void sync_parent_dir(const std::string& path);
