// The elementwise dropout kernels against the masks drawn on the host (kernels/dropout.h): fp32 and
// bf16, with and without the added stream, in place; the device counter selects the masks.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/bf16_host.h"
#include "common/cuda_check.h"
#include "kernels/dropout_kernels.h"
#include "models/gpt2_sites.h"
#include "tests/test_util.h"

namespace {
class DropoutGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

// out = add + keep * scale * x on the host, for site `site` of micro-batch `counter`.
std::vector<float> expected(const std::vector<float>& x, const std::vector<float>* add, int C, float p, uint64_t seed,
                            uint64_t counter, uint32_t site) {
  const uint32_t thr = dropout_threshold(p);
  const uint64_t key = dropout_site_key(seed, counter, site);
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    const bool keep = dropout_keep(dropout_row(key, uint32_t(i / size_t(C))), uint32_t(i % size_t(C)), thr);
    out[i] = (keep ? x[i] * dropout_scale(thr) : 0.0f) + (add ? (*add)[i] : 0.0f);
  }
  return out;
}
}  // namespace

TEST_F(DropoutGpu, MatchesHostMasks) {
  const int rows = 37, C = 132;
  const size_t n = size_t(rows) * C;
  std::mt19937 rng(4);
  std::normal_distribution<float> z;
  std::vector<float> x(n), add(n);
  for (size_t i = 0; i < n; i++) {
    x[i] = bf16_round(z(rng));
    add[i] = bf16_round(z(rng));
  }
  DropoutState state;
  state.set(0.25f, 77);
  state.set_counter(9);
  const DropoutArgs d = state.site(dropout_site_mlp_proj(3));

  DeviceBuffer<float> fx(n), fadd(n), fout(n);
  fx.upload(x);
  fadd.upload(add);
  dropout_forward(fout.get(), fx.get(), fadd.get(), rows, C, d, 0);
  const std::vector<float> want = expected(x, &add, C, 0.25f, 77, 9, dropout_site_mlp_proj(3));
  const std::vector<float> got = fout.download();
  size_t dropped = 0;
  for (size_t i = 0; i < n; i++) {
    ASSERT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << "fp32, element " << i;
    dropped += got[i] == add[i];
  }
  EXPECT_GT(dropped, n / 8);  // about a quarter dropped
  EXPECT_LT(dropped, n / 2);
  dropout_forward(fx.get(), fx.get(), nullptr, rows, C, d, 0);  // in place, no add
  const std::vector<float> want_plain = expected(x, nullptr, C, 0.25f, 77, 9, dropout_site_mlp_proj(3));
  const std::vector<float> got_plain = fx.download();
  for (size_t i = 0; i < n; i++)
    ASSERT_NEAR(got_plain[i], want_plain[i], 1e-6f * (1 + std::fabs(want_plain[i]))) << "in place";

  std::vector<__nv_bfloat16> xb(n), ab(n);
  for (size_t i = 0; i < n; i++) {
    xb[i] = __float2bfloat16_rn(x[i]);
    ab[i] = __float2bfloat16_rn(add[i]);
  }
  DeviceBuffer<__nv_bfloat16> bx(n), badd(n), bout(n);
  bx.upload(xb);
  badd.upload(ab);
  dropout_forward(bout.get(), bx.get(), badd.get(), rows, C, d, 0);
  const std::vector<__nv_bfloat16> gb = bout.download();
  for (size_t i = 0; i < n; i++)
    ASSERT_NEAR(__bfloat162float(gb[i]), want[i], 8e-3f * (1 + std::fabs(want[i]))) << "bf16, element " << i;

  state.advance(0);  // the next micro-batch: other masks
  EXPECT_EQ(state.counter(), 10u);
  dropout_forward(fout.get(), fadd.get(), nullptr, rows, C, state.site(dropout_site_mlp_proj(3)), 0);
  const std::vector<float> next = fout.download(),
                           want_next = expected(add, nullptr, C, 0.25f, 77, 10, dropout_site_mlp_proj(3));
  for (size_t i = 0; i < n; i++) ASSERT_NEAR(next[i], want_next[i], 1e-6f * (1 + std::fabs(want_next[i])));
  EXPECT_NE(std::memcmp(next.data(), expected(add, nullptr, C, 0.25f, 77, 9, dropout_site_mlp_proj(3)).data(), n * 4),
            0);

  EXPECT_THROW(state.set(1.0f, 1), UserError);
  state.set(0.0f, 1);
  EXPECT_FALSE(state.on());
  state.advance(0);  // off: the counter stays
  EXPECT_EQ(state.counter(), 10u);
}
