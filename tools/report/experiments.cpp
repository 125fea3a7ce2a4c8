#include "tools/report/experiments.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "tools/report/jsonl.h"

namespace report {

std::string Experiment::header_str(const std::string& key) const { return str(header, key, ""); }

std::string Experiment::commits() const {
  std::vector<std::pair<std::string, int>> seen;  // commit, runs, in order of first appearance
  for (const Run& r : runs) {
    if (r.skipped) continue;
    const std::string& c = r.commit.empty() ? commit : r.commit;
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& p) { return p.first == c; });
    if (it == seen.end())
      seen.push_back({c, 1});
    else
      it->second++;
  }
  if (seen.empty()) return commit.empty() ? "" : "commit " + commit;
  if (seen.size() == 1) return seen[0].first.empty() ? "" : "commit " + seen[0].first;
  std::string o = "commits ";
  for (size_t i = 0; i < seen.size(); i++)
    o += (i ? ", " : "") + (seen[i].first.empty() ? "unknown" : seen[i].first) + " (" + std::to_string(seen[i].second) +
         (seen[i].second == 1 ? " run)" : " runs)");
  return o;
}

Experiment experiment_of(const std::vector<Json>& lines, const std::string& name) {
  Experiment e;
  e.name = name;
  e.present = true;
  e.status = "interrupted";  // no end line
  for (const Json& j : lines) {
    if (j.has("experiment") && j.at("experiment").type == Json::Object) {
      e.header = j.at("experiment");
      e.title = e.header_str("title");
      e.gpu = e.header_str("gpu");
      e.commit = e.header_str("commit");
      e.invocation = e.header_str("invocation");
      e.started = e.header_str("started");
      e.quick = e.header.has("quick") && e.header.at("quick").type == Json::Bool && e.header.at("quick").b;
    } else if (j.has("experiment_end")) {
      const Json& end = j.at("experiment_end");
      e.status = str(end, "status", "interrupted");
      e.wall_s = num(end, "wall_s", 0);
      e.reason = str(end, "reason", "");
    } else if (j.has("run") && j.at("run").type == Json::Object) {
      const Json& r = j.at("run");
      Run run;
      run.cmd = str(r, "cmd", "");
      run.exit = int(num(r, "exit", -1));
      run.wall_s = num(r, "wall_s", 0);
      run.skipped = r.has("skipped");
      run.commit = str(r, "commit", "");
      if (run.exit != 0 && !run.skipped) e.failed++;
      e.runs.push_back(run);
    } else {
      e.lines.push_back(j);
    }
  }
  return e;
}

Experiment read_experiment(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/exp/" + name + ".jsonl";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    Experiment e;
    e.name = name;
    if (std::filesystem::exists(path + ".part", ec)) e.status = "interrupted";
    return e;
  }
  return experiment_of(read_json_lines(path), name);
}

Paper Paper::read(const std::string& path) {
  std::vector<Json> rows;
  for (Json& j : read_json_lines(path, false))
    if (j.has("item")) rows.push_back(std::move(j));
  return Paper(std::move(rows));
}

const Json* Paper::row(const std::map<std::string, std::string>& match) const {
  for (const Json& r : rows_) {
    bool ok = true;
    for (const auto& kv : match) ok = ok && str(r, kv.first, "") == kv.second;
    if (ok) return &r;
  }
  return nullptr;
}

double Paper::value(const std::map<std::string, std::string>& match) const {
  const Json* r = row(match);
  return r ? num(*r, "value", NAN) : NAN;
}

std::string Paper::gpu(const std::string& item) const {
  const Json* r = row({{"item", item}});
  return r ? str(*r, "gpu", "") : "";
}

std::string optimizer_of_extra(const std::string& extra) {
  std::smatch m;
  static const std::regex opt(R"((?:^|\s)(?:-o|--optimizer)[ =](\S+))");
  const std::string base = std::regex_search(extra, m, opt) ? std::string(m[1]) : "adamw";
  auto set = [&](const std::string& key) {
    return extra.find(base + "." + key + "=1") != std::string::npos ||
           extra.find(base + "." + key + "=true") != std::string::npos;
  };
  return base + (set("fast") ? ":fast" : "") + (set("bf16_record") ? ":rec16" : "");
}

std::string canonical_model(const std::string& model) {
  static const std::map<std::string, std::string> gpt2 = {
      {"d12", "gpt2-124m"}, {"124m", "gpt2-124m"}, {"d24", "gpt2-355m"},  {"355m", "gpt2-355m"},
      {"d36", "gpt2-774m"}, {"774m", "gpt2-774m"}, {"d48", "gpt2-1558m"}, {"1558m", "gpt2-1558m"}};
  const auto it = gpt2.find(model);
  return it == gpt2.end() ? model : it->second;
}

std::string model_title(const std::string& model) {
  const std::string m = canonical_model(model);
  std::smatch k;
  static const std::regex gpt2(R"(^gpt2-([0-9]+)m$)"), vit(R"(^vit-([a-z]+)([0-9]+)$)"),
      mlp(R"(^mlp-w([0-9]+)-d([0-9]+)$)"), mat(R"(^mat-([0-9]+)x([0-9]+)$)");
  if (std::regex_match(m, k, gpt2)) return "GPT-2 " + std::string(k[1]) + "M";
  if (std::regex_match(m, k, vit)) {
    std::string size = k[1];
    for (char& c : size) c = char(std::toupper((unsigned char)c));
    if (size == "TI") size = "Ti";
    return "ViT-" + size + "/" + std::string(k[2]);
  }
  if (std::regex_match(m, k, mlp))
    return "MLP " + std::string(k[1]) + " wide, " + std::string(k[2]) + (k[2] == "1" ? " layer" : " layers");
  if (std::regex_match(m, k, mat)) return std::string(k[1]) + " x " + std::string(k[2]) + " matrix";
  return m;
}

std::string optimizer_title(const std::string& opt) {
  const std::string rec16 = ":rec16";  // the learned records in bf16 (optimizer_of_extra)
  if (opt.size() > rec16.size() && opt.compare(opt.size() - rec16.size(), rec16.size(), rec16) == 0)
    return optimizer_title(opt.substr(0, opt.size() - rec16.size())) + ", bf16 records";
  static const std::map<std::string, std::string> names = {{"adamw", "AdamW"},
                                                           {"adafactor", "Adafactor"},
                                                           {"muon", "Muon"},
                                                           {"velo", "VeLO"},
                                                           {"small_fc_lopt", "small_fc_lopt"},
                                                           {"small_fc_lopt:fast", "small_fc_lopt (fast)"},
                                                           {"celo2", "CELO2"},
                                                           {"elo", "ELO"},
                                                           {"elo:fast", "ELO (fast)"},
                                                           {"elo_celo2", "ELO_CELO2"},
                                                           {"adamw_foreach", "AdamW (foreach)"}};
  const auto it = names.find(opt);
  return it == names.end() ? opt : it->second;
}

std::string base_optimizer(const std::string& opt) { return opt.substr(0, opt.find(':')); }

}  // namespace report
