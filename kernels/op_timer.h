// Per-operation GPU time, for finding where a step goes (no profiler needed): mark(name) after each
// operation records an event; collect() attributes the time since the previous mark to `name`.
// Enabled by the environment variable GPT2_PROFILE=1; otherwise every call is a no-op.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

class OpTimer {
 public:
  OpTimer();
  ~OpTimer();  // prints the table (to stderr) when enabled
  bool enabled() const { return enabled_; }
  void begin(cudaStream_t s) { used_ = 0, mark("", s); }  // a new forward: drop marks never collected
  void mark(const char* name, cudaStream_t s);
  void collect();  // synchronises; call at the end of a step

 private:
  bool enabled_ = false, warm_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<const char*> names_;
  size_t used_ = 0;
  std::map<std::string, double> ms_;
  int steps_ = 0;
};
