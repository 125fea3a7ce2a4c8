#include "common/json.h"

#include <cstdlib>

#include "common/error.h"

namespace {
struct Parser {
  const std::string& s;
  const std::string& what;
  size_t i = 0;
  int depth = 0;

  [[noreturn]] void fail(const std::string& why) { user_error(what, " is not valid JSON (", why, " at byte ", i, ")."); }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s.compare(i, n, w) == 0) {
      i += n;
      return true;
    }
    return false;
  }
  std::string string() {
    if (s[i] != '"') fail("expected a string");
    i++;
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size()) fail("unterminated escape");
      char e = s[i++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i + 4 > s.size()) fail("short \\u escape");
          unsigned cp = unsigned(std::strtoul(s.substr(i, 4).c_str(), nullptr, 16));
          i += 4;
          if (cp < 0x80) out += char(cp);
          else if (cp < 0x800) out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
          else out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
          break;
        }
        default: fail("bad escape");
      }
    }
    if (i >= s.size()) fail("unterminated string");
    i++;
    return out;
  }
  Json value() {
    if (++depth > 64) fail("nesting too deep");
    ws();
    if (i >= s.size()) fail("unexpected end");
    Json v;
    char c = s[i];
    if (c == '{') {
      v.type = Json::Object;
      i++;
      ws();
      if (i < s.size() && s[i] == '}') i++;
      else
        for (;;) {
          ws();
          std::string k = string();
          ws();
          if (i >= s.size() || s[i] != ':') fail("expected ':'");
          i++;
          v.obj[k] = value();
          ws();
          if (i < s.size() && s[i] == ',') { i++; continue; }
          if (i < s.size() && s[i] == '}') { i++; break; }
          fail("expected ',' or '}'");
        }
    } else if (c == '[') {
      v.type = Json::Array;
      i++;
      ws();
      if (i < s.size() && s[i] == ']') i++;
      else
        for (;;) {
          v.arr.push_back(value());
          ws();
          if (i < s.size() && s[i] == ',') { i++; continue; }
          if (i < s.size() && s[i] == ']') { i++; break; }
          fail("expected ',' or ']'");
        }
    } else if (c == '"') {
      v.type = Json::String;
      v.str = string();
    } else if (lit("true")) {
      v.type = Json::Bool;
      v.b = true;
    } else if (lit("false")) {
      v.type = Json::Bool;
    } else if (lit("null")) {
      v.type = Json::Null;
    } else {
      char* end = nullptr;
      v.num = std::strtod(s.c_str() + i, &end);
      if (end == s.c_str() + i) fail("unexpected character");
      v.type = Json::Number;
      i = size_t(end - s.c_str());
    }
    depth--;
    return v;
  }
};
}  // namespace

const Json& Json::at(const std::string& k) const {
  auto it = obj.find(k);
  if (type != Object || it == obj.end()) user_error("JSON key '", k, "' is missing.");
  return it->second;
}

Json parse_json(const std::string& text, const std::string& what) {
  Parser p{text, what};
  Json v = p.value();
  p.ws();
  if (p.i != text.size()) p.fail("trailing characters");
  return v;
}
