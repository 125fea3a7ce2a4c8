// A streaming reader of tar archives as WebDataset shards (imagenet-1k-wds) are written: 512-byte headers
// (ustar with its name prefix, or old v7), pax extended headers ('x': a `path` or `size` record overrides
// the next member's; 'g' global headers are skipped), GNU long names ('L'), regular files ('0', '\0',
// '7') returned in order, every other type (folders, links, GNU 'K') skipped. Every header's checksum is
// verified (the unsigned sum, or the signed one some old tars wrote); sizes are octal or GNU base-256.
//
// The end of the archive: two zero blocks (what follows them, such as the padding to a 10240-byte record,
// is not read), one zero block then the end of the file, or the end of the file where a header would
// start. GNU tar and Python's tarfile accept the last two silently; a shard cut at exactly a member
// boundary cannot be told from a complete one without its end blocks, so they are accepted too. A file
// ending anywhere else (in a header, a member's data or its padding) is refused as truncated, and so is
// a zero block followed by anything but a zero block (a concatenated or damaged archive).
//
// A file is read through a stdio buffer (1 MiB by default), so a 140 MB shard is never held whole;
// member data is read straight into the caller's buffer. Every error is a UserError that names the
// archive and the member (its name, or the byte offset of its header).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

struct TarMember {
  std::string name;    // full path: pax `path`, GNU long name, or ustar prefix + '/' + name
  int64_t size = 0;    // bytes of data
  int64_t offset = 0;  // offset of its first header (its pax or long-name header, if any): a restart point
};

class TarReader {
 public:
  static constexpr int64_t kMaxMemberBytes = int64_t(64) << 20;  // no image of a sample is near this
  static constexpr size_t kMaxNameBytes = 4096;
  static constexpr int64_t kMaxExtendedHeaderBytes = 64 << 10;  // a pax or long-name header's data

  // Reads the file at `path`, starting at byte `offset` (0, or a TarMember::offset / offset() seen before).
  explicit TarReader(const std::string& path, int64_t offset = 0, size_t buffer_bytes = size_t(1) << 20);
  // Reads an archive held in memory (tests, fuzzing); `label` names it in errors. The bytes must outlive it.
  TarReader(const uint8_t* data, size_t size, std::string label, int64_t offset = 0);
  ~TarReader();
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;

  // The next regular file: fills `member` and `data` (resized to its size). False at the end of the archive.
  bool next(TarMember& member, std::vector<uint8_t>& data);
  // Restarts at `offset`, which must be where a header (chain) begins.
  void seek(int64_t offset);
  // Where the next header begins: resuming there with seek() continues with the next member. At the end,
  // the end marker's offset (the bytes after it, such as a record's padding, are never read).
  int64_t offset() const { return pos_; }
  const std::string& path() const { return path_; }
  int64_t archive_size() const { return size_; }

 private:
  struct Header;  // one parsed 512-byte header
  bool read_header(Header& h);
  void read_bytes(void* dst, int64_t n, const char* what, int64_t header_at);
  void skip_bytes(int64_t n);
  std::string read_extended(const Header& h);  // a pax or long-name header's data
  [[noreturn]] void fail(int64_t at, const std::string& name, const std::string& why) const;

  std::string path_;
  FILE* file_ = nullptr;
  std::vector<char> stdio_buffer_;
  const uint8_t* mem_ = nullptr;
  int64_t size_ = 0, pos_ = 0;
  bool ended_ = false;
};
