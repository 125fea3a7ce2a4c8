// The data pipeline's random numbers: splitmix64 (Steele, Lea & Flood 2014), our own so that a seed gives
// the same augmentations with any compiler or standard library (std::uniform_*_distribution differ
// between libstdc++ and libc++). Integer draws are bit-identical everywhere; the float draws that go
// through log/exp/cos (normal, gamma, beta, log-uniform) also depend on the C math library.
//
// Each sample gets its own generator, derived by hashing (seed, stream, epoch, index), so a sample's
// crop and flip do not depend on which thread decodes it or in what order.
#pragma once
#include <cstdint>

#include "common/hash64.h"  // mix64

// Independent streams of draws for one (seed, epoch, index): one per use, so adding draws to one use
// never shifts another's.
enum class RngStream : uint64_t { kAugment = 1, kMixup = 2, kShuffle = 3, kSynthetic = 4 };

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // The generator of sample `index` (or batch `index`, for per-batch draws) of `epoch`.
  static Rng derive(uint64_t seed, RngStream stream, uint64_t epoch, uint64_t index) {
    uint64_t h = mix64(seed + kGolden);
    h = mix64(h ^ (uint64_t(stream) + kGolden));
    h = mix64(h ^ (epoch + kGolden));
    return Rng(mix64(h ^ (index + kGolden)));
  }

  uint64_t next() { return mix64(state_ += kGolden); }

  // Uniform in [0, 1) from the top 24 bits: every value is an exact float.
  float uniform() { return float(next() >> 40) * 0x1.0p-24f; }
  // Uniform in [0, 1) with 53 bits, for the draws that feed log() (normal, gamma).
  double uniform_double() { return double(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi): lo + (hi - lo) * u, as torch's uniform_(lo, hi) and Python's random.uniform.
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(uniform()); }

  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's multiply-and-reject).
  uint32_t below(uint32_t n) {
    uint64_t m = uint64_t(uint32_t(next() >> 32)) * n;
    if (uint32_t(m) < n) {
      const uint32_t threshold = uint32_t(-n) % n;
      while (uint32_t(m) < threshold) m = uint64_t(uint32_t(next() >> 32)) * n;
    }
    return uint32_t(m >> 32);
  }

  bool bernoulli(double p) { return double(uniform()) < p; }  // as torch.rand(1) < p

  double normal();                  // standard normal (Box-Muller, one value per call)
  double gamma(double shape);       // Gamma(shape, 1), shape > 0 (Marsaglia-Tsang)
  double beta(double a, double b);  // Beta(a, b) = X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b)

 private:
  static constexpr uint64_t kGolden = kGolden64;  // splitmix64's increment
  uint64_t state_;
};
