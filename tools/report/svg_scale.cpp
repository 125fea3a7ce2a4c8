// Scales, axis ranges and ticks, colours and escaping for the SVG figures (svg.h); svg.cpp draws with them.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/report/markdown.h"
#include "tools/report/svg.h"

namespace report::svg {
namespace {

double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

}  // namespace

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

double Scale::operator()(double v) const {
  double t;
  if (log) {
    if (!(v > 0) || !(d0 > 0) || !(d1 > 0)) return kNaN;
    const double a = std::log10(d0), b = std::log10(d1);
    t = b == a ? 0.5 : (std::log10(v) - a) / (b - a);
  } else {
    t = d1 == d0 ? 0.5 : (v - d0) / (d1 - d0);
  }
  return p0 + t * (p1 - p0);
}

void auto_range(const Axis& axis, const std::vector<double>& vals, double* lo, double* hi) {
  std::vector<double> v;
  for (double x : vals)
    if (usable(x, axis.log)) v.push_back(x);
  if (axis.zero && !axis.log) v.push_back(0);
  const bool fixed_lo = usable(axis.lo, axis.log), fixed_hi = usable(axis.hi, axis.log);
  double a = v.empty() ? (axis.log ? 1 : 0) : *std::min_element(v.begin(), v.end());
  double b = v.empty() ? (axis.log ? 10 : 1) : *std::max_element(v.begin(), v.end());
  if (fixed_lo) a = axis.lo;
  if (fixed_hi) b = axis.hi;
  if (axis.log) {
    if (!fixed_lo) a = std::pow(10.0, std::floor(std::log10(a) + 1e-9));
    if (!fixed_hi) b = std::pow(10.0, std::ceil(std::log10(b) - 1e-9));
    if (!(b > a)) b = a * 10;
  } else {
    if (!(b > a)) {
      const double d = a == 0 ? 1 : 0.1 * std::fabs(a);
      if (!fixed_lo) a -= d;
      if (!fixed_hi || !(b > a)) b = a + 2 * d;
    }
    const double step = nice_step((b - a) / 5);
    if (!fixed_lo) a = std::floor(a / step + 1e-9) * step;
    if (!fixed_hi) b = std::ceil(b / step - 1e-9) * step;
  }
  *lo = a;
  *hi = b;
}

std::vector<double> ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (!(hi > lo)) return t;
  if (log) {
    if (!(lo > 0)) return t;
    const int k0 = int(std::floor(std::log10(lo) + 1e-9)), k1 = int(std::ceil(std::log10(hi) - 1e-9));
    const bool fine = k1 - k0 <= 2;
    for (int k = k0; k <= k1; k++)
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1 && !fine) continue;
        const double v = m * std::pow(10.0, k);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
      }
    if (t.size() < 2) {  // less than a decade between lo and hi: linear steps inside it
      t = ticks(lo, hi, false);
    }
    return t;
  }
  const double step = nice_step((hi - lo) / 5);
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step)
    t.push_back(std::fabs(v) < 1e-12 * step ? 0.0 : v);
  return t;
}

std::string tick_label(double v, double step, bool log) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (log) {
    char b[32];
    if (a >= 1e6) {
      std::snprintf(b, sizeof b, "%gM", v / 1e6);
      return b;
    }
    if (a >= 1e4) {
      std::snprintf(b, sizeof b, "%gk", v / 1e3);
      return b;
    }
    if (a >= 1e-4) {
      std::snprintf(b, sizeof b, "%g", v);
      return a >= 1000 ? thousands(v) : b;
    }
    std::snprintf(b, sizeof b, "%g", v);
    return b;
  }
  const int decimals = std::max(0, int(-std::floor(std::log10(std::fabs(step)) + 1e-9)));
  if (decimals == 0 && a >= 1000) return thousands(v);
  return fixed(v, decimals);
}

std::string palette(size_t i) {
  static const char* const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                       "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  return colors[i % 10];
}

std::string tint(const std::string& color, double t) {
  if (color.size() != 7 || color[0] != '#') return color;
  std::string o = "#";
  for (int c = 0; c < 3; c++) {
    const int v = std::stoi(color.substr(1 + 2 * c, 2), nullptr, 16);
    const int m = int(std::lround(v + (255 - v) * std::clamp(t, 0.0, 1.0)));
    char b[3];
    std::snprintf(b, sizeof b, "%02x", m);
    o += b;
  }
  return o;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

}  // namespace report::svg
