// The data pipeline's generator: splitmix64's published output, the derived per-sample streams, and the
// moments of the uniform, normal, gamma and beta draws (Mixup's lambda).
#include <cmath>
#include <set>

#include "data/rng.h"
#include "tests/test_util.h"

namespace {
struct Moments {
  double mean = 0, var = 0;
};
template <class F>
Moments moments(int n, F draw) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; i++) {
    const double v = draw();
    s += v;
    s2 += v * v;
  }
  return {s / n, s2 / n - (s / n) * (s / n)};
}
}  // namespace

TEST(Rng, Splitmix64ReferenceOutput) {
  // The reference implementation's output for seed 1234567 (and the first word for seed 0).
  Rng r(1234567);
  for (uint64_t want : {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull, 4593380528125082431ull,
                        16408922859458223821ull})
    EXPECT_EQ(r.next(), want);
  EXPECT_EQ(Rng(0).next(), 0xe220a8397b1dcdafull);
}

TEST(Rng, UniformIs24BitAndBelowIsInRangeAndFlat) {
  Rng r(7);
  for (int i = 0; i < 1000; i++) {
    const float u = r.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(std::ldexp(double(u), 24), std::floor(std::ldexp(double(u), 24)));  // k / 2^24
  }
  Rng first(1234567);
  EXPECT_EQ(first.uniform(), float(6457827717110365317ull >> 40) / 16777216.0f);  // the top 24 bits
  int counts[7] = {0};
  for (int i = 0; i < 70000; i++) counts[r.below(7)]++;
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);  // ~4 standard deviations
  for (int i = 0; i < 100; i++) EXPECT_EQ(r.below(1), 0u);
}

TEST(Rng, DerivedStreamsAreReproducibleAndDistinct) {
  auto first = [](uint64_t seed, RngStream s, uint64_t epoch, uint64_t index) {
    return Rng::derive(seed, s, epoch, index).next();
  };
  EXPECT_EQ(first(5, RngStream::kAugment, 2, 17), first(5, RngStream::kAugment, 2, 17));
  std::set<uint64_t> seen;
  for (uint64_t seed : {0, 1})
    for (RngStream s : {RngStream::kAugment, RngStream::kMixup})
      for (uint64_t epoch : {0, 1, 2})
        for (uint64_t index = 0; index < 50; index++) seen.insert(first(seed, s, epoch, index));
  EXPECT_EQ(seen.size(), 2u * 2u * 3u * 50u);
  // Swapping epoch and index gives another stream (the key is ordered).
  EXPECT_NE(first(5, RngStream::kAugment, 2, 3), first(5, RngStream::kAugment, 3, 2));
}

TEST(Rng, NormalGammaBetaMoments) {
  Rng r(11);
  const Moments z = moments(200000, [&] { return r.normal(); });
  EXPECT_NEAR(z.mean, 0.0, 0.01);
  EXPECT_NEAR(z.var, 1.0, 0.015);
  for (double shape : {0.5, 0.8, 1.0, 3.0}) {  // Gamma(k, 1): mean k, variance k
    const Moments g = moments(200000, [&] { return r.gamma(shape); });
    EXPECT_NEAR(g.mean, shape, 0.015 * shape + 0.005) << shape;
    EXPECT_NEAR(g.var, shape, 0.04 * shape) << shape;
  }
  for (double a : {0.8, 1.0}) {  // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1))
    const Moments b = moments(200000, [&] { return r.beta(a, a); });
    EXPECT_NEAR(b.mean, 0.5, 0.003) << a;
    EXPECT_NEAR(b.var, 1.0 / (4.0 * (2.0 * a + 1.0)), 0.002) << a;
  }
  const Moments b = moments(200000, [&] { return r.beta(2.0, 6.0); });  // mean a / (a + b)
  EXPECT_NEAR(b.mean, 0.25, 0.002);
}
