#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.h"

namespace {
std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Six characters that differ between the threads and processes of one machine: a per-process counter, the
// process id and the clock, mixed. O_EXCL, not the name, is what guarantees a fresh file.
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  uint64_t z = mix64(mix64(counter++ ^ (uint64_t(getpid()) << 40)) ^ t);
  const char* digits = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(6, 'x');
  for (char& c : s) c = digits[(z >>= 5) % 36];
  return s;
}

// Creates a fresh temporary beside `path`, never following a link; returns its descriptor.
int create_temp(const std::string& path, mode_t mode, std::string* tmp) {
  for (int attempt = 0; attempt < 100; attempt++) {
    *tmp = path + "." + unique_suffix() + ".tmp";
    const int fd = open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}
}  // namespace

void sync_dir(const std::string& dir) {
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

void sync_parent_dir(const std::string& path) { sync_dir(dir_of(path)); }

AtomicFile::AtomicFile(std::string path, size_t buffer_bytes, mode_t mode) : path_(std::move(path)) {
  const int fd = create_temp(path_, mode, &tmp_);
  if (fd < 0)
    user_error("cannot write '", tmp_, "': ", std::strerror(errno), "; check that the folder exists and is writable.");
  f_ = fdopen(fd, "wb");
  if (!f_) {
    close(fd);
    std::remove(tmp_.c_str());
    user_error("cannot write '", tmp_, "': ", std::strerror(errno), ".");
  }
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
  CHECK(!committed_ && f_);
  if (n && std::fwrite(p, 1, n, f_) != n)
    user_error("writing '", tmp_, "' failed: ", std::strerror(errno), " (disk full?).");
}

void AtomicFile::commit() {
  CHECK(!committed_ && f_);
  const bool flushed = std::fflush(f_) == 0 && fsync(fileno(f_)) == 0;
  const int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!flushed || !closed)
    user_error("writing '", tmp_, "' failed: ", std::strerror(flushed ? errno : err), " (disk full?).");
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    user_error("cannot rename '", tmp_, "' to '", path_, "': ", std::strerror(errno), ".");
  committed_ = true;
  sync_parent_dir(path_);  // make the rename itself durable
}
