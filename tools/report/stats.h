// Statistics over repeated measurements: the median of a benchmark's timed steps, the mean and sample
// standard deviation over seeds (the error bars of the report's figures).
#pragma once
#include <vector>

namespace report {

// Median (the mean of the middle two for an even count, as Python's statistics.median); NaN when empty.
double median(std::vector<double> v);
double mean(const std::vector<double>& v);
// Sample standard deviation (n - 1 in the denominator, as statistics.stdev); 0 for one value, NaN for none.
double stddev(const std::vector<double>& v);
double min_of(const std::vector<double>& v);  // NaN when empty
double max_of(const std::vector<double>& v);

struct Spread {
  int n = 0;
  double mean = 0, std = 0, min = 0, max = 0, median = 0;
};
Spread spread(const std::vector<double>& v);

}  // namespace report
