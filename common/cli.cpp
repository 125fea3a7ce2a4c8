#include "common/cli.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace {
// A decimal number: [+-] digits [. digits] [e [+-] digits], with digits on at least one side of the point.
// strtod alone would also read hexadecimal ("0x10" as 16), leading spaces, "nan" and "infinity".
bool is_decimal(const std::string& v) {
  size_t i = v[0] == '+' || v[0] == '-' ? 1 : 0, digits = 0;
  auto run = [&] {
    const size_t start = i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') i++;
    return i - start;
  };
  digits += run();
  if (i < v.size() && v[i] == '.') {
    i++;
    digits += run();
  }
  if (digits == 0) return false;
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    i++;
    if (i < v.size() && (v[i] == '+' || v[i] == '-')) i++;
    if (run() == 0) return false;
  }
  return i == v.size();
}

// "inf", "-Infinity": refused with their own message (a number, but not a finite one).
bool is_infinity(const std::string& v) {
  std::string t = v.substr(v[0] == '+' || v[0] == '-' ? 1 : 0);
  for (char& c : t) c = char(std::tolower(static_cast<unsigned char>(c)));
  return t == "inf" || t == "infinity";
}

// strtod over a decimal text; false when it is not one ("", "abc", "1x", "nan", "0x10").
bool read_double(const std::string& v, double* x) {
  if (v.empty() || !is_decimal(v)) return false;
  *x = std::strtod(v.c_str(), nullptr);
  return true;
}

// What a text that is not a decimal number gets; hexadecimal is named, since strtod-style parsers read it.
[[noreturn]] void not_a_number(const std::string& what, const std::string& v, const char* kind) {
  const size_t sign = !v.empty() && (v[0] == '+' || v[0] == '-') ? 1 : 0;
  if (v.size() > sign + 1 && v[sign] == '0' && (v[sign + 1] == 'x' || v[sign + 1] == 'X'))
    user_error(what, " needs a decimal ", kind, ", got '", v, "' (hexadecimal is not read).");
  user_error(what, " needs ", kind == std::string("integer") ? "an " : "a ", kind, ", got '", v, "'.");
}

[[noreturn]] void out_of_range(const std::string& what, const std::string& v, bool large, const std::string& range) {
  user_error(what, " is too ", large ? "large" : "small", ": got '", v, "' (it takes ", range, ").");
}
}  // namespace

double parse_number(const std::string& what, const std::string& v) {
  double x;
  if (!v.empty() && is_infinity(v)) user_error(what, " needs a finite number, got '", v, "'.");
  if (!read_double(v, &x)) not_a_number(what, v, "number");
  // An overflow (1e400) gives an infinity. An underflow (1e-320, 1e-400) gives the nearest
  // double (a denormal or 0), which is kept like any other rounding.
  if (std::isinf(x)) out_of_range(what, v, x > 0, "numbers up to about 1.8e308 in magnitude");
  return x;
}

float parse_float(const std::string& what, const std::string& v) {
  const float x = float(parse_number(what, v));
  if (std::isinf(x)) out_of_range(what, v, x > 0, "numbers up to about 3.4e38 in magnitude, a 32-bit float");
  return x;
}

int64_t parse_integer(const std::string& what, const std::string& v, int64_t lo, int64_t hi) {
  const std::string range = str_cat("integers from ", lo, " to ", hi);
  double x;
  if (!read_double(v, &x)) not_a_number(what, v, is_infinity(v) ? "integer" : "number");
  int64_t r;
  if (v.find_first_of(".eE") == std::string::npos) {  // plain digits, read exactly (a double would round beyond 2^53)
    errno = 0;
    const long long n = std::strtoll(v.c_str(), nullptr, 10);
    if (errno == ERANGE) out_of_range(what, v, n > 0, range);
    r = n;
  } else {  // a whole number in another form: 1e6, 2.0
    if (x != std::floor(x)) user_error(what, " needs an integer, got '", v, "'.");
    if (x >= 0x1p63 || x < -0x1p63) out_of_range(what, v, x > 0, range);
    r = int64_t(x);
  }
  if (r < lo || r > hi) out_of_range(what, v, r > hi, range);
  return r;
}

void Cli::push(char s, const std::string& l, Kind k, void* t, const std::string& help, std::string deflt) {
  for (const auto& f : flags_) CHECK((s == 0 || f.s != s) && f.l != l);
  CHECK(s != 'h' && l != "help");
  flags_.push_back({s, l, help, k, t, std::move(deflt), section_});
}

