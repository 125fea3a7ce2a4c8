#include "core/arena.h"

Arena::Arena(ParamTable table, bool with_bf16_copy) : table_(std::move(table)) {
  if (table_.size() == 0) user_error("the parameter table is empty.");
  params_.alloc(size_t(total()), "parameters");
  grads_.alloc(size_t(total()), "gradients");
  params_.zero();  // padding between tensors stays zero forever
  grads_.zero();
  if (with_bf16_copy) {
    bf16_.alloc(size_t(total()), "bf16 parameter copy");
    bf16_.zero();
  }
  // One descriptor per tensor on the device: a whole-arena kernel finds a tensor's shape and decay from its
  // chunk's tensor index, without a launch per tensor.
  std::vector<TensorDesc> d;
  for (const auto& t : table_.tensors())
    d.push_back({t.offset, t.numel, t.rows(), t.cols(), t.batch(), t.decay ? kDecay : 0, t.ndim()});
  desc_.alloc(d.size(), "tensor descriptors");
  desc_.upload(d);
}

void Arena::set_param(int i, const float* host) {
  const size_t n = size_t(table_[i].numel), off = size_t(table_[i].offset);
  params_.upload(host, n, off);
  if (bf16_.get()) {  // keep the compute copy in step (round to nearest even, as the optimizers do)
    std::vector<__nv_bfloat16> b(n);
    for (size_t k = 0; k < n; k++) b[k] = __float2bfloat16_rn(host[k]);
    bf16_.upload(b.data(), n, off);
  }
}
void Arena::set_grad(int i, const float* host) {
  grads_.upload(host, size_t(table_[i].numel), size_t(table_[i].offset));
}
std::vector<float> Arena::get_param(int i) const {
  return params_.download(size_t(table_[i].numel), size_t(table_[i].offset));
}
std::vector<float> Arena::get_grad(int i) const {
  return grads_.download(size_t(table_[i].numel), size_t(table_[i].offset));
}
