// The last line of defence of the tools' main() (bench/, tests/tools/, tools/): whatever escapes becomes one
// line on stderr and an exit status, never an abort with a core dump.
//
//   try { ... } catch (...) { return report_tool_error("bench_image_loader"); }
//
// 1: bad input (UserError, its sentence as it is); 3: anything else (out of memory, a failed internal
// check). CUDA tools catch CudaError (exit 2) before this, as train/program.h's run_program does.
#pragma once
#include <cstdio>
#include <exception>
#include <new>

#include "common/error.h"

inline int report_tool_error(const char* program) {
  try {
    throw;
  } catch (const UserError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory; ask for less (a smaller batch, image size or count).\n", program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: internal error (an exception of unknown type).\n", program);
  }
  return 3;
}
