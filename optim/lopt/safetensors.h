// safetensors files (Hugging Face): u64 header length, a JSON header naming each tensor's dtype, shape
// and byte range, then the raw little-endian data. Only F32 tensors are accepted (the published
// learned-optimizer weights are float32); anything else is refused with the file name and the reason.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using TensorMap = std::map<std::string, F32Tensor>;

TensorMap read_safetensors(const std::string& path);
// The number of float32 values in `shape` (dimensions >= 0) when they take exactly `nbytes` bytes; else a
// UserError "<what> has N bytes of data but shape (...) needs M bytes". Never overflows, so a hostile
// shape is refused before anything is allocated for it.
uint64_t float32_count(const std::vector<int64_t>& shape, uint64_t nbytes, const std::string& what);
// Writes tensors in name order (atomically: temporary file, then rename).
void write_safetensors(const std::string& path, const TensorMap& tensors);
// UserError unless `m` holds `name` with exactly `shape`; `file` names the source in the message.
const F32Tensor& require_tensor(const TensorMap& m, const std::string& name, const std::vector<int64_t>& shape,
                                const std::string& file);
