// Small tables and step loops for the CELO2 / ELO reference tests.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "optim/ref/ref_celo2.h"
#include "tests/test_util.h"

struct TensorCase {
  std::vector<int64_t> shape;
  Role role = Role::Hidden;
};

inline ParamTable table_of(const std::vector<TensorCase>& cases) {
  ParamTable t;
  for (size_t i = 0; i < cases.size(); i++) t.add(tensor_spec("t" + std::to_string(i), cases[i].shape, cases[i].role));
  return t;
}

// Per-tensor values -> the table's flat layout (padding zero).
inline std::vector<float> to_flat(const ParamTable& t, const std::vector<std::vector<float>>& per_tensor) {
  std::vector<float> flat(size_t(t.total_elems()), 0.0f);
  for (const auto& ti : t.tensors())
    std::copy(per_tensor[size_t(ti.index)].begin(), per_tensor[size_t(ti.index)].end(), flat.begin() + ti.offset);
  return flat;
}
inline std::vector<float> tensor_of(const ParamTable& t, const std::vector<float>& flat, int i) {
  return std::vector<float>(flat.begin() + t[i].offset, flat.begin() + t[i].offset + t[i].numel);
}

// One tensor, `steps` updates with grads(step) (the tensor's values); returns p after each step.
inline std::vector<std::vector<float>> run_one(RefOptimizer& o, const ParamTable& t, std::vector<float> p0,
                                               const std::function<std::vector<float>(int)>& grads, int steps) {
  std::vector<float> p = to_flat(t, {p0});
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; s++) {
    o.step(p, to_flat(t, {grads(s)}));
    out.push_back(tensor_of(t, p, 0));
  }
  return out;
}

inline void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol,
                            const std::string& what) {
  ASSERT_GE(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); i++) EXPECT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
}
