#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace {
std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}
}  // namespace

AtomicFile::AtomicFile(std::string path, size_t buffer_bytes) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_)
    user_error("cannot write '", tmp_, "': ", std::strerror(errno), "; check that the folder exists and is writable.");
  if (buffer_bytes > 0) {
    buffer_.resize(buffer_bytes);
    std::setvbuf(f_, buffer_.data(), _IOFBF, buffer_.size());
  }
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_) std::remove(tmp_.c_str());
}

void AtomicFile::write(const void* p, size_t n) {
  CHECK(!committed_);
  if (n && std::fwrite(p, 1, n, f_) != n)
    user_error("writing '", tmp_, "' failed: ", std::strerror(errno), " (disk full?).");
}

void AtomicFile::commit() {
  CHECK(!committed_);
  if (std::fflush(f_) != 0 || fsync(fileno(f_)) != 0)
    user_error("writing '", tmp_, "' failed: ", std::strerror(errno), " (disk full?).");
  std::fclose(f_);
  f_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    user_error("cannot rename '", tmp_, "' to '", path_, "': ", std::strerror(errno), ".");
  committed_ = true;
  const int dfd = open(dir_of(path_).c_str(), O_RDONLY);  // make the rename itself durable
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}
