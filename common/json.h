// A small JSON reader (objects, arrays, strings, numbers, true/false/null) for safetensors headers and
// config.json files. Errors are UserErrors that name the context given by the caller.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;

  bool has(const std::string& k) const { return type == Object && obj.count(k); }
  const Json& at(const std::string& k) const;  // UserError if missing
};

// Parses `text`; `what` names the source in error messages (e.g. "the header of 'x.safetensors'").
Json parse_json(const std::string& text, const std::string& what);
