// Writes ustar tar archives that TarReader and GNU tar read: regular files only, mode 0644, owner 0 and
// time 0 (so the same members give the same bytes), a name that fits ustar's name field or its name + prefix
// split at a '/', otherwise a pax 'x' header with a `path` record before the member. Used by the dataset
// converters, the tests and the fuzz seeds.
//
// The archive is written to a temporary file beside <path> (common/atomic_file.h); commit() ends it with two zero
// blocks, fsyncs it and renames it over <path>, so a reader never sees half a shard. A writer destroyed without
// commit() (an error part way) removes its temporary file.
#pragma once
#include <cstdint>
#include <string>

#include "common/atomic_file.h"

// One 512-byte ustar header with its checksum: `name` must fit the 100-byte name field and `prefix` the
// 155-byte prefix field. Exposed so tests can build archives by hand (GNU long names, folders, corruption).
std::string tar_header(const std::string& name, int64_t size, char type, const std::string& prefix = "");

// The zero bytes that pad n bytes of member data to a whole 512-byte block.
std::string tar_padding(int64_t n);

class TarWriter {
 public:
  explicit TarWriter(std::string path);  // an uncommitted archive is removed (common/atomic_file.h)
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  // Appends a regular file; UserError for an empty name, one over 4096 bytes, or data over 64 MiB (what
  // TarReader accepts).
  void add(const std::string& name, const void* data, size_t size);
  void add(const std::string& name, const std::string& data) { add(name, data.data(), data.size()); }
  void commit();
  const std::string& path() const { return file_.path(); }

 private:
  void raw(const std::string& bytes) { file_.write(bytes.data(), bytes.size()); }
  void raw(const void* p, size_t n) { file_.write(p, n); }
  AtomicFile file_;
};
