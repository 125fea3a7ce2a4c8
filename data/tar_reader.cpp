#include "data/tar_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace {
constexpr int64_t kBlock = 512;

int64_t padded(int64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

// A NUL-terminated field of at most n bytes.
std::string field(const uint8_t* p, size_t n) {
  size_t len = 0;
  while (len < n && p[len]) len++;
  return std::string(reinterpret_cast<const char*>(p), len);
}

// An octal number field: leading spaces, digits, then only spaces or NULs. -1 when it does not parse;
// `empty_ok` reads a field with no digits as 0 (some writers leave the size of folders blank).
int64_t parse_octal(const uint8_t* p, size_t n, bool empty_ok) {
  size_t i = 0;
  while (i < n && p[i] == ' ') i++;
  int64_t v = 0;
  size_t digits = 0;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; i++, digits++) v = v * 8 + (p[i] - '0');  // <= 12 digits: no overflow
  for (; i < n; i++)
    if (p[i] != ' ' && p[i] != 0) return -1;
  return digits || empty_ok ? v : -1;
}

// The size field: octal, or GNU base-256 (first byte 0x80, then a big-endian number) for sizes of 8 GiB and
// more. -1 when it does not parse or is negative; values too large for int64 also give -1.
int64_t parse_size(const uint8_t* p) {
  if (!(p[0] & 0x80)) return parse_octal(p, 12, true);
  if (p[0] != 0x80) return -1;  // 0xff...: negative
  int64_t v = 0;
  for (int i = 1; i < 12; i++) {
    if (v > (INT64_MAX >> 8)) return -1;
    v = (v << 8) | p[i];
  }
  return v;
}

bool all_zero(const uint8_t* p) {
  for (int64_t i = 0; i < kBlock; i++)
    if (p[i]) return false;
  return true;
}

// A pax decimal value (a `size` record): digits only.
int64_t parse_decimal(const std::string& s) {
  if (s.empty() || s.size() > 18) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}
}  // namespace

struct TarReader::Header {
  int64_t at = 0;  // its offset
  char type = 0;
  std::string name;
  int64_t size = 0;
};

TarReader::TarReader(const std::string& path, int64_t offset, size_t buffer_bytes) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) user_error("cannot open tar archive '", path, "': ", std::strerror(errno), "; check the shard path.");
  struct stat st;
  if (fstat(fileno(file_), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(file_);
    file_ = nullptr;
    user_error("'", path, "' is not a regular file; a shard must be a tar archive.");
  }
  size_ = int64_t(st.st_size);
  // No bigger than the file: zeroing 1 MiB for each small shard opened was most of a resume's time.
  stdio_buffer_.resize(std::min(buffer_bytes, size_t(std::max<int64_t>(size_, 4096))));
  std::setvbuf(file_, stdio_buffer_.data(), _IOFBF, stdio_buffer_.size());
  try {
    seek(offset);
  } catch (...) {  // the destructor does not run for a constructor that throws
    std::fclose(file_);
    file_ = nullptr;
    throw;
  }
}

TarReader::TarReader(const uint8_t* data, size_t size, std::string label, int64_t offset)
    : path_(std::move(label)), mem_(data), size_(int64_t(size)) {
  seek(offset);
}

TarReader::~TarReader() {
  if (file_) std::fclose(file_);
}

void TarReader::seek(int64_t offset) {
  if (offset < 0 || offset > size_ || offset % kBlock != 0)
    user_error("cannot resume tar archive '", path_, "' at byte ", offset,
               ": no header can start there (the archive is ", size_,
               " bytes); the shard changed since the position was recorded, or the position is corrupt.");
  if (file_ && fseeko(file_, offset, SEEK_SET) != 0)
    user_error("cannot seek in tar archive '", path_, "': ", std::strerror(errno), ".");
  pos_ = offset;
  ended_ = false;
}

