#include "optim/lopt/safetensors.h"

#include <algorithm>
#include <fstream>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/json.h"
#include "core/param_table.h"

namespace {
// A JSON number that is a non-negative integer below 2^63 (it fits a shape's int64); false for anything
// else (fractions, negatives, NaN, 1e28), so no out-of-range float->integer conversion ever happens.
bool json_to_u64(const Json& v, uint64_t* out) {
  if (v.type != Json::Number || !(v.num >= 0 && v.num < 9223372036854775808.0) || v.num != double(uint64_t(v.num)))
    return false;
  *out = uint64_t(v.num);
  return true;
}
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;
}  // namespace

namespace {
struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // in the data section
};

Entry header_entry(const std::string& path, const std::string& name, const Json& t, uint64_t data_size) {
  if (t.type != Json::Object || !t.has("dtype") || !t.has("shape") || !t.has("data_offsets"))
    user_error("'", path, "': tensor '", name, "' has a malformed header entry.");
  if (t.at("dtype").str != "F32")
    user_error("'", path, "': tensor '", name, "' has dtype ", t.at("dtype").str, " but float32 (F32) is required.");
  Entry x;
  x.name = name;
  if (t.at("shape").type != Json::Array) user_error("'", path, "': tensor '", name, "' has a bad shape (not a list).");
  for (const auto& d : t.at("shape").arr) {
    uint64_t v;
    if (!json_to_u64(d, &v))
      user_error("'", path, "': tensor '", name, "' has a bad shape (dimensions must be non-negative integers).");
    x.shape.push_back(int64_t(v));
  }
  const auto& off = t.at("data_offsets").arr;
  if (off.size() != 2 || !json_to_u64(off[0], &x.begin) || !json_to_u64(off[1], &x.end) || x.end < x.begin)
    user_error("'", path, "': tensor '", name, "' has bad data offsets (two non-negative integers, begin <= end).");
  if (x.end > data_size)
    user_error("'", path, "' is truncated: tensor '", name, "' ends at byte ", x.end, " of a ", data_size,
               "-byte data section.");
  float32_count(x.shape, x.end - x.begin, str_cat("'", path, "': tensor '", name, "'"));
  return x;
}

// The format's rule (safetensors' own reader applies it): the tensors, in offset order, tile the data section
// from its first byte to its last, with no overlap and no gap. Overlapping ranges would let a small file
// name its data many times over (each tensor is a copy: gigabytes from megabytes).
void check_tiling(const std::string& path, std::vector<Entry>* entries, uint64_t data_size) {
  std::stable_sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Entry& e : *entries) {
    if (e.begin != at)
      user_error("'", path, "': tensor '", e.name, "' starts at byte ", e.begin, " of the data section, but ",
                 e.begin < at ? "an earlier tensor's data ends at " : "the tensors before it end at ", at,
                 " (the tensors' data must follow one another without overlap or gap); the file is corrupt.");
    at = e.end;
  }
  if (at != data_size)
    user_error("'", path, "': the tensors' data ends at byte ", at, " of a ", data_size,
               "-byte data section (trailing bytes no tensor names); the file is corrupt.");
}
}  // namespace

// Memory: the header (at most 100 MB) and each tensor read into its own buffer; as the tensors tile the
// data section, they take at most the file's size.
TensorMap read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) user_error("cannot open weight file '", path, "'.");
  const uint64_t size = uint64_t(f.tellg());
  f.seekg(0);
  uint64_t hlen = 0;
  if (size < 8 || !f.read(reinterpret_cast<char*>(&hlen), 8))
    user_error("'", path, "' is too short to be a safetensors file.");
  if (hlen > size - 8 || hlen > kMaxHeaderBytes)
    user_error("'", path, "' is not a safetensors file or is truncated (header length ", hlen, " for a ", size,
               "-byte file; at most ", kMaxHeaderBytes, ").");
  std::string header(size_t(hlen), '\0');
  if (!f.read(&header[0], std::streamsize(hlen))) user_error("'", path, "' could not be read.");
  Json j = parse_json(header, "the header of '" + path + "'");
  if (j.type != Json::Object) user_error("the header of '", path, "' is not a JSON object.");
  const uint64_t data_start = 8 + hlen, data_size = size - data_start;
  std::vector<Entry> entries;
  for (const auto& [name, t] : j.obj)
    if (name != "__metadata__") entries.push_back(header_entry(path, name, t, data_size));
  check_tiling(path, &entries, data_size);
  TensorMap out;
  for (const Entry& e : entries) {
    F32Tensor x;
    x.shape = e.shape;
    x.data.resize(size_t((e.end - e.begin) / 4));
    f.seekg(std::streamoff(data_start + e.begin));
    if (!x.data.empty() && !f.read(reinterpret_cast<char*>(x.data.data()), std::streamsize(e.end - e.begin)))
      user_error("'", path, "' could not be read (tensor '", e.name, "').");
    out[e.name] = std::move(x);
  }
  return out;
}

uint64_t float32_count(const std::vector<int64_t>& shape, uint64_t nbytes, const std::string& what) {
  // 4 * prod(shape) with overflow detection: (2^31, 2^31) must not wrap around to a small byte count.
  uint64_t bytes = 4;
  bool overflow = false;
  if (std::count(shape.begin(), shape.end(), 0))
    bytes = 0;
  else
    for (int64_t d : shape) {
      CHECK(d > 0);
      if (bytes > UINT64_MAX / uint64_t(d))
        overflow = true;
      else
        bytes *= uint64_t(d);
    }
  if (overflow || bytes != nbytes)
    user_error(what, " has ", nbytes, " bytes of data but shape ", shape_str(shape), " needs ",
               overflow ? std::string("2^64 or more") : std::to_string(bytes), " bytes; the file is corrupt.");
  return bytes / 4;
}

void write_safetensors(const std::string& path, const TensorMap& tensors) {
  std::string header = "{";
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    std::string shape;
    for (size_t i = 0; i < t.shape.size(); i++) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    uint64_t bytes = t.data.size() * 4;
    header += (off || header.size() > 1 ? "," : "") + str_cat("\"", name, "\":{\"dtype\":\"F32\",\"shape\":[", shape,
                                                              "],\"data_offsets\":[", off, ",", off + bytes, "]}");
    off += bytes;
  }
  header += "}";
  while ((8 + header.size()) % 8) header += ' ';
  AtomicFile f(path);
  const uint64_t hlen = header.size();
  f.write(&hlen, 8);
  f.write(header.data(), header.size());
  for (const auto& kv : tensors) f.write(kv.second.data.data(), kv.second.data.size() * 4);
  f.commit();
}

const F32Tensor& require_tensor(const TensorMap& m, const std::string& name, const std::vector<int64_t>& shape,
                                const std::string& file) {
  auto it = m.find(name);
  if (it == m.end()) user_error("'", file, "' has no tensor '", name, "'; it is not the expected weight file.");
  if (it->second.shape != shape)
    user_error("'", file, "': tensor '", name, "' has shape ", shape_str(it->second.shape), " but ", shape_str(shape),
               " is expected.");
  return it->second;
}
