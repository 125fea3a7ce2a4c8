#include "optim/arena.h"

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
  std::vector<TensorDesc> d;
  for (const auto& t : table_.tensors())
    d.push_back({t.offset, t.numel, t.rows(), t.cols(), t.batch(), t.decay ? kDecay : 0, t.ndim()});
  desc_.alloc(d.size(), "tensor descriptors");
  desc_.upload(d);
}

void Arena::set_param(int i, const float* host) {
  params_.upload(host, size_t(table_[i].numel), size_t(table_[i].offset));
}
void Arena::set_grad(int i, const float* host) { grads_.upload(host, size_t(table_[i].numel), size_t(table_[i].offset)); }
std::vector<float> Arena::get_param(int i) const { return params_.download(size_t(table_[i].numel), size_t(table_[i].offset)); }
std::vector<float> Arena::get_grad(int i) const { return grads_.download(size_t(table_[i].numel), size_t(table_[i].offset)); }
