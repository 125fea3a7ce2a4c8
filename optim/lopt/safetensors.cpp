#include "optim/lopt/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

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
}  // namespace

TensorMap read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) user_error("cannot open weight file '", path, "'.");
  const uint64_t size = uint64_t(f.tellg());
  f.seekg(0);
  uint64_t hlen = 0;
  if (size < 8 || !f.read(reinterpret_cast<char*>(&hlen), 8))
    user_error("'", path, "' is too short to be a safetensors file.");
  if (hlen > size - 8 || hlen > (uint64_t(100) << 20))
    user_error("'", path, "' is not a safetensors file or is truncated (header length ", hlen, " for a ", size,
               "-byte file).");
  std::string header(size_t(hlen), '\0');
  f.read(&header[0], std::streamsize(hlen));
  Json j = parse_json(header, "the header of '" + path + "'");
  if (j.type != Json::Object) user_error("the header of '", path, "' is not a JSON object.");
  const uint64_t data_size = size - 8 - hlen;
  std::vector<char> data(static_cast<size_t>(data_size));
  if (!f.read(data.data(), std::streamsize(data_size))) user_error("'", path, "' could not be read.");
  TensorMap out;
  for (const auto& [name, t] : j.obj) {
    if (name == "__metadata__") continue;
    if (t.type != Json::Object || !t.has("dtype") || !t.has("shape") || !t.has("data_offsets"))
      user_error("'", path, "': tensor '", name, "' has a malformed header entry.");
    if (t.at("dtype").str != "F32")
      user_error("'", path, "': tensor '", name, "' has dtype ", t.at("dtype").str, " but float32 (F32) is required.");
    F32Tensor x;
    if (t.at("shape").type != Json::Array)
      user_error("'", path, "': tensor '", name, "' has a bad shape (not a list).");
    for (const auto& d : t.at("shape").arr) {
      uint64_t v;
      if (!json_to_u64(d, &v))
        user_error("'", path, "': tensor '", name, "' has a bad shape (dimensions must be non-negative integers).");
      x.shape.push_back(int64_t(v));
    }
    const auto& off = t.at("data_offsets").arr;
    uint64_t b = 0, e = 0;
    if (off.size() != 2 || !json_to_u64(off[0], &b) || !json_to_u64(off[1], &e) || e < b)
      user_error("'", path, "': tensor '", name, "' has bad data offsets (two non-negative integers, begin <= end).");
    if (e > data_size)
      user_error("'", path, "' is truncated: tensor '", name, "' ends at byte ", e, " of a ", data_size,
                 "-byte data section.");
    const uint64_t n = float32_count(x.shape, e - b, str_cat("'", path, "': tensor '", name, "'"));
    x.data.resize(size_t(n));
    if (n) std::memcpy(x.data.data(), data.data() + b, size_t(n * 4));
    out[name] = std::move(x);
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
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) user_error("cannot write '", tmp, "'.");
  uint64_t hlen = header.size();
  bool ok = std::fwrite(&hlen, 8, 1, f) == 1 && std::fwrite(header.data(), 1, header.size(), f) == header.size();
  for (const auto& kv : tensors)
    ok = ok && std::fwrite(kv.second.data.data(), 4, kv.second.data.size(), f) == kv.second.data.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) user_error("writing '", path, "' failed.");
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
