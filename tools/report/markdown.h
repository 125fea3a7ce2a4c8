// Markdown tables and the number formats of the report: fixed decimals, thousands separators, mean ± std.
#pragma once
#include <string>
#include <vector>

namespace report {

struct MdTable {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  std::vector<char> align;  // per column: 'l' (default, "---"), 'r' ("---:") or 'c' (":---:")
  // The table as markdown lines, each ending in '\n'. A cell's '|' is escaped and a newline becomes a
  // space, so a cell can never break the table; rows shorter than the head are padded with empty cells.
  std::string render() const;
};

extern const char* const kNone;  // "–": no value

// "%.<digits>f"; kNone for a non-finite value.
std::string fixed(double v, int digits);
// Rounded to a whole number with thousands separators: 545599.7 -> "545,600"; kNone when not finite.
std::string thousands(double v);
// `sig` significant digits, without an exponent for values between 1e-4 and 1e9 (0.000123, 12.3, 1,230);
// kNone when not finite.
std::string significant(double v, int sig);
// The mean ± sample std of `values` with `digits` decimals; the value alone for one; "" for none.
std::string mean_std(const std::vector<double>& values, int digits);
// a / b as "1.23×" (or kNone when either is missing or b is 0).
std::string ratio(double a, double b, int digits = 2);

}  // namespace report
