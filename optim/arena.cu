#include "optim/arena.h"

namespace {
__global__ void to_bf16_kernel(const float* __restrict__ src, __nv_bfloat16* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}
}  // namespace

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

void Arena::refresh_bf16(cudaStream_t s) {
  if (!bf16_.get()) return;
  to_bf16_kernel<<<1024, 256, 0, s>>>(params_.get(), bf16_.get(), total());
  CUDA_CHECK_LAUNCH();
}

void Arena::set_param(int i, const float* host) {
  params_.upload(host, size_t(table_[i].numel), size_t(table_[i].offset));
}
void Arena::set_grad(int i, const float* host) { grads_.upload(host, size_t(table_[i].numel), size_t(table_[i].offset)); }
std::vector<float> Arena::get_param(int i) const { return params_.download(size_t(table_[i].numel), size_t(table_[i].offset)); }
std::vector<float> Arena::get_grad(int i) const { return grads_.download(size_t(table_[i].numel), size_t(table_[i].offset)); }
