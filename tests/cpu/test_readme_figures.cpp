// The README's headline table against the results/ files it cites, so that its numbers cannot drift: a
// rerun that changes a result fails here until the README follows.
//
// Every figure in the table is a link to one line of a results file, with the JSON key as the link's
// title: [3.46 ms](results/h100_bench_optim.jsonl#L22 "median_ms"). A title ending in " x100" reads a
// fraction as a percentage. The figure must be the value rounded to the digits shown (3.4588 -> 3.46;
// 546214.4 -> 546,214; 2.18e-06 -> 2.2e-6); a line that is not JSON must contain the figure as written.
// Where the line names its GPU, the table's row must name it too. Run from the repository root (make test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"

namespace {
const char* kReadme = "README.md";
const char* kHeading = "## Results";  // the headline table is the first table under this heading

struct Figure {
  std::string text, file, key, row;  // the link's text, its target file and JSON key, the whole table row
  int line = 0;
};

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

// The headline table's rows (header and separator left out).
std::vector<std::string> headline_rows(const std::vector<std::string>& readme) {
  size_t i = 0;
  while (i < readme.size() && readme[i] != kHeading) i++;
  while (i < readme.size() && readme[i].rfind("|", 0) != 0) i++;
  std::vector<std::string> rows;
  for (i += 2; i < readme.size() && readme[i].rfind("|", 0) == 0; i++) rows.push_back(readme[i]);
  return rows;
}

std::vector<Figure> figures_of(const std::string& row) {
  static const std::regex link(R"(\[([^\]]+)\]\((results/[^)#" ]+)(?:#L(\d+))?(?: \"([^"]*)\")?\))");
  std::vector<Figure> out;
  for (std::sregex_iterator m(row.begin(), row.end(), link), end; m != end; ++m) {
    Figure f;
    f.text = (*m)[1];
    f.file = (*m)[2];
    f.line = (*m)[3].matched ? std::stoi((*m)[3]) : 0;
    f.key = (*m)[4];
    f.row = row;
    out.push_back(f);
  }
  return out;
}

// The figure's number and half a unit of its last digit: "546,214 tok/s" -> 546214 +- 0.5, "2.2e-6" ->
// 2.2e-6 +- 5e-8. False when the text does not start with a number.
bool shown_number(const std::string& text, double* value, double* half_ulp) {
  static const std::regex num(R"(^(\d[\d,]*)(?:\.(\d+))?(?:e(-?\d+))?)");
  std::smatch m;
  if (!std::regex_search(text, m, num)) return false;
  std::string digits = m[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  const std::string frac = m[2];
  const int exp = m[3].matched ? std::stoi(m[3]) : 0;
  *value = std::stod(digits + (frac.empty() ? "" : "." + frac)) * std::pow(10.0, exp);
  *half_ulp = 0.5 * std::pow(10.0, exp - int(frac.size()));
  return true;
}

// Empty when the figure agrees with its source, else what is wrong.
std::string check(const Figure& f) {
  const std::string where = "'" + f.text + "' (" + f.file + "#L" + std::to_string(f.line) + ")";
  if (f.line < 1) return where + ": the link names no line (#L<n>)";
  const std::vector<std::string> lines = lines_of(f.file);
  if (lines.empty()) return where + ": the file is missing or empty";
  if (size_t(f.line) > lines.size()) return where + ": the file has only " + std::to_string(lines.size()) + " lines";
  const std::string& line = lines[f.line - 1];
  if (line.empty() || line[0] != '{') {  // a text file: the figure as written
    return line.find(f.text) == std::string::npos ? where + ": the line does not contain it: " + line : "";
  }
  Json j;
  try {
    j = parse_json(line, f.file);
  } catch (const std::exception& e) {
    return where + ": " + e.what();
  }
  const bool percent = f.key.size() > 5 && f.key.compare(f.key.size() - 5, 5, " x100") == 0;
  const std::string key = percent ? f.key.substr(0, f.key.size() - 5) : f.key;
  if (key.empty()) return where + ": the link has no title naming the JSON key";
  if (!j.has(key) || j.at(key).type != Json::Number) return where + ": the line has no number '" + key + "'";
  const double got = j.at(key).num * (percent ? 100 : 1);
  double shown, half_ulp;
  if (!shown_number(f.text, &shown, &half_ulp)) return where + ": the link's text does not start with a number";
  if (std::fabs(got - shown) > half_ulp * (1 + 1e-9)) {
    std::ostringstream os;
    os << where << ": the file says " << key << " = " << j.at(key).num << ", which does not round to it";
    return os.str();
  }
  if (j.has("gpu") && j.at("gpu").type == Json::String) {
    std::string gpu = j.at("gpu").str;
    if (gpu.rfind("NVIDIA ", 0) == 0) gpu = gpu.substr(7);
    if (f.row.find(gpu) == std::string::npos) return where + ": the row does not name the GPU, " + gpu;
  }
  return "";
}
}  // namespace

TEST(ReadmeFigures, EveryHeadlineFigureMatchesItsResultsFile) {
  const std::vector<std::string> readme = lines_of(kReadme);
  ASSERT_FALSE(readme.empty()) << kReadme << " not found; run the suite from the repository root.";
  const std::vector<std::string> rows = headline_rows(readme);
  ASSERT_GE(rows.size(), 5u) << "no headline table under '" << kHeading << "' in " << kReadme;
  int n = 0;
  for (const auto& row : rows) {
    const std::vector<Figure> figs = figures_of(row);
    EXPECT_FALSE(figs.empty()) << "a headline row cites no results/ file: " << row;
    for (const auto& f : figs) {
      n++;
      const std::string why = check(f);
      if (!why.empty()) ADD_FAILURE() << why;
    }
  }
  EXPECT_GE(n, 20) << "the headline table's figures were not found (links like [3.46 ms](results/F#L22 \"key\"))";
}

TEST(ReadmeFigures, RoundingOfTheShownDigits) {
  double v, h;
  ASSERT_TRUE(shown_number("546,214 tok/s", &v, &h));
  EXPECT_EQ(v, 546214);
  EXPECT_EQ(h, 0.5);
  ASSERT_TRUE(shown_number("2.2e-6", &v, &h));
  EXPECT_NEAR(v, 2.2e-6, 1e-18);
  EXPECT_NEAR(h, 5e-8, 1e-20);
  ASSERT_TRUE(shown_number("91.42%", &v, &h));
  EXPECT_NEAR(h, 0.005, 1e-15);
  EXPECT_FALSE(shown_number("ms", &v, &h));
}
