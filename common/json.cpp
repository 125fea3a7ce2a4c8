#include "common/json.h"

#include <cstdlib>

#include "common/error.h"

namespace {
struct Parser {
  const std::string& s;
  const std::string& what;
  size_t i = 0;
  int depth = 0;

  [[noreturn]] void fail(const std::string& why) {
    user_error(what, " is not valid JSON (", why, " at byte ", i, ").");
  }
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
  // The four hex digits of a \u escape (i is just past the 'u').
  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; k++, i++) {
      const char c = i < s.size() ? s[i] : '\0';
      const int d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
      if (d < 0) fail("bad \\u escape without four hex digits");
      v = v * 16 + unsigned(d);
    }
    return v;
  }
  // The code point of a \u escape. A UTF-16 surrogate pair (how Python's json.dumps writes characters
  // beyond U+FFFF, e.g. "\ud83d\ude00" for U+1F600) combines into one code point; a lone surrogate is no
  // character, and encoding it on its own would give invalid UTF-8 (CESU-8).
  uint32_t code_point() {
    const uint32_t hi = hex4();
    if (hi < 0xD800 || hi > 0xDFFF) return hi;
    if (hi <= 0xDBFF && s.compare(i, 2, "\\u") == 0) {
      i += 2;
      const uint32_t lo = hex4();
      if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
    }
    fail("unpaired surrogate in a \\u escape");
  }
  static void append_utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += char(cp);
    } else if (cp < 0x800) {
      *out += char(0xC0 | (cp >> 6));
      *out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += char(0xE0 | (cp >> 12));
      *out += char(0x80 | ((cp >> 6) & 0x3F));
      *out += char(0x80 | (cp & 0x3F));
    } else {
      *out += char(0xF0 | (cp >> 18));
      *out += char(0x80 | ((cp >> 12) & 0x3F));
      *out += char(0x80 | ((cp >> 6) & 0x3F));
      *out += char(0x80 | (cp & 0x3F));
    }
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
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          append_utf8(code_point(), &out);
          break;
        default:
          fail("bad escape");
      }
    }
    if (i >= s.size()) fail("unterminated string");
    i++;
    return out;
  }
  // Any value; objects and arrays recurse, at most 64 deep (a hostile file cannot exhaust the stack).
  Json value() {
    if (++depth > 64) fail("nesting too deep");
    ws();
    if (i >= s.size()) fail("unexpected end");
    Json v;
    char c = s[i];
    if (c == '{') {
      object(v);
    } else if (c == '[') {
      array(v);
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
  // {"key": value, ...} from its '{'; a repeated key keeps its last value.
  void object(Json& v) {
    v.type = Json::Object;
    i++;
    ws();
    if (i < s.size() && s[i] == '}') {
      i++;
      return;
    }
    for (;;) {
      ws();
      std::string k = string();
      ws();
      if (i >= s.size() || s[i] != ':') fail("expected ':'");
      i++;
      v.obj[k] = value();
      ws();
      if (i < s.size() && s[i] == ',') {
        i++;
        continue;
      }
      if (i < s.size() && s[i] == '}') {
        i++;
        break;
      }
      fail("expected ',' or '}'");
    }
  }
  // [value, ...] from its '['.
  void array(Json& v) {
    v.type = Json::Array;
    i++;
    ws();
    if (i < s.size() && s[i] == ']') {
      i++;
      return;
    }
    for (;;) {
      v.arr.push_back(value());
      ws();
      if (i < s.size() && s[i] == ',') {
        i++;
        continue;
      }
      if (i < s.size() && s[i] == ']') {
        i++;
        break;
      }
      fail("expected ',' or ']'");
    }
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
