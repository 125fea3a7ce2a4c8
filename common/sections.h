// Section files: the one container for checkpoints and optimizer state.
//
//   "LOPTSECT" (8 bytes) | u32 version (1) | u32 0
//   per section: u32 name_len | name | u64 nbytes | data[nbytes] | u32 crc32(data)
//   last section: "__end__" holding the u64 number of sections before it
//
// SectionWriter writes to a temporary beside <path> (common/atomic_file.h), and commit() fsyncs and renames
// it over <path>: a crash or a signal at any moment leaves either the old file or the new one, never half
// of one. SectionReader checks structure and every checksum when it opens, so a truncated or corrupt file
// is refused before any of it is used.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/atomic_file.h"

class SectionWriter {
 public:
  explicit SectionWriter(std::string path);
  // an uncommitted file is removed when the writer goes away (common/atomic_file.h)
  SectionWriter(const SectionWriter&) = delete;
  SectionWriter& operator=(const SectionWriter&) = delete;

  void begin(const std::string& name, uint64_t nbytes);
  void write(const void* data, size_t n);  // part of the current section's data
  void end();
  void put(const std::string& name, const void* data, uint64_t nbytes);
  void put_string(const std::string& name, const std::string& s) { put(name, s.data(), s.size()); }
  void put_i64(const std::string& name, int64_t v) { put(name, &v, sizeof v); }
  template <class T>
  void put_vector(const std::string& name, const std::vector<T>& v) {
    put(name, v.data(), v.size() * sizeof(T));
  }
  void commit();
  const std::string& path() const { return file_.path(); }

 private:
  AtomicFile file_;
  bool in_section_ = false;
  uint64_t remaining_ = 0, count_ = 0;
  uint32_t crc_ = 0;
  std::vector<std::string> names_;
  void raw(const void* p, size_t n);
};

class SectionReader {
 public:
  explicit SectionReader(std::string path);  // throws UserError naming the file and the problem
  SectionReader(const SectionReader&) = delete;
  SectionReader& operator=(const SectionReader&) = delete;

  bool has(const std::string& name) const { return index_.count(name) != 0; }
  uint64_t size(const std::string& name) const;
  // Reads a whole section into dst; its size must be exactly nbytes.
  void read(const std::string& name, void* dst, uint64_t nbytes) const;
  // Streams a section of exactly nbytes in pieces of at most `piece` bytes (for device uploads).
  void read_pieces(const std::string& name, uint64_t nbytes, size_t piece,
                   const std::function<void(const void*, size_t, uint64_t offset)>& fn) const;
  std::string get_string(const std::string& name) const;
  int64_t get_i64(const std::string& name) const;
  template <class T>
  std::vector<T> get_vector(const std::string& name) const {
    uint64_t n = size(name);
    if (n % sizeof(T)) fail(name, "has a size that is not a whole number of elements");
    std::vector<T> v(n / sizeof(T));
    read(name, v.data(), n);
    return v;
  }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(const std::string& section, const std::string& why) const;

 private:
  struct Entry {
    uint64_t offset, nbytes;
  };
  struct Closer {
    void operator()(FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  // Owned by a member, not closed in ~SectionReader: when the constructor refuses a file (throws), the
  // destructor never runs, but members are still destroyed, so the file is closed.
  std::unique_ptr<FILE, Closer> f_;
  std::map<std::string, Entry> index_;
  const Entry& entry(const std::string& name) const;
};
