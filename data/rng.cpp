#include "data/rng.h"

#include <cmath>

double Rng::normal() {
  const double u1 = 1.0 - uniform_double();  // (0, 1]: log() stays finite
  const double u2 = uniform_double();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Marsaglia & Tsang (2000), "A simple method for generating gamma variables": for shape >= 1, with
// d = shape - 1/3 and c = 1/sqrt(9d), d*v with v = (1 + c*x)^3, x normal, is accepted by a squeeze
// test or the exact log test. Shapes below 1 use Gamma(a) = Gamma(a + 1) * U^(1/a).
double Rng::gamma(double shape) {
  if (shape < 1.0) {
    const double u = 1.0 - uniform_double();
    return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal(), t = 1.0 + c * x;
    if (t <= 0.0) continue;
    const double v = t * t * t, u = 1.0 - uniform_double();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double Rng::beta(double a, double b) {
  const double x = gamma(a), y = gamma(b);
  return x + y > 0.0 ? x / (x + y) : 0.5;  // both draws underflow to 0 only for tiny shapes
}
