#include "tools/report/step_trace.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "tools/report/jsonl.h"
#include "tools/report/stats.h"

namespace report {
namespace {
std::vector<double> numbers(const Json& j, const std::string& key) {
  std::vector<double> v;
  if (j.has(key) && j.at(key).type == Json::Array)
    for (const Json& x : j.at(key).arr) v.push_back(x.num);
  return v;
}

// The text's trace lines, parsed; the programs' other output and lines cut off by another process's skipped.
std::vector<Json> trace_lines(const std::string& text) {
  std::vector<Json> v;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"trace\"", 0) != 0) continue;
    try {
      v.push_back(parse_json(line, "a trace line"));
    } catch (const UserError&) {
    }
  }
  return v;
}
}  // namespace

std::vector<int> trace_ranks(const std::string& text) {
  std::vector<int> ranks;
  for (const Json& j : trace_lines(text)) ranks.push_back(int(num(j, "rank", -1)));
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

TraceSummary summarise_trace(const std::string& text, int rank, int first_step) {
  std::vector<double> ready0, bwd, comm, end, gap, sum, tail, last, opt, gather;
  for (const Json& j : trace_lines(text)) {
    if (num(j, "rank", -1) != rank || num(j, "trace", -1) < first_step) continue;
    const std::vector<double> ready = numbers(j, "ready"), summed = numbers(j, "summed");
    if (ready.size() < 2 || summed.size() != ready.size()) continue;
    const size_t blocks = ready.size() - 1;  // the last hook call is the rest of the tensors
    ready0.push_back(ready[0]);
    bwd.push_back(num(j, "backward_end", 0));
    comm.push_back(num(j, "comm_end", 0));
    end.push_back(num(j, "step_end", 0));
    gap.push_back((ready[blocks - 1] - ready[0]) / double(std::max<size_t>(1, blocks - 1)));
    std::vector<double> lag;
    for (size_t k = 0; k < blocks; k++) lag.push_back(summed[k] - ready[k]);
    sum.push_back(median(lag));
    tail.push_back(comm.back() - bwd.back());
    last.push_back(bwd.back() - ready[blocks - 1]);
    const double o0 = num(j, "opt_begin", -1), o1 = num(j, "opt_end", -1);
    if (o0 >= 0 && o1 >= o0) {
      opt.push_back(o1 - o0);
      gather.push_back(end.back() - o1);
    }
  }
  TraceSummary s;
  s.steps = int(ready0.size());
  if (!s.steps) return s;
  s.ready0 = median(ready0);
  s.backward_end = median(bwd);
  s.comm_end = median(comm);
  s.step_end = median(end);
  s.block_gap = median(gap);
  s.sum = median(sum);
  s.tail = median(tail);
  s.last = median(last);
  if (opt.size() == ready0.size()) {  // every step has them, or none counts
    s.opt = median(opt);
    s.gather = median(gather);
  }
  return s;
}

std::string trace_line(const std::string& name, const TraceSummary& s) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "%-20s n=%2d ready0 %6.2f  bwd_end %6.2f  comm_end %6.2f  step %6.2f  blockgap %.3f  sum %.3f  tail %.3f  "
      "last %.3f",
      name.c_str(), s.steps, s.ready0, s.backward_end, s.comm_end, s.step_end, s.block_gap, s.sum, s.tail, s.last);
  std::string line = buf;
  if (s.opt >= 0) {
    std::snprintf(buf, sizeof buf, "  opt %.3f  gather %.3f", s.opt, s.gather);
    line += buf;
  }
  return line;
}

}  // namespace report
