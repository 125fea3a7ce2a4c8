// Command-line flags, llm.c style: short flags with a value (-o velo, -b 64) and long equivalents
// (--optimizer velo, --optimizer=velo). The help text is generated from the same table that parses,
// so the two cannot drift. Bad flags raise UserError with one sentence.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

class Cli {
 public:
  Cli(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

  // short_name may be 0 for long-only flags. Defaults are the targets' current values.
  void add(char short_name, const std::string& long_name, std::string* target, const std::string& help);
  void add(char short_name, const std::string& long_name, int* target, const std::string& help);
  void add(char short_name, const std::string& long_name, int64_t* target, const std::string& help);
  void add(char short_name, const std::string& long_name, double* target, const std::string& help);
  void add(char short_name, const std::string& long_name, float* target, const std::string& help);
  void add(char short_name, const std::string& long_name, bool* target, const std::string& help);  // 0/1/true/false
  // Repeatable flag: every occurrence appends its value.
  void add(char short_name, const std::string& long_name, std::vector<std::string>* target, const std::string& help);
  // The flags added from now on are listed in --help under `title`; sections are listed in the order they
  // were first named, so a program can add a flag of its own to a shared section. Flags added before any
  // section are listed under "flags". Sections keep a long help readable, one screen each.
  void section(std::string title) { section_ = std::move(title); }
  // Text printed after the flags in --help (e.g. the keys a --set flag takes).
  void set_epilogue(std::string text) { epilogue_ = std::move(text); }
  // A note on one spelling ("-k", "--opts"): a flag that was renamed, a letter whose meaning changed, a
  // letter of llm.c's that this program does not take. When that spelling is refused (unknown, no value,
  // or a value it cannot take), the message adds the note: "unknown flag '-k' (<text>); run with --help
  // ...". Notes change no parsing.
  void note(const std::string& spelling, const std::string& text);

  // Returns false when --help / -h was given (help already printed to stdout).
  bool parse(int argc, char** argv);
  // Whether the last parse set the flag of this long name (a default that was left alone is not given).
  bool given(const std::string& long_name) const;
  std::string help() const;

 private:
  enum class Kind { Str, Int, I64, Dbl, Flt, Bool, Multi };
  struct Flag {
    char s;
    std::string l, help;
    Kind kind;
    void* target;
    std::string deflt, section;
  };
  void push(char s, const std::string& l, Kind k, void* t, const std::string& help, std::string deflt);
  void set(const Flag& f, const std::string& value) const;
  const std::string* find_note(const std::string& spelling) const;
  std::string program_, summary_, epilogue_, section_ = "flags";
  std::vector<Flag> flags_;
  std::vector<std::pair<std::string, std::string>> notes_;  // spelling, text
  std::vector<std::string> given_;                          // long names of the flags the parse set
};

// Number parsing shared by the flags and the optimizer options; `what` names the value in messages
// ("flag --lr", "option adamw.lr"). Numbers are decimal ([+-]digits[.digits][e[+-]digits]): "0x10",
// " 5" and "nan" are refused, not read as 16, 5 or a NaN. A value too small for a double (1e-320, 1e-400) is accepted
// as the nearest double, denormal or 0, as any decimal is rounded; one beyond the double range (1e400) is refused as
// too large. Integers are read exactly (not through a double), "1e6" is accepted, and one outside [lo, hi] is refused
// as too large or too small, with the range.
double parse_number(const std::string& what, const std::string& text);
float parse_float(const std::string& what, const std::string& text);
int64_t parse_integer(const std::string& what, const std::string& text, int64_t lo, int64_t hi);
