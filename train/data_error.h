// A bad shard found when the loader reaches it, part way through a run (the loaders check only each
// shard's ends at start): a trainer saves the run's progress before it stops on one.
#pragma once
#include <string>

#include "common/error.h"

struct DataError : UserError {
  using UserError::UserError;
};

// Runs a read of the data loaders, turning their errors into DataError.
template <class F>
auto read_data(F fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const UserError& e) {
    throw DataError(e.what());
  }
}

// The message for a data error once the state at the start of the failed step is saved at `path`.
inline std::string data_error_saved(const std::string& error, int64_t step, const std::string& path) {
  const std::string what = !error.empty() && error.back() == '.' ? error.substr(0, error.size() - 1) : error;
  return str_cat(what, "; the ", step, " steps done are saved in ", path, ": fix the data and resume with --resume ",
                 path, ".");
}
