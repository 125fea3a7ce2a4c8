// The parameter tables bench_optim times: the models of train/flags.h (GPT-2 sizes, tiny, vit-b16) and,
// for the PyLO paper's step-time figures, more shapes that no training program runs:
//
//   vit-ti16, vit-s16, vit-l16 (any patch size)   timm's ViTs at 224 px, 1000 classes (fused q/k/v)
//   mlp-w<W>-d<D>                                 a synthetic MLP: D linear layers of W x W, each with a
//                                                 bias (the paper's Figure 6: width and depth sweeps)
//   mat-<R>x<C>                                   one R x C matrix (the paper's Figure 9: 8192 x 8192)
//
// Header-only: bench_optim is its one user.
#pragma once
#include <cstdint>
#include <regex>
#include <string>

#include "common/error.h"
#include "core/param_table.h"
#include "models/model_tables.h"
#include "train/flags.h"

namespace bench {

// The table of `name`, or UserError naming every accepted form.
inline ParamTable bench_table(const std::string& name, unsigned accept) {
  std::smatch m;
  static const std::regex mlp(R"(^mlp-w([0-9]+)-d([0-9]+)$)"), mat(R"(^mat-([0-9]+)x([0-9]+)$)");
  auto dim = [&](const std::string& text, const char* what, int64_t hi) {
    return parse_integer(std::string(what) + " of -e '" + name + "'", text, 1, hi);
  };
  if (std::regex_match(name, m, mlp)) {
    const int64_t w = dim(m[1], "the width", 1 << 16), d = dim(m[2], "the depth", 1024);
    if (w * w * d > (int64_t(1) << 32))
      user_error("-e '", name, "' has more than 2^32 parameters; choose a smaller MLP.");
    ParamTable t;
    for (int64_t l = 0; l < d; l++) {
      t.add(tensor_spec("layers." + std::to_string(l) + ".weight", {w, w}, Role::Hidden));
      t.add(tensor_spec("layers." + std::to_string(l) + ".bias", {w}, Role::Bias, false));
    }
    return t;
  }
  if (std::regex_match(name, m, mat)) {
    const int64_t r = dim(m[1], "the rows", 1 << 17), c = dim(m[2], "the columns", 1 << 17);
    if (r * c > (int64_t(1) << 32))
      user_error("-e '", name, "' has more than 2^32 parameters; choose a smaller matrix.");
    ParamTable t;
    t.add(tensor_spec("matrix", {r, c}, Role::Hidden));
    return t;
  }
  if (name.rfind("vit-", 0) == 0 && name != "vit-b16") return vit_param_table(vit_shape(name));
  try {
    return model_by_name(name, accept).table();
  } catch (const UserError&) {
    user_error("unknown model '", name, "'; choose ", model_names(accept),
               ", vit-ti16, vit-s16, vit-l16 (any patch size), mlp-w<W>-d<D> (D layers of W x W and a bias) or "
               "mat-<R>x<C> (one matrix).");
  }
}

}  // namespace bench
