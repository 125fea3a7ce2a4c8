// A temporary folder that is removed, with everything in it, when the object goes out of scope (or the
// exception that unwinds it passes), so programs and tests leave nothing behind in /tmp.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "common/error.h"

class TempDir {
 public:
  // Creates <parent>/<prefix>XXXXXX; an empty parent means the system's temporary folder ($TMPDIR or /tmp).
  explicit TempDir(const std::string& prefix, std::string parent = "") {
    std::error_code ec;
    if (parent.empty()) parent = std::filesystem::temp_directory_path(ec).string();
    if (parent.empty()) parent = ".";
    std::string tmpl = parent + (parent.back() == '/' ? "" : "/") + prefix + "XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      user_error("cannot create a temporary folder '", tmpl, "'; check that ", parent, " is writable.");
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;  // best effort, and never throw from a destructor
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};
