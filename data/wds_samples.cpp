#include "data/wds_samples.h"

#include "common/error.h"

namespace {
std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

bool is_image_ext(const std::string& ext) { return ext == "jpg" || ext == "jpeg" || ext == "png"; }

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// A class index in ASCII decimal with optional whitespace around it; -1 when it is not one (or > 10^9).
int64_t parse_label(const std::vector<uint8_t>& d) {
  size_t i = 0, end = d.size();
  while (i < end && is_space(d[i])) i++;
  while (end > i && is_space(d[end - 1])) end--;
  if (i == end || end - i > 9) return -1;
  int64_t v = 0;
  for (; i < end; i++) {
    if (d[i] < '0' || d[i] > '9') return -1;
    v = v * 10 + (d[i] - '0');
  }
  return v;
}

// The start of a label member for a message: printable ASCII, at most 20 characters.
std::string quote_label(const std::vector<uint8_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size() && s.size() < 20; i++) s += d[i] >= 32 && d[i] < 127 ? char(d[i]) : '?';
  return d.size() > 20 ? s + "..." : s;
}
}  // namespace

void split_wds_name(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.find_last_of('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base);
  *key = name.substr(0, dot);
  *ext = dot == std::string::npos ? "" : name.substr(dot + 1);
}

WdsSampleReader::WdsSampleReader(std::unique_ptr<TarReader> tar, int num_classes)
    : tar_(std::move(tar)), num_classes_(num_classes) {
  CHECK(tar_ && num_classes_ >= 1);
}

WdsSampleReader::WdsSampleReader(const std::string& path, int num_classes, int64_t offset, size_t buffer_bytes)
    : WdsSampleReader(std::make_unique<TarReader>(path, offset, buffer_bytes), num_classes) {}

void WdsSampleReader::seek(int64_t offset) {
  tar_->seek(offset);
  has_pending_ = false;
}

void WdsSampleReader::fail(const std::string& key, const std::string& why) const {
  user_error("shard '", tar_->path(), "': sample '", key, "' ", why, ".");
}

bool WdsSampleReader::next(WdsSample& s) {
  if (!has_pending_ && !(has_pending_ = tar_->next(pending_, pending_data_))) return false;
  std::string key, ext;
  split_wds_name(pending_.name, &key, &ext);
  s.shard = tar_->path();
  s.key = key;
  s.offset = pending_.offset;
  s.label = -1;
  bool has_image = false, has_label = false;
  do {
    if (key.empty() || key.back() == '/')
      user_error("shard '", tar_->path(), "': member '", pending_.name, "' (header at byte ", pending_.offset,
                 ") has no key before its extension; every member name must be <key>.<extension>.");
    add_member(s, lower(ext), &has_image, &has_label);
    if (!(has_pending_ = tar_->next(pending_, pending_data_))) break;
    split_wds_name(pending_.name, &key, &ext);
  } while (key == s.key);
  if (!has_image) fail(s.key, "has no image member (.jpg, .jpeg or .png); every sample needs one");
  if (!has_label) fail(s.key, "has no .cls member (its class index); every sample needs one");
  return true;
}

void WdsSampleReader::add_member(WdsSample& s, const std::string& ext, bool* has_image, bool* has_label) {
  if (is_image_ext(ext)) {
    if (*has_image) fail(s.key, str_cat("has two images (.", s.image_ext, " and .", ext, "); a sample holds one"));
    *has_image = true;
    s.image_ext = ext;
    s.image.swap(pending_data_);  // the old image buffer is reused for the next member
  } else if (ext == "cls") {
    if (*has_label) fail(s.key, "has two .cls members; a sample holds one class index");
    *has_label = true;
    const int64_t v = parse_label(pending_data_);
    if (v < 0)
      fail(s.key, str_cat("has a .cls member '", quote_label(pending_data_),
                          "' that is not a class index (a decimal number, whitespace around it allowed)"));
    if (v >= num_classes_)
      fail(s.key, str_cat("has class ", v, " but the dataset has ", num_classes_, " classes (0 to ", num_classes_ - 1,
                          "); check the number of classes given for this dataset"));
    s.label = int(v);
  }
}
