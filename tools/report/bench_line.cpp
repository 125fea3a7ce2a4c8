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

std::string bench_line(const BenchRun& r) {
  const std::string out = slurp(r.out), err = slurp(r.err);
  const bool vit = r.program == "train_vit";
  JsonOut line;
  line.add("model", r.model);
  // The header: "train_gpt2 | <GPU name> | d12 separate q/k/v, 124.4M params | ..."
  std::smatch m;
  static const std::regex params(R"(([0-9.]+)M params)");
  double params_m = NAN;
  if (std::regex_search(out, m, params)) {
    try {
      params_m = std::stod(m[1]);
    } catch (const std::exception&) {
    }
  }
  line.add("params_m", params_m, 6);
  line.add_int("B", r.B);
  if (r.T > 0) line.add_int("T", r.T);
  std::string gpu = r.gpu;
  bool gpu_known = !gpu.empty();
  if (!gpu_known) {
    const std::regex header("^" + r.program + R"( \| ([^|]+) \|)");
    for (const auto& l : lines_of(out))
      if (std::regex_search(l, m, header)) {
        gpu = trim(m[1]);
        gpu_known = true;
        break;
      }
  }
  if (!r.launch.empty()) {  // "data parallel: 4 processes (mpirun), ..."
    static const std::regex world(R"(^data parallel: ([0-9]+) process)");
    long long w = -1;
    for (const auto& l : lines_of(out))
      if (std::regex_search(l, m, world)) {
        w = std::stoll(m[1]);
        break;
      }
    line.add("launch", r.launch);
    if (w >= 0) {
      line.add_int("world", w);
    } else {
      line.add_null("world");
    }
  }
  auto finish_error = [&](const std::string& msg, bool with_status) {
    if (gpu_known) {
      line.add("gpu", gpu);
    } else {
      line.add_null("gpu");
    }
    line.add("extra", r.extra);
    line.add("error", msg);
    if (with_status) line.add_int("exit_status", r.exit_status);
    return line.str();
  };
  // The step lines (a validation line carries val_loss only): after the warm-up, they are timed.
  std::vector<Json> steps;
  std::string bad_log;
  {
    std::ifstream f(r.log, std::ios::binary);
    if (f) {
      try {
        for (const Json& j : parse_json_lines(slurp(r.log), "the program's log", false))
          if (j.has("ms") && (vit || j.has("loss"))) steps.push_back(j);
      } catch (const UserError& e) {
        bad_log = std::string("unreadable line in ") + r.program + "'s log: " + e.what();
      }
    }
  }
  if (r.exit_status != 0) {
    std::string msg;
    for (const auto& l : lines_of(err))
      if (!trim(l).empty()) msg = trim(l);
    if (msg.empty())
      msg = r.exit_status >= 128 ? "killed by signal " + std::to_string(r.exit_status - 128) + " (exit status " +
                                       std::to_string(r.exit_status) + "; out of host memory, or the time limit?)"
                                 : "exit status " + std::to_string(r.exit_status) + " and nothing on stderr";
    if (r.exit_status == 124) msg += " (exit status 124: stopped by its time limit)";
    return finish_error(msg, true);
  }
  if (!bad_log.empty()) return finish_error(bad_log, false);
  std::vector<const Json*> timed;
  for (const Json& j : steps)
    if (num(j, "step", 0) > r.warmup) timed.push_back(&j);
  if (timed.empty()) return finish_error("the log has no steps after the first " + std::to_string(r.warmup), false);
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
  if (gpu_known) {
    line.add("gpu", gpu);
  } else {
    line.add_null("gpu");
  }
  line.add("extra", r.extra);
  line.add_int("timed_steps", (long long)timed.size());
  return line.str();
}

}  // namespace report
