#include "data/tar_writer.h"

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "data/tar_reader.h"

namespace {
// Writes v as `digits` octal digits and a NUL into p.
void put_octal(char* p, int digits, int64_t v) {
  for (int i = digits - 1; i >= 0; i--, v >>= 3) p[i] = char('0' + (v & 7));
  p[digits] = 0;
}

// Splits a long name at a '/' into a ustar prefix (<= 155 bytes) and name (<= 100 bytes); false if none fits.
bool split_ustar(const std::string& full, std::string* prefix, std::string* name) {
  for (size_t k = full.find('/'); k != std::string::npos && k <= 155; k = full.find('/', k + 1)) {
    const size_t rest = full.size() - k - 1;
    if (rest >= 1 && rest <= 100) {
      *prefix = full.substr(0, k);
      *name = full.substr(k + 1);
      return true;
    }
  }
  return false;
}

// A pax record "<len> path=<name>\n", where len counts the whole record, its own digits included.
std::string pax_path_record(const std::string& name) {
  const std::string body = " path=" + name + "\n";
  size_t len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len) len++;
  return std::to_string(len) + body;
}

}  // namespace

std::string tar_header(const std::string& name, int64_t size, char type, const std::string& prefix) {
  CHECK(name.size() <= 100 && prefix.size() <= 155 && size >= 0 && size < (int64_t(1) << 33));
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), name.size());
  put_octal(&h[100], 7, type == '5' ? 0755 : 0644);
  put_octal(&h[108], 7, 0);  // uid
  put_octal(&h[116], 7, 0);  // gid
  put_octal(&h[124], 11, size);
  put_octal(&h[136], 11, 0);  // mtime
  h[156] = type;
  std::memcpy(&h[257], "ustar", 6);
  std::memcpy(&h[263], "00", 2);
  put_octal(&h[329], 7, 0);  // device numbers
  put_octal(&h[337], 7, 0);
  std::memcpy(&h[345], prefix.data(), prefix.size());
  std::memset(&h[148], ' ', 8);
  int64_t sum = 0;
  for (char c : h) sum += uint8_t(c);
  put_octal(&h[148], 6, sum);  // six digits, NUL, space: as tar writes it
  h[155] = ' ';
  return h;
}

std::string tar_padding(int64_t n) { return std::string(size_t((512 - n % 512) % 512), '\0'); }

TarWriter::TarWriter(std::string path) : file_(std::move(path), size_t(1) << 20) {}

void TarWriter::add(const std::string& name, const void* data, size_t size) {
  CHECK(!file_.committed());
  if (name.empty() || name.size() > TarReader::kMaxNameBytes || name.find('\0') != std::string::npos)
    user_error("cannot add a member named '", name, "' to '", path(), "': a name must have 1 to ",
               TarReader::kMaxNameBytes, " bytes and no NUL.");
  if (int64_t(size) > TarReader::kMaxMemberBytes)
    user_error("cannot add '", name, "' (", size, " bytes) to '", path(), "': members are limited to ",
               TarReader::kMaxMemberBytes >> 20, " MiB.");
  std::string prefix, short_name = name;
  if (name.size() > 100 && !split_ustar(name, &prefix, &short_name)) {
    const std::string rec = pax_path_record(name);
    const size_t slash = name.find_last_of('/');
    const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
    raw(tar_header("PaxHeader/" + base.substr(0, 90), int64_t(rec.size()), 'x'));
    raw(rec + tar_padding(int64_t(rec.size())));
    prefix.clear();
    short_name = name.substr(name.size() - 100);  // what a reader without pax support sees
  }
  raw(tar_header(short_name, int64_t(size), '0', prefix));
  raw(data, size);
  raw(tar_padding(int64_t(size)));
}

void TarWriter::commit() {
  raw(std::string(1024, '\0'));  // the end: two zero blocks
  file_.commit();
}