void Cli::add(char s, const std::string& l, std::string* t, const std::string& h) { push(s, l, Kind::Str, t, h, *t); }
void Cli::add(char s, const std::string& l, int* t, const std::string& h) {
  push(s, l, Kind::Int, t, h, std::to_string(*t));
}
void Cli::add(char s, const std::string& l, int64_t* t, const std::string& h) {
  push(s, l, Kind::I64, t, h, std::to_string(*t));
}
void Cli::add(char s, const std::string& l, double* t, const std::string& h) {
  push(s, l, Kind::Dbl, t, h, str_cat(*t));
}
void Cli::add(char s, const std::string& l, float* t, const std::string& h) {
  push(s, l, Kind::Flt, t, h, str_cat(*t));
}
void Cli::add(char s, const std::string& l, bool* t, const std::string& h) {
  push(s, l, Kind::Bool, t, h, *t ? "1" : "0");
}
void Cli::add(char s, const std::string& l, std::vector<std::string>* t, const std::string& h) {
  push(s, l, Kind::Multi, t, h, "");
}

void Cli::note(const std::string& spelling, const std::string& text) {
  CHECK(spelling.size() >= 2 && spelling[0] == '-' && !text.empty() && !find_note(spelling));
  notes_.emplace_back(spelling, text);
}

const std::string* Cli::find_note(const std::string& spelling) const {
  for (const auto& n : notes_)
    if (n.first == spelling) return &n.second;
  return nullptr;
}

void Cli::set(const Flag& f, const std::string& v) const {
  const std::string what = "flag --" + f.l;
  switch (f.kind) {
    case Kind::Str:
      *static_cast<std::string*>(f.target) = v;
      break;
    case Kind::Int:
      *static_cast<int*>(f.target) = int(parse_integer(what, v, INT32_MIN, INT32_MAX));
      break;
    case Kind::I64:
      *static_cast<int64_t*>(f.target) = parse_integer(what, v, INT64_MIN, INT64_MAX);
      break;
    case Kind::Dbl:
      *static_cast<double*>(f.target) = parse_number(what, v);
      break;
    case Kind::Flt:
      *static_cast<float*>(f.target) = parse_float(what, v);
      break;
    case Kind::Bool:
      if (v == "1" || v == "true")
        *static_cast<bool*>(f.target) = true;
      else if (v == "0" || v == "false")
        *static_cast<bool*>(f.target) = false;
      else
        user_error(what, " needs 0 or 1, got '", v, "'.");
      break;
    case Kind::Multi:
      static_cast<std::vector<std::string>*>(f.target)->push_back(v);
      break;
  }
}

bool Cli::given(const std::string& long_name) const {
  return std::find(given_.begin(), given_.end(), long_name) != given_.end();
}

bool Cli::parse(int argc, char** argv) {
  given_.clear();
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    const Flag* f = nullptr;
    std::string value;
    bool has_value = false;
    if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
      for (const auto& x : flags_)
        if (x.s == a[1]) f = &x;
    } else if (a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      for (const auto& x : flags_)
        if (x.l == name) f = &x;
    }
    // The messages do not name the program: the program prefixes every message with its name. A note
    // on the spelling as given (without "=value") goes into the message.
    const std::string* note = find_note(has_value ? a.substr(0, a.find('=')) : a);
    const std::string noted = note ? " (" + *note + ")" : "";
    if (!f) user_error("unknown flag '", a, "'", noted, "; run with --help to list the flags.");
    if (!has_value) {
      if (i + 1 >= argc) user_error("flag '", a, "' needs a value", noted, "; run with --help to see what it takes.");
      value = argv[++i];
    }
    try {
      set(*f, value);
      given_.push_back(f->l);
    } catch (const UserError& e) {
      if (!note) throw;
      std::string m = e.what();
      if (!m.empty() && m.back() == '.') m.pop_back();
      user_error(m, noted, ".");
    }
  }
  return true;
}

std::string Cli::help() const {
  std::string out = "usage: " + program_ + " [flags]\n" + summary_ + "\n";
  std::vector<std::string> sections;
  for (const auto& f : flags_)
    if (std::find(sections.begin(), sections.end(), f.section) == sections.end()) sections.push_back(f.section);
  if (sections.empty()) sections.push_back(section_);
  for (const auto& section : sections) {
    out += "\n" + section + ":\n";
    for (const auto& f : flags_) {
      if (f.section != section) continue;
      std::string left = f.s ? str_cat("  -", f.s, ", --", f.l) : str_cat("      --", f.l);
      if (left.size() < 28) left.resize(28, ' ');
      out += left + " " + f.help;
      if (f.kind != Kind::Multi) out += " (default: " + (f.deflt.empty() ? std::string("\"\"") : f.deflt) + ")";
      out += "\n";
    }
  }
  std::string left = "  -h, --help";
  left.resize(28, ' ');
  out += left + " this text\n";
  if (!epilogue_.empty()) out += "\n" + epilogue_;
  return out;
}