void TarReader::fail(int64_t at, const std::string& name, const std::string& why) const {
  if (name.empty()) user_error("tar archive '", path_, "': the header at byte ", at, " ", why, ".");
  user_error("tar archive '", path_, "': member '", name, "' (header at byte ", at, ") ", why, ".");
}

void TarReader::read_bytes(void* dst, int64_t n, const char* what, int64_t header_at) {
  if (n == 0) return;
  if (file_) {
    if (std::fread(dst, 1, size_t(n), file_) != size_t(n))
      fail(header_at, "", str_cat("could not be read (", what, "): the file shrank or the disk failed"));
  } else {
    std::memcpy(dst, mem_ + pos_, size_t(n));
  }
  pos_ += n;
}

void TarReader::skip_bytes(int64_t n) {
  if (file_ && n > 0) {
    if (n <= 64 * 1024) {  // small skips (padding) stay in the stdio buffer
      char scratch[64 * 1024];
      read_bytes(scratch, n, "skipped data", pos_);
      return;
    }
    if (fseeko(file_, n, SEEK_CUR) != 0) user_error("cannot seek in tar archive '", path_, "'.");
  }
  pos_ += n;
}

// Reads the header at pos_. False at the end of the archive (see the header for what counts as one).
// The fields read, by byte offset: name [0, 100), size [124, 136) (octal or base-256), checksum [148, 156),
// type 156, magic "ustar" 257 with version "00" at 263, name prefix [345, 500).
bool TarReader::read_header(Header& h) {
  h.at = pos_;
  if (pos_ == size_) return false;
  if (size_ - pos_ < kBlock)
    fail(pos_, "",
         str_cat("is cut short (the archive ends ", size_ - pos_,
                 " bytes into it); the shard is truncated: ", "download or write it again"));
  uint8_t b[kBlock];
  read_bytes(b, kBlock, "header", h.at);
  if (all_zero(b)) {
    if (pos_ == size_) return false;
    if (size_ - pos_ < kBlock) fail(pos_, "", "is cut short after a zero block; the shard is truncated");
    read_bytes(b, kBlock, "header", pos_);
    if (!all_zero(b))
      fail(pos_ - kBlock, "", "follows a lone zero block; the archive is damaged or several archives joined together");
    return false;
  }
  const int64_t stored = parse_octal(b + 148, 8, false);
  if (stored < 0) fail(h.at, field(b, 100), "has a checksum field that is not an octal number; the shard is corrupt");
  int64_t sum_unsigned = 0, sum_signed = 0;
  for (int64_t i = 0; i < kBlock; i++) {
    const bool in_field = i >= 148 && i < 156;  // the checksum is summed as if it were spaces
    sum_unsigned += in_field ? ' ' : b[i];
    sum_signed += in_field ? ' ' : int8_t(b[i]);
  }
  if (stored != sum_unsigned && stored != sum_signed)
    fail(h.at, field(b, 100),
         str_cat("has a bad checksum (stored ", stored, ", computed ", sum_unsigned,
                 "); the shard is corrupt or this is not a header: download or write it again"));
  h.type = char(b[156]);
  h.size = parse_size(b + 124);
  h.name = field(b, 100);
  if (std::memcmp(b + 257, "ustar", 6) == 0 && b[263] == '0' && b[264] == '0') {  // POSIX ustar: a name prefix
    // (GNU's "ustar  " magic marks a header whose prefix bytes hold other fields)
    const std::string prefix = field(b + 345, 155);
    if (!prefix.empty()) h.name = prefix + "/" + h.name;
  }
  if (h.size < 0) fail(h.at, h.name, "has a size field that does not parse; the shard is corrupt");
  return true;
}

