#include "common/sections.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/crc32.h"
#include "common/error.h"

namespace {
const char kMagic[8] = {'L', 'O', 'P', 'T', 'S', 'E', 'C', 'T'};
const uint32_t kVersion = 1;
const char* kEnd = "__end__";
const uint32_t kMaxName = 4096;
const size_t kPiece = size_t(1) << 22;  // bytes checksummed at a time when a file is opened
}  // namespace

// ---------------------------------------------------------------------------------------------- writer

SectionWriter::SectionWriter(std::string path) : file_(std::move(path)) {
  raw(kMagic, 8);
  uint32_t hdr[2] = {kVersion, 0};
  raw(hdr, sizeof hdr);
}

void SectionWriter::raw(const void* p, size_t n) { file_.write(p, n); }

void SectionWriter::begin(const std::string& name, uint64_t nbytes) {
  CHECK(!in_section_ && !file_.committed() && !name.empty() && name.size() < kMaxName);
  for (const auto& n : names_) CHECK(n != name);
  names_.push_back(name);
  uint32_t len = uint32_t(name.size());
  raw(&len, 4);
  raw(name.data(), len);
  raw(&nbytes, 8);
  in_section_ = true;
  remaining_ = nbytes;
  crc_ = 0;
}

void SectionWriter::write(const void* data, size_t n) {
  CHECK(in_section_ && n <= remaining_);
  raw(data, n);
  crc_ = crc32_update(crc_, data, n);
  remaining_ -= n;
}

void SectionWriter::end() {
  CHECK(in_section_ && remaining_ == 0);
  raw(&crc_, 4);
  in_section_ = false;
  count_++;
}

void SectionWriter::put(const std::string& name, const void* data, uint64_t nbytes) {
  begin(name, nbytes);
  write(data, nbytes);
  end();
}

void SectionWriter::commit() {
  CHECK(!in_section_ && !file_.committed());
  uint64_t n = count_;
  put(kEnd, &n, sizeof n);
  file_.commit();
}

// ---------------------------------------------------------------------------------------------- reader

void SectionReader::fail(const std::string& section, const std::string& why) const {
  if (section.empty()) user_error("'", path_, "' ", why, ".");
  user_error("'", path_, "': section '", section, "' ", why, ".");
}

SectionReader::SectionReader(std::string path) : path_(std::move(path)), f_(std::fopen(path_.c_str(), "rb")) {
  if (!f_) user_error("cannot open '", path_, "': ", std::strerror(errno), ".");
  FILE* f = f_.get();
  auto need = [&](void* p, size_t n, const char* what) {
    if (std::fread(p, 1, n, f) != n)
      fail("", std::string("is truncated (ends inside ") + what + "); the file is incomplete or not a checkpoint");
  };
  char magic[8];
  uint32_t hdr[2];
  need(magic, 8, "the header");
  if (std::memcmp(magic, kMagic, 8) != 0) fail("", "is not a checkpoint/state file of this program (bad magic bytes)");
  need(hdr, sizeof hdr, "the header");
  if (hdr[0] != kVersion)
    fail("", str_cat("has format version ", hdr[0], " but this program reads version ", kVersion));
  // Grown to the largest piece read, at most 4 MiB and never past the file's size: zeroing 4 MiB for every
  // reader (or for a section whose size is a lie) made small files slow.
  std::vector<char> buf;
  std::fseek(f, 0, SEEK_END);
  const uint64_t file_size = uint64_t(std::ftell(f));
  std::fseek(f, 16, SEEK_SET);
  uint64_t sections = 0;
  for (;;) {
    uint32_t len;
    need(&len, 4, "a section header");
    if (len == 0 || len >= kMaxName) fail("", "is corrupt (bad section name length)");
    std::string name(len, '\0');
    need(&name[0], len, "a section name");
    uint64_t nbytes;
    need(&nbytes, 8, "a section header");
    Entry e{uint64_t(std::ftell(f)), nbytes};
    if (nbytes > file_size - e.offset) fail(name, "is truncated; the file is incomplete");
    uint32_t crc = 0;
    for (uint64_t left = nbytes; left > 0;) {
      size_t n = size_t(std::min<uint64_t>(left, kPiece));
      if (buf.size() < n) buf.resize(n);
      if (std::fread(buf.data(), 1, n, f) != n) fail(name, "is truncated; the file is incomplete");
      crc = crc32_update(crc, buf.data(), n);
      left -= n;
    }
    uint32_t stored;
    need(&stored, 4, "a checksum");
    if (stored != crc) fail(name, "fails its checksum; the file is corrupt");
    if (name == kEnd) {
      uint64_t count = 0;
      if (nbytes != 8) fail(name, "is malformed");
      std::fseek(f, long(e.offset), SEEK_SET);
      need(&count, 8, "the end marker");
      if (count != sections) fail("", "is corrupt (section count mismatch)");
      break;
    }
    if (index_.count(name)) fail(name, "appears twice; the file is corrupt");
    index_[name] = e;
    sections++;
  }
}

const SectionReader::Entry& SectionReader::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail(name, "is missing; the file was written by another program or model");
  return it->second;
}

uint64_t SectionReader::size(const std::string& name) const { return entry(name).nbytes; }

void SectionReader::read_pieces(const std::string& name, uint64_t nbytes, size_t piece,
                                const std::function<void(const void*, size_t, uint64_t)>& fn) const {
  const Entry& e = entry(name);
  if (e.nbytes != nbytes)
    fail(name, str_cat("holds ", e.nbytes, " bytes but ", nbytes,
                       " were expected; it belongs to a different model or configuration"));
  std::vector<char> buf(std::min<uint64_t>(piece, std::max<uint64_t>(nbytes, 1)));
  std::fseek(f_.get(), long(e.offset), SEEK_SET);
  for (uint64_t done = 0; done < nbytes;) {
    size_t n = size_t(std::min<uint64_t>(nbytes - done, buf.size()));
    if (std::fread(buf.data(), 1, n, f_.get()) != n) fail(name, "could not be read (the file changed while open?)");
    fn(buf.data(), n, done);
    done += n;
  }
}

void SectionReader::read(const std::string& name, void* dst, uint64_t nbytes) const {
  read_pieces(name, nbytes, size_t(std::max<uint64_t>(nbytes, 1)),
              [&](const void* p, size_t n, uint64_t off) { std::memcpy(static_cast<char*>(dst) + off, p, n); });
}

std::string SectionReader::get_string(const std::string& name) const {
  std::string s(size(name), '\0');
  read(name, s.empty() ? nullptr : &s[0], s.size());
  return s;
}

int64_t SectionReader::get_i64(const std::string& name) const {
  int64_t v;
  read(name, &v, sizeof v);
  return v;
}
