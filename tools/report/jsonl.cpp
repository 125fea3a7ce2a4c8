#include "tools/report/jsonl.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace report {

std::vector<Json> parse_json_lines(const std::string& text, const std::string& what, bool partial_last_ok) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<Json> out;
  for (size_t n = 0; n < lines.size(); n++) {
    const std::string& l = lines[n];
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(parse_json(l, what + ", line " + std::to_string(n + 1)));
    } catch (const UserError&) {
      // Only the last line may be cut short (a program killed while writing it); any other is a broken file.
      if (partial_last_ok && n + 1 == lines.size()) break;
      throw;
    }
  }
  return out;
}

std::vector<Json> read_json_lines(const std::string& path, bool partial_last_ok) {
  std::ifstream f(path, std::ios::binary);
  if (!f) user_error("cannot read '", path, "' (missing or unreadable).");
  std::ostringstream s;
  s << f.rdbuf();
  return parse_json_lines(s.str(), "'" + path + "'", partial_last_ok);
}

bool is_num(const Json& j, const std::string& key) { return j.has(key) && j.obj.at(key).type == Json::Number; }

double num(const Json& j, const std::string& key, double missing) {
  return is_num(j, key) ? j.obj.at(key).num : missing;
}

std::string str(const Json& j, const std::string& key, const std::string& missing) {
  if (!j.has(key)) return missing;
  const Json& v = j.obj.at(key);
  if (v.type == Json::String) return v.str;
  if (v.type == Json::Number) {
    if (v.num == std::floor(v.num) && std::fabs(v.num) < 1e15) return std::to_string((long long)v.num);
    char b[64];
    std::snprintf(b, sizeof b, "%g", v.num);
    return b;
  }
  if (v.type == Json::Bool) return v.b ? "true" : "false";
  return missing;
}

const Json* find(const Json& j, const std::string& path) {
  const Json* cur = &j;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->has(key)) return nullptr;
    cur = &cur->obj.at(key);
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string json_quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\r':
        o += "\\r";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += char(c);
        }
    }
  }
  return o + "\"";
}

std::string json_number(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  std::string s = b;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s += '0';
  } else {
    s += ".0";
  }
  if (s == "-0.0") s = "0.0";
  return s;
}

JsonOut& JsonOut::add(const std::string& key, const std::string& value) {
  items_.emplace_back(key, json_quote(value));
  return *this;
}
JsonOut& JsonOut::add(const std::string& key, double value, int digits) {
  items_.emplace_back(key, json_number(value, digits));
  return *this;
}
JsonOut& JsonOut::add_int(const std::string& key, long long value) {
  items_.emplace_back(key, std::to_string(value));
  return *this;
}
JsonOut& JsonOut::add_null(const std::string& key) {
  items_.emplace_back(key, "null");
  return *this;
}
JsonOut& JsonOut::add_raw(const std::string& key, const std::string& json) {
  items_.emplace_back(key, json);
  return *this;
}

std::string JsonOut::str() const {
  std::string o = "{";
  for (size_t i = 0; i < items_.size(); i++) o += (i ? "," : "") + json_quote(items_[i].first) + ":" + items_[i].second;
  return o + "}";
}

}  // namespace report
