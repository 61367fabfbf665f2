#include "tools/common/host_io.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/core/data_loader.h"

namespace ember::tools {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

thread_local ReadLog* g_active_log = nullptr;

std::string errno_text(int error) { return std::strerror(error); }

std::string labelled(const std::string& what, const std::string& path) {
  return what.empty() ? path : what + " " + path;
}

// "line 3, column 7 (byte 40)" for a 0-based byte offset into `text`.
std::string text_position(std::string_view text, size_t byte) {
  if (byte > text.size()) byte = text.size();
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(byte - line_start + 1) + " (byte " +
         std::to_string(byte) + ")";
}

// The first byte at which arrays / objects nest deeper than `max_depth`, or npos. Strings (with
// their escapes) are skipped, so brackets inside them do not count. One pass, no recursion: this
// runs before the JSON library, whose copy and dump code recurse once per level.
size_t too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error
// while parsing value - ..." without the id and the position (we give our own).
std::string parse_reason(const std::string& what) {
  std::string reason = what;
  if (!reason.empty() && reason[0] == '[') {
    const size_t close = reason.find("] ");
    if (close != std::string::npos) reason = reason.substr(close + 2);
  }
  if (reason.compare(0, 11, "parse error") == 0) {
    const size_t colon = reason.find(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
  }
  if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
  return reason;
}

bool same_file(const struct stat& a, uint64_t device, uint64_t inode) {
  return static_cast<uint64_t>(a.st_dev) == device && static_cast<uint64_t>(a.st_ino) == inode;
}

}  // namespace

// ---- ReadLog ------------------------------------------------------------------------------------

ReadLog::ReadLog() : previous_(g_active_log) { g_active_log = this; }

ReadLog::~ReadLog() { g_active_log = previous_; }

ReadLog* ReadLog::active() { return g_active_log; }

void ReadLog::add(const std::string& path, uint64_t device, uint64_t inode) {
  for (const FileId& f : files_) {
    if (f.device == device && f.inode == inode) return;
  }
  files_.push_back(FileId{path, device, inode});
}

void ReadLog::add_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) add(path, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

// ---- RegularFile --------------------------------------------------------------------------------

RegularFile RegularFile::open(const std::string& path, uint64_t max_bytes, const std::string& what) {
  RegularFile file;
  file.path_ = path;
  file.label_ = labelled(what, path);
  // stat first, so that a device is never opened (opening some has side effects); the fstat below
  // is the check that counts (the path may change in between).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw HostIoError(file.label_ + ": cannot open: " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) throw HostIoError(file.label_ + ": not a regular file (" + file_kind_name(st.st_mode) + ")");
  // O_NONBLOCK: if a FIFO is swapped in after the stat, open() still returns at once.
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd_ < 0) throw HostIoError(file.label_ + ": cannot open: " + errno_text(errno));
  if (::fstat(file.fd_, &st) != 0) throw HostIoError(file.label_ + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw HostIoError(file.label_ + ": not a regular file (" + file_kind_name(st.st_mode) + ")");
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ > max_bytes) {
    throw HostIoError(file.label_ + ": " + std::to_string(file.size_) + " bytes, above the limit of " +
                      std::to_string(max_bytes) + " bytes");
  }
  if (ReadLog* log = ReadLog::active()) log->add(path, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
  return file;
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(other.fd_), size_(other.size_), path_(std::move(other.path_)), label_(std::move(other.label_)) {
  other.fd_ = -1;
}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    label_ = std::move(other.label_);
    other.fd_ = -1;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RegularFile::read_at(uint64_t offset, void* out, size_t size) const {
  if (offset > size_ || size > size_ - offset) {
    throw HostIoError(label_ + ": bytes [" + std::to_string(offset) + ", +" + std::to_string(size) +
                      ") are outside the file (" + std::to_string(size_) + " bytes)");
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, static_cast<uint8_t*>(out) + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw HostIoError(label_ + ": read failed: " + errno_text(errno));
    if (n == 0) {
      throw HostIoError(label_ + ": the file shrank while being read (ended at byte " + std::to_string(offset + done) +
                        " of " + std::to_string(size_) + ")");
    }
    done += static_cast<size_t>(n);
  }
}

std::string RegularFile::read_all() const {
  std::string bytes(static_cast<size_t>(size_), '\0');
  read_at(0, bytes.data(), bytes.size());
  char extra = 0;
  ssize_t n = 0;
  do {
    n = ::pread(fd_, &extra, 1, static_cast<off_t>(size_));
  } while (n < 0 && errno == EINTR);
  if (n > 0) throw HostIoError(label_ + ": the file grew while being read (beyond " + std::to_string(size_) + " bytes)");
  return bytes;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  return RegularFile::open(path, max_bytes, what).read_all();
}

// ---- JSON ---------------------------------------------------------------------------------------

json parse_json(std::string_view text, const std::string& source, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw HostIoError(source + ": " + std::to_string(text.size()) + " bytes of JSON, above the limit of " +
                      std::to_string(limits.max_bytes) + " bytes");
  }
  const size_t deep = too_deep_at(text, limits.max_depth);
  if (deep != std::string_view::npos) {
    throw HostIoError(source + ": JSON nested deeper than " + std::to_string(limits.max_depth) + " levels at " +
                      text_position(text, deep));
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    const size_t byte = e.byte > 0 ? static_cast<size_t>(e.byte - 1) : 0;
    throw HostIoError(source + ": not valid JSON at " + text_position(text, byte) + ": " + parse_reason(e.what()));
  } catch (const json::exception& e) {
    throw HostIoError(source + ": not valid JSON: " + parse_reason(e.what()));
  }
}

json read_json_file(const std::string& path, const JsonLimits& limits, const std::string& what) {
  const std::string text = read_regular_file(path, limits.max_bytes, what);
  return parse_json(text, labelled(what, path), limits);
}

const char* json_type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "discarded";
  }
  return "?";
}

