// JSON lines in and out, for the report tool: the programs' logs and benchmark lines are read with
// common/json one line at a time; lines the tool writes keep their keys in the order they are added.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"

namespace report {

// Every non-empty line of `path` as a JSON value. A line that is not JSON is a UserError naming the file
// and the line, except the last line of a file when `partial_last_ok` (a program killed while writing it).
std::vector<Json> read_json_lines(const std::string& path, bool partial_last_ok = true);
// The same for text already in memory; `what` names it in messages.
std::vector<Json> parse_json_lines(const std::string& text, const std::string& what, bool partial_last_ok = true);

// A number member, or `missing` when the key is absent, null or not a number.
double num(const Json& j, const std::string& key, double missing);
// A string member, or `missing`; numbers are written as they would be in a table.
std::string str(const Json& j, const std::string& key, const std::string& missing = "");
bool is_num(const Json& j, const std::string& key);
// A nested member: path "a.b" reads j["a"]["b"]; nullptr when any part is absent.
const Json* find(const Json& j, const std::string& path);

// One JSON object written in the order of the add calls: {"model":"d12","B":64,...}.
class JsonOut {
 public:
  JsonOut& add(const std::string& key, const std::string& value);
  JsonOut& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  // A number with at most `digits` decimals (trailing zeros dropped, one kept: 3.0); non-finite -> null.
  JsonOut& add(const std::string& key, double value, int digits);
  JsonOut& add_int(const std::string& key, long long value);
  JsonOut& add_null(const std::string& key);
  JsonOut& add_raw(const std::string& key, const std::string& json);  // a value already written as JSON
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// A string as a JSON string literal, quotes included.
std::string json_quote(const std::string& s);
// A number as JSON with at most `digits` decimals; "null" when not finite.
std::string json_number(double v, int digits);

}  // namespace report
