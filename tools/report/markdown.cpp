#include "tools/report/markdown.h"

#include <cmath>
#include <cstdio>

#include "tools/report/stats.h"

namespace report {

const char* const kNone = "–";

namespace {
std::string cell(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|') {
      o += "\\|";
    } else if (c == '\n' || c == '\r') {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o;
}
}  // namespace

std::string MdTable::render() const {
  auto line = [&](const std::vector<std::string>& cells) {
    std::string o = "|";
    for (size_t i = 0; i < head.size(); i++) o += " " + (i < cells.size() ? cell(cells[i]) : std::string()) + " |";
    return o + "\n";
  };
  std::string o = line(head) + "|";
  for (size_t i = 0; i < head.size(); i++) {
    const char a = i < align.size() ? align[i] : 'l';
    o += a == 'r' ? "---:|" : a == 'c' ? ":---:|" : "---|";
  }
  o += "\n";
  for (const auto& r : rows) o += line(r);
  return o;
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return kNone;
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  std::string s = b;
  if (s == "-0" || s.find_first_not_of("-0.") == std::string::npos) s = s[0] == '-' ? s.substr(1) : s;
  return s;
}

std::string thousands(double v) {
  if (!std::isfinite(v)) return kNone;
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n), o;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i && (digits.size() - i) % 3 == 0) o += ',';
    o += digits[i];
  }
  return (n < 0 ? "-" : "") + o;
}

std::string significant(double v, int sig) {
  if (!std::isfinite(v)) return kNone;
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a < 1e-4 || a >= 1e9) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", sig, v);
    return b;
  }
  const int mag = int(std::floor(std::log10(a)));
  const int decimals = std::max(0, sig - 1 - mag);
  if (decimals == 0 && a >= 1e4) return thousands(v);
  return fixed(v, decimals);
}

std::string mean_std(const std::vector<double>& values, int digits) {
  if (values.empty()) return "";
  if (values.size() == 1) return fixed(values[0], digits);
  return fixed(mean(values), digits) + " ± " + fixed(stddev(values), digits);
}

std::string ratio(double a, double b, int digits) {
  if (!std::isfinite(a) || !std::isfinite(b) || b == 0) return kNone;
  return fixed(a / b, digits) + "×";
}

}  // namespace report
