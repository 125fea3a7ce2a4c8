// Errors. Two kinds:
//  - UserError: bad input a user can fix (flag, file, hyperparameter). One sentence that says what is
//    wrong and what to do; programs print it and exit(1).
//  - check failures of CUDA/cuBLAS/NCCL calls: a bug or a broken machine, reported with file:line.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

struct UserError : std::runtime_error {
  explicit UserError(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... R>
void append(std::ostringstream& os, const T& v, const R&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// Concatenates its arguments with operator<<: str_cat("got ", 3, " tensors").
template <class... A>
std::string str_cat(const A&... a) {
  std::ostringstream os;
  detail::append(os, a...);
  return os.str();
}

template <class... A>
[[noreturn]] void user_error(const A&... a) {
  throw UserError(str_cat(a...));
}

// Internal invariant; a failure is a bug in this program, not bad input.
#define CHECK(cond)                                                                                  \
  do {                                                                                               \
    if (!(cond)) throw std::logic_error(str_cat(__FILE__, ":", __LINE__, ": check failed: " #cond)); \
  } while (0)
