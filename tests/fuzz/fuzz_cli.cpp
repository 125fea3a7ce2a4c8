// Fuzz target: the command-line parser (common/cli.cpp). The input is an argument vector, arguments
// separated by NUL bytes, parsed against a table with one flag of every kind (string, int, int64, double,
// float, bool, repeatable; short and long-only). Values that parse must be finite numbers. --help prints
// the help (stdout; `make fuzz` runs with -close_fd_mask=1). Seeds: typical train_gpt2/tokenize vectors.
#include <cmath>

#include "common/cli.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"fuzz_cli"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 256; i++)
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += char(data[i]);
    }
  if (!cur.empty()) args.push_back(cur);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);

  std::string model = "d12", log;
  int batch = 4;
  int64_t steps = 10;
  double lr = 6e-4;
  float scale = 1.0f;
  bool graph = false;
  std::vector<std::string> sets;
  Cli cli("fuzz_cli", "Fuzzes the flag parser.");
  cli.add('e', "model", &model, "model");
  cli.add(0, "log", &log, "log file");
  cli.add('b', "batch", &batch, "micro-batch size");
  cli.add('x', "steps", &steps, "optimizer steps");
  cli.add('l', "lr", &lr, "learning rate");
  cli.add('f', "scale", &scale, "a float flag");
  cli.add(0, "cuda-graph", &graph, "a switch");
  cli.add(0, "set", &sets, "key=value (repeatable)");
  try {
    cli.parse(int(argv.size()), argv.data());
    FUZZ_EXPECT(std::isfinite(lr) && std::isfinite(scale));
  } catch (const UserError&) {
  }
  return 0;
}
