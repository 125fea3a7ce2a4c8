#include "tools/report/bench_line.h"

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "tools/report/jsonl.h"
#include "tools/report/stats.h"

namespace report {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

}  // namespace

bool parse_profile(const std::string& stderr_text, ProfileSums* out) {
  const std::vector<std::string> lines = lines_of(stderr_text);
  static const std::regex head(R"(^GPT2_PROFILE: GPU ms per step over ([0-9]+) steps)");
  static const std::regex row(R"(^\s+(.*\S)\s+([-0-9.eE+]+)\s+[0-9.]+%\s*$)");
  for (size_t i = 0; i < lines.size(); i++) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, head)) continue;
    ProfileSums p;
    p.steps = std::stoi(m[1]);
    // The rows follow the header (only the first table: with several processes each prints its own).
    for (size_t k = i + 1; k < lines.size() && std::regex_match(lines[k], m, row); k++) {
      const std::string name = m[1];
      const double ms = std::stod(m[2]);
      if (name.rfind("fwd", 0) == 0) {
        p.fwd += ms;
      } else if (name.rfind("bwd", 0) == 0) {
        p.bwd += ms;
      } else if (name == "crossentropy") {
        p.loss += ms;
      } else {
        p.other += ms;
      }
    }
    *out = p;
    return true;
  }
  return false;
}

namespace {

// The parameter count (millions) of the header "train_gpt2 | <GPU name> | d12 separate q/k/v, 124.4M params | ...";
// NaN when absent.
double params_of_header(const std::string& out) {
  std::smatch m;
  static const std::regex params(R"(([0-9.]+)M params)");
  double params_m = NAN;
  if (std::regex_search(out, m, params)) {
    try {
      params_m = std::stod(m[1]);
    } catch (const std::exception&) {
    }
  }
  return params_m;
}

// The GPU the header names into *gpu; false when no line is the program's header.
bool gpu_of_header(const std::string& program, const std::string& out, std::string* gpu) {
  std::smatch m;
  const std::regex header("^" + program + R"( \| ([^|]+) \|)");
  for (const auto& l : lines_of(out))
    if (std::regex_search(l, m, header)) {
      *gpu = trim(m[1]);
      return true;
    }
  return false;
}

// The processes of "data parallel: 4 processes (mpirun), ..."; -1 when stdout does not say.
long long world_of(const std::string& out) {
  std::smatch m;
  static const std::regex world(R"(^data parallel: ([0-9]+) process)");
  for (const auto& l : lines_of(out))
    if (std::regex_search(l, m, world)) return std::stoll(m[1]);
  return -1;
}

void add_gpu(JsonOut& line, bool gpu_known, const std::string& gpu) {
  if (gpu_known) {
    line.add("gpu", gpu);
  } else {
    line.add_null("gpu");
  }
}

// The step lines of the log (a validation line carries val_loss only); *bad_log says why a line is unreadable.
std::vector<Json> step_lines(const BenchRun& r, bool vit, std::string* bad_log) {
  std::vector<Json> steps;
  std::ifstream f(r.log, std::ios::binary);
  if (!f) return steps;
  try {
    for (const Json& j : parse_json_lines(slurp(r.log), "the program's log", false))
      if (j.has("ms") && (vit || j.has("loss"))) steps.push_back(j);
  } catch (const UserError& e) {
    *bad_log = std::string("unreadable line in ") + r.program + "'s log: " + e.what();
  }
  return steps;
}

// A failed run's error: the last line of its stderr, else what its exit status suggests.
std::string exit_error(int exit_status, const std::string& err) {
  std::string msg;
  for (const auto& l : lines_of(err))
    if (!trim(l).empty()) msg = trim(l);
  if (msg.empty())
    msg = exit_status >= 128 ? "killed by signal " + std::to_string(exit_status - 128) + " (exit status " +
                                   std::to_string(exit_status) + "; out of host memory, or the time limit?)"
                             : "exit status " + std::to_string(exit_status) + " and nothing on stderr";
  if (exit_status == 124) msg += " (exit status 124: stopped by its time limit)";
  return msg;
}

// The medians of the timed steps, and the GPT2_PROFILE table's sums where stderr has one.
void add_medians(JsonOut& line, const std::vector<const Json*>& timed, bool vit, const std::string& err) {
  auto med = [&](const std::string& key) {
    std::vector<double> v;
    for (const Json* j : timed) v.push_back(num(*j, key, NAN));
    return median(v);
  };
  const std::string rate = vit ? "img_per_s" : "tok_per_s";
  line.add(rate, med(rate), 1);
  line.add("mfu", med("mfu"), 4);
  line.add("step_ms", med("ms"), 3);
  line.add("opt_ms", med("opt_ms"), 3);
  ProfileSums p;
  if (parse_profile(err, &p)) {
    line.add("fwd_ms", p.fwd, 3);
    line.add("bwd_ms", p.bwd, 3);
    line.add("loss_ms", p.loss, 3);
    line.add_int("profile_steps", p.steps);
  }
}

}  // namespace

std::string bench_line(const BenchRun& r) {
  const std::string out = slurp(r.out), err = slurp(r.err);
  const bool vit = r.program == "train_vit";
  JsonOut line;
  line.add("model", r.model);
  line.add("params_m", params_of_header(out), 6);
  line.add_int("B", r.B);
  if (r.T > 0) line.add_int("T", r.T);
  std::string gpu = r.gpu;
  const bool gpu_known = !gpu.empty() || gpu_of_header(r.program, out, &gpu);
  if (!r.launch.empty()) {
    const long long w = world_of(out);
    line.add("launch", r.launch);
    if (w >= 0) {
      line.add_int("world", w);
    } else {
      line.add_null("world");
    }
  }
  auto finish_error = [&](const std::string& msg, bool with_status) {
    add_gpu(line, gpu_known, gpu);
    line.add("extra", r.extra);
    line.add("error", msg);
    if (with_status) line.add_int("exit_status", r.exit_status);
    return line.str();
  };
  std::string bad_log;
  const std::vector<Json> steps = step_lines(r, vit, &bad_log);  // after the warm-up, they are timed
  if (r.exit_status != 0) return finish_error(exit_error(r.exit_status, err), true);
  if (!bad_log.empty()) return finish_error(bad_log, false);
  std::vector<const Json*> timed;
  for (const Json& j : steps)
    if (num(j, "step", 0) > r.warmup) timed.push_back(&j);
  if (timed.empty()) return finish_error("the log has no steps after the first " + std::to_string(r.warmup), false);
  add_medians(line, timed, vit, err);
  add_gpu(line, gpu_known, gpu);
  line.add("extra", r.extra);
  line.add_int("timed_steps", (long long)timed.size());
  return line.str();
}

}  // namespace report
