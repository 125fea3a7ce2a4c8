// Where a data-parallel step's time goes, for performance work: with STEP_TRACE=1 in the environment
// (eager steps; a CUDA graph cannot hold these timing events), StepRunner records events on the compute
// stream when each hook group's gradients are final and when backward ends, and on the communication
// stream when each group's sum is done and when the step's communication ends. After each step one JSON
// line goes to stderr, in milliseconds from the step's start:
//   {"trace":STEP,"rank":R,"ready":[...],"summed":[...],"backward_end":X,"comm_end":Y,"opt_begin":A,
//    "opt_end":B,"step_end":Z}
// ready[k] and summed[k] are the k-th hook call's (blocks L-1 ... 0, then the rest). comm_end - backward_end
// is the communication that backward did not hide; opt_begin to opt_end the clip and the optimizer's step
// (whole-model steps; -1 when stepped in groups), opt_end to step_end the sharded mode's all-gather.
#pragma once
#include <cuda_runtime.h>

#include <vector>

class StepTrace {
 public:
  StepTrace(int groups, int rank);  // off unless STEP_TRACE=1
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  bool on() const { return on_; }
  void start(cudaStream_t s);
  void ready(cudaStream_t compute);  // the next hook call's gradients are final
  void summed(cudaStream_t comm);    // and summed
  void backward_end(cudaStream_t compute);
  void comm_end(cudaStream_t comm);
  void optimizer_begin(cudaStream_t compute);
  void optimizer_end(cudaStream_t compute);
  void print(cudaStream_t s);  // waits for the step; call once it is enqueued

 private:
  cudaEvent_t make();
  bool on_ = false;
  int rank_, steps_ = 0;
  size_t ready_n_ = 0, summed_n_ = 0;
  std::vector<cudaEvent_t> ready_, summed_;
  bool opt_ = false;  // this step recorded the optimizer's events
  cudaEvent_t start_ = nullptr, bwd_ = nullptr, comm_ = nullptr, opt0_ = nullptr, opt1_ = nullptr, end_ = nullptr;
};
