// A file written as <path>.tmp and renamed to <path> only by commit(), after an fsync of the data and then
// of the folder: a crash, a signal or an error never leaves a half-written file under the final name, and
// an uncommitted temporary is removed when the object goes away. Checkpoints (common/sections) and tar
// shards (data/tar_writer) are written through it.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

class AtomicFile {
 public:
  // buffer_bytes > 0: a stdio buffer of that size (large sequential writes).
  explicit AtomicFile(std::string path, size_t buffer_bytes = 0);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* p, size_t n);  // UserError naming the file (disk full?)
  void commit();
  bool committed() const { return committed_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  std::vector<char> buffer_;
  bool committed_ = false;
};
