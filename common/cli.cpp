#include "common/cli.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

void Cli::push(char s, const std::string& l, Kind k, void* t, const std::string& help, std::string deflt) {
  for (const auto& f : flags_) CHECK((s == 0 || f.s != s) && f.l != l);
  CHECK(s != 'h' && l != "help");
  flags_.push_back({s, l, help, k, t, std::move(deflt)});
}

void Cli::add(char s, const std::string& l, std::string* t, const std::string& h) { push(s, l, Kind::Str, t, h, *t); }
void Cli::add(char s, const std::string& l, int* t, const std::string& h) { push(s, l, Kind::Int, t, h, std::to_string(*t)); }
void Cli::add(char s, const std::string& l, int64_t* t, const std::string& h) { push(s, l, Kind::I64, t, h, std::to_string(*t)); }
void Cli::add(char s, const std::string& l, double* t, const std::string& h) { push(s, l, Kind::Dbl, t, h, str_cat(*t)); }
void Cli::add(char s, const std::string& l, float* t, const std::string& h) { push(s, l, Kind::Flt, t, h, str_cat(*t)); }
void Cli::add(char s, const std::string& l, bool* t, const std::string& h) { push(s, l, Kind::Bool, t, h, *t ? "1" : "0"); }
void Cli::add(char s, const std::string& l, std::vector<std::string>* t, const std::string& h) {
  push(s, l, Kind::Multi, t, h, "");
}

void Cli::set(const Flag& f, const std::string& v) const {
  std::string name = "--" + f.l;
  auto number = [&](bool integer) {
    char* end = nullptr;
    errno = 0;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x))
      user_error("flag ", name, " needs a number, got '", v, "'.");
    if (integer && (x != std::floor(x) || std::fabs(x) > 9e18)) user_error("flag ", name, " needs an integer, got '", v, "'.");
    return x;
  };
  switch (f.kind) {
    case Kind::Str: *static_cast<std::string*>(f.target) = v; break;
    case Kind::Int: {
      double x = number(true);
      if (std::fabs(x) > 2147483647.0) user_error("flag ", name, " is out of range: ", v, ".");
      *static_cast<int*>(f.target) = int(x);
      break;
    }
    case Kind::I64: *static_cast<int64_t*>(f.target) = int64_t(number(true)); break;
    case Kind::Dbl: *static_cast<double*>(f.target) = number(false); break;
    case Kind::Flt: *static_cast<float*>(f.target) = float(number(false)); break;
    case Kind::Bool:
      if (v == "1" || v == "true") *static_cast<bool*>(f.target) = true;
      else if (v == "0" || v == "false") *static_cast<bool*>(f.target) = false;
      else user_error("flag ", name, " needs 0 or 1, got '", v, "'.");
      break;
    case Kind::Multi: static_cast<std::vector<std::string>*>(f.target)->push_back(v); break;
  }
}

bool Cli::parse(int argc, char** argv) {
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
    if (!f) user_error("unknown flag '", a, "'; run ", program_, " --help to list the flags.");
    if (!has_value) {
      if (i + 1 >= argc) user_error("flag '", a, "' needs a value; run ", program_, " --help.");
      value = argv[++i];
    }
    set(*f, value);
  }
  return true;
}

std::string Cli::help() const {
  std::string out = "usage: " + program_ + " [flags]\n" + summary_ + "\n\nflags:\n";
  for (const auto& f : flags_) {
    std::string left = f.s ? str_cat("  -", f.s, ", --", f.l) : str_cat("      --", f.l);
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " " + f.help;
    if (f.kind != Kind::Multi) out += " (default: " + (f.deflt.empty() ? std::string("\"\"") : f.deflt) + ")";
    out += "\n";
  }
  std::string left = "  -h, --help";
  left.resize(28, ' ');
  out += left + " this text\n";
  return out;
}