std::string json_excerpt(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

// ---- Paths --------------------------------------------------------------------------------------

std::string resolve_inside(const std::string& folder, const std::string& relative, bool allow_outside,
                           const std::string& what, const std::string& allow_flag) {
  const std::string entry = what + " '" + relative + "'";
  const std::string hint = " (pass " + allow_flag + " if the folder is trusted)";
  if (relative.empty()) throw HostIoError(what + ": empty path");
  if (relative.find('\0') != std::string::npos) throw HostIoError(entry + ": path contains a NUL byte");
  const fs::path rel(relative);
  if (!allow_outside) {
    if (rel.is_absolute()) {
      throw HostIoError(entry + " is an absolute path; paths in a model file must be relative to its folder" + hint);
    }
    const fs::path normal = rel.lexically_normal();
    if (!normal.empty() && *normal.begin() == "..") {
      throw HostIoError(entry + " leaves the model's folder" + hint);
    }
  }
  const fs::path base_dir = folder.empty() ? fs::path(".") : fs::path(folder);
  const fs::path candidate = rel.is_absolute() ? rel : base_dir / rel;
  std::error_code ec;
  const fs::path real = fs::canonical(candidate, ec);
  if (ec) throw HostIoError(entry + ": '" + candidate.string() + "' does not exist (" + ec.message() + ")");
  if (allow_outside) return real.string();
  const fs::path base = fs::canonical(base_dir, ec);
  if (ec) throw HostIoError(what + ": the model folder '" + base_dir.string() + "' cannot be resolved (" + ec.message() + ")");
  const std::string b = base.string(), r = real.string();
  const auto within = [&r](const std::string& root) {
    return r == root || (r.size() > root.size() && r.compare(0, root.size(), root) == 0 &&
                         (root.back() == '/' || r[root.size()] == '/'));
  };
  // A Hugging Face hub cache snapshot (<cache>/models--org--name/snapshots/<revision>/) holds
  // symlinks into its repository's content store (<cache>/models--org--name/blobs/): those stay
  // inside the downloaded repository, so they are allowed, and nothing else outside the folder is.
  bool in_hub_blobs = false;
  if (base.has_parent_path() && base.parent_path().filename() == "snapshots") {
    const fs::path repo = base.parent_path().parent_path();
    if (repo.filename().string().rfind("models--", 0) == 0) in_hub_blobs = within((repo / "blobs").string());
  }
  if (!within(b) && !in_hub_blobs) {
    throw HostIoError(entry + " leaves the model's folder: it resolves to '" + r + "', outside '" + b + "'" + hint);
  }
  return r;
}

// ---- Output -------------------------------------------------------------------------------------

void refuse_same_file(const std::string& path, const std::string& input, const std::string& what) {
  struct stat out {}, in {};
  if (::stat(path.c_str(), &out) != 0 || ::stat(input.c_str(), &in) != 0) return;
  if (same_file(out, static_cast<uint64_t>(in.st_dev), static_cast<uint64_t>(in.st_ino))) {
    throw HostIoError(labelled(what, path) + ": is the same file as the input " + input + "; choose another output");
  }
}

AtomicFile::AtomicFile(const std::string& path, const std::string& what, const std::vector<std::string>& inputs)
    : path_(path), target_(path), label_(labelled(what, path)), inputs_(inputs) {
  if (path.empty()) throw HostIoError((what.empty() ? std::string("output") : what) + ": empty path");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // Write through the link, as a plain open() would: replace its target, keep the link.
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);
    if (!ec) target_ = real.string();
  }
  check_destination();
  const fs::path target(target_);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string name = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) {
    throw HostIoError(label_ + ": cannot create a temporary file in '" + dir.string() + "': " + errno_text(errno));
  }
  temp_path_ = name;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFile::check_destination() const {
  struct stat st {};
  if (::stat(target_.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw HostIoError(label_ + ": cannot stat: " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw HostIoError(label_ + ": not a regular file (" + file_kind_name(st.st_mode) + "); outputs are written as regular files");
  }
  for (const std::string& input : inputs_) {
    struct stat in {};
    if (::stat(input.c_str(), &in) == 0 &&
        same_file(st, static_cast<uint64_t>(in.st_dev), static_cast<uint64_t>(in.st_ino))) {
      throw HostIoError(label_ + ": is the same file as the input " + input + "; choose another output");
    }
  }
  if (const ReadLog* log = ReadLog::active()) {
    for (const FileId& f : log->files()) {
      if (same_file(st, f.device, f.inode)) {
        throw HostIoError(label_ + ": is the same file as the input " + f.path + "; choose another output");
      }
    }
  }
}

void AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw HostIoError(label_ + ": write after commit");
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, static_cast<const uint8_t*>(data) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw HostIoError(label_ + ": writing failed: " + errno_text(n < 0 ? errno : EIO));
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw HostIoError(label_ + ": committed twice");
  check_destination();
  struct stat st {};
  mode_t mode = 0;
  if (::stat(target_.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);  // the only way to read it; restored at once
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  if (::fchmod(fd_, mode) != 0) throw HostIoError(label_ + ": cannot set the file mode: " + errno_text(errno));
  if (::fsync(fd_) != 0) throw HostIoError(label_ + ": fsync failed: " + errno_text(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw HostIoError(label_ + ": writing failed: " + errno_text(errno));
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    throw HostIoError(label_ + ": cannot rename the temporary file over it: " + errno_text(errno));
  }
  committed_ = true;
  // The rename is durable once the folder is synced; a failure here loses no data, so it is not an error.
  const fs::path target(target_);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomically(const std::string& path, const void* data, size_t size, const std::string& what,
                           const std::vector<std::string>& inputs) {
  AtomicFile file(path, what, inputs);
  file.write(data, size);
  file.commit();
}

}  // namespace ember::tools
