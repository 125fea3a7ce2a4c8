#include "optim/lopt/safetensors.h"

#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/json.h"
#include "optim/param_table.h"

TensorMap read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) user_error("cannot open weight file '", path, "'.");
  const uint64_t size = uint64_t(f.tellg());
  f.seekg(0);
  uint64_t hlen = 0;
  if (size < 8 || !f.read(reinterpret_cast<char*>(&hlen), 8)) user_error("'", path, "' is too short to be a safetensors file.");
  if (hlen > size - 8 || hlen > (uint64_t(100) << 20))
    user_error("'", path, "' is not a safetensors file or is truncated (header length ", hlen, " for a ", size, "-byte file).");
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
    uint64_t n = 1;
    for (const auto& d : t.at("shape").arr) {
      if (d.type != Json::Number || d.num < 0) user_error("'", path, "': tensor '", name, "' has a bad shape.");
      x.shape.push_back(int64_t(d.num));
      n *= uint64_t(d.num);
    }
    const auto& off = t.at("data_offsets").arr;
    if (off.size() != 2 || off[0].num < 0 || off[1].num < off[0].num)
      user_error("'", path, "': tensor '", name, "' has bad data offsets.");
    uint64_t b = uint64_t(off[0].num), e = uint64_t(off[1].num);
    if (e > data_size) user_error("'", path, "' is truncated: tensor '", name, "' ends at byte ", e, " of a ", data_size, "-byte data section.");
    if (e - b != n * 4) user_error("'", path, "': tensor '", name, "' has ", e - b, " bytes for ", n, " float32 values.");
    x.data.resize(size_t(n));
    if (n) std::memcpy(x.data.data(), data.data() + b, size_t(n * 4));
    out[name] = std::move(x);
  }
  return out;
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
