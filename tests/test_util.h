// Small helpers shared by the test suites.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/temp_dir.h"

// A fresh empty directory under the test temp dir, removed with its contents when the test program
// exits (the folders are owned by a static), so a run leaves nothing in /tmp (the VeLO weight tests
// write ~9 MB each). Tests keep using plain strings.
inline std::string make_temp_dir() {
  static std::vector<std::unique_ptr<TempDir>> dirs;
  dirs.push_back(std::make_unique<TempDir>("lopt_test_", testing::TempDir()));
  return dirs.back()->path();
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), std::streamsize(data.size()));
}
// The names in a folder, sorted (to check that no temporary file was left beside a written one).
inline std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// ||got - want|| / ||want|| over elements [off, off + n) of both (n = -1: to the end of want).
template <class A, class B>
double rel_error(const A& got, const B& want, size_t off = 0, size_t n = size_t(-1)) {
  if (n == size_t(-1)) n = want.size() - off;
  double num = 0, den = 0;
  for (size_t i = off; i < off + n; i++) {
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Expects `fn` to throw UserError whose message contains `needle`.
template <class F>
void expect_user_error(F fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected a UserError containing '" << needle << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message was: " << e.what();
  }
}

// Gradients with heterogeneous row and column scales (iid gradients hide factoring mistakes).
inline std::vector<float> hetero_grad(int64_t rows, int64_t cols, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> z(0.0f, 1.0f), lg(0.0f, 1.0f);
  std::vector<float> r(static_cast<size_t>(rows)), c(static_cast<size_t>(cols)), g(static_cast<size_t>(rows * cols));
  for (auto& x : r) x = std::exp(lg(rng));
  for (auto& x : c) x = std::exp(lg(rng));
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) g[size_t(i * cols + j)] = scale * z(rng) * r[size_t(i)] * c[size_t(j)];
  return g;
}