// A pax ('x', 'g') or GNU long-name ('L', 'K') header's data, which follows it.
std::string TarReader::read_extended(const Header& h) {
  if (h.size > kMaxExtendedHeaderBytes)
    fail(h.at, "",
         str_cat("is an extended header of ", h.size, " bytes, over the ", kMaxExtendedHeaderBytes,
                 " bytes a name needs; the shard is corrupt"));
  if (size_ - pos_ < padded(h.size))
    fail(h.at, "", "is an extended header whose data is cut short; the shard is truncated");
  std::string s(size_t(h.size), '\0');
  read_bytes(s.data(), h.size, "extended header", h.at);
  skip_bytes(padded(h.size) - h.size);
  return s;
}

namespace {
// Applies pax records "<len> <key>=<value>\n" to *path and *size; false when one does not parse.
bool apply_pax(const std::string& d, std::string* path, int64_t* size) {
  size_t i = 0;
  while (i < d.size()) {
    size_t sp = i;
    while (sp < d.size() && sp - i < 10 && d[sp] >= '0' && d[sp] <= '9') sp++;
    if (sp == i || sp >= d.size() || d[sp] != ' ') return false;
    const size_t len = size_t(parse_decimal(d.substr(i, sp - i)));
    if (len <= sp - i + 1 || len > d.size() - i || d[i + len - 1] != '\n') return false;
    const std::string rec = d.substr(sp + 1, i + len - 1 - (sp + 1));  // key=value
    const size_t eq = rec.find('=');
    if (eq == 0 || eq == std::string::npos) return false;
    const std::string key = rec.substr(0, eq), value = rec.substr(eq + 1);
    if (key == "path") *path = value;
    if (key == "size" && (*size = parse_decimal(value)) < 0) return false;
    i += len;
  }
  return true;
}
}  // namespace

bool TarReader::next(TarMember& m, std::vector<uint8_t>& data) {
  if (ended_) return false;
  std::string name;  // from a pax or long-name header, for the next member
  int64_t size = -1;
  m.offset = pos_;
  Header h;
  while (read_header(h)) {
    if (h.type == 'x' || h.type == 'L') {
      const std::string d = read_extended(h);
      if (h.type == 'L') {
        name = field(reinterpret_cast<const uint8_t*>(d.data()), d.size());
      } else if (!apply_pax(d, &name, &size)) {
        fail(h.at, "", "is a pax header whose records do not parse (each must be \"<length> <key>=<value>\\n\")");
      }
      if (name.size() > kMaxNameBytes)
        fail(h.at, "", str_cat("gives a member name of ", name.size(), " bytes, over the limit of ", kMaxNameBytes));
      continue;
    }
    if (h.type == 'g' || h.type == 'K') {  // global pax settings, GNU long link names: nothing we use
      read_extended(h);
      continue;
    }
    if (!name.empty()) h.name = name;
    if (size >= 0) h.size = size;
    if (h.size > kMaxMemberBytes)
      fail(h.at, h.name,
           str_cat("is ", h.size, " bytes, over the ", kMaxMemberBytes >> 20,
                   " MiB a member of an image shard may have; the shard is corrupt or not an image "
                   "dataset"));
    if (size_ - pos_ < padded(h.size))
      fail(h.at, h.name,
           str_cat("is cut short: its ", h.size, " bytes of data (padded to ", padded(h.size), ") need more than the ",
                   size_ - pos_, " bytes left in the archive; the shard is truncated: download or write it again"));
    if (h.type == '0' || h.type == '\0' || h.type == '7') {  // '7': contiguous file, read as a regular one
      m.name = h.name;
      m.size = h.size;
      data.resize(size_t(h.size));
      read_bytes(data.data(), h.size, "member data", h.at);
      skip_bytes(padded(h.size) - h.size);
      return true;
    }
    skip_bytes(padded(h.size));  // folders, links, devices: skipped with their overrides
    name.clear();
    size = -1;
    m.offset = pos_;
  }
  if (m.offset != h.at)
    fail(m.offset, "",
         "is an extended header at the end of the archive, with no member after it; the shard is truncated");
  ended_ = true;
  pos_ = h.at;  // offset() stays at the end marker: a reader restarted there ends too, reading nothing after it
  return false;
}
