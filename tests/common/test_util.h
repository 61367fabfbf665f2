// Small helpers shared by the runtime tests: silencing the runtime's error log (error-path tests
// trigger thousands of expected failures), temporary files, and reading the build/source dirs.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/platform/platform.h"

namespace ember::testing {

// Drops every runtime log message while alive; restores stderr logging afterwards.
class QuietLogs {
 public:
  QuietLogs() {
    PlatformHooks hooks;
    hooks.log = [](LogLevel, const char*, int, const char*) {};
    set_platform_hooks(hooks);
  }
  ~QuietLogs() {
    PlatformHooks hooks;
    hooks.log = [](LogLevel level, const char* file, int line, const char* message) {
      std::fprintf(stderr, "[ember %d %s:%d] %s\n", static_cast<int>(level), file, line, message);
    };
    set_platform_hooks(hooks);
  }
  QuietLogs(const QuietLogs&) = delete;
  QuietLogs& operator=(const QuietLogs&) = delete;
};

// A file under $TMPDIR (or /tmp) removed in the destructor.
class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr && dir[0] != '\0' ? dir : "/tmp") + "/ember_test_XXXXXX";
    const int fd = mkstemp(path_.data());
    if (fd < 0) {
      path_.clear();
      return;
    }
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const char* path() const { return path_.c_str(); }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

// $EMBER_BINARY_DIR / $EMBER_SOURCE_DIR set by ctest; "" when absent.
inline std::string binary_dir() {
  const char* d = std::getenv("EMBER_BINARY_DIR");
  return d ? d : "";
}
inline std::string source_dir() {
  const char* d = std::getenv("EMBER_SOURCE_DIR");
  return d ? d : "";
}

}  // namespace ember::testing
