#include "tools/report/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace report {
namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
}

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return kNaN;
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double stddev(const std::vector<double>& v) {
  if (v.empty()) return kNaN;
  if (v.size() == 1) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

double min_of(const std::vector<double>& v) { return v.empty() ? kNaN : *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return v.empty() ? kNaN : *std::max_element(v.begin(), v.end()); }

Spread spread(const std::vector<double>& v) {
  Spread s;
  s.n = int(v.size());
  s.mean = mean(v);
  s.std = stddev(v);
  s.min = min_of(v);
  s.max = max_of(v);
  s.median = median(v);
  return s;
}

}  // namespace report
