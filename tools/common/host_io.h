// File input and output for the host tools (exporter, runner, ember_capabilities): every file they
// read or write goes through here, so hostile or careless input gets one clear error instead of a
// crash, a hang or a read of something that should not be read.
//
//  - Reads take regular files only, opened without blocking (a FIFO or a device is refused by its
//    kind, never waited on), at most `max_bytes` long, read exactly as long as fstat said.
//  - JSON is parsed with a size and a nesting-depth limit checked before the JSON library sees the
//    text (deep nesting would otherwise recurse in its copy / dump code), and errors name the
//    source, line, column and byte.
//  - Paths named inside model files are resolved (symlinks followed, ".." collapsed) and must stay
//    inside the model's folder unless the caller trusts the folder.
//  - Outputs are written to a temporary file beside the destination, fsynced and renamed over it:
//    a failed write never leaves a partial or truncated file, and an output that is the same file
//    (device and inode) as an input read through this library, or one passed explicitly, is
//    refused.
//
// Host code: errors are HostIoError (a std::runtime_error) whose message is one line naming the
// path (and the field / flag where known). Not thread-safe beyond what each function says: the
// ReadLog is per thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember::tools {

class HostIoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The identity of a file read: device and inode (path only for messages).
struct FileId {
  std::string path;
  uint64_t device = 0, inode = 0;
};

// While one is alive, the files this library opens for reading on this thread are noted in it (the
// innermost one when they nest), so that an output can be refused when it would replace one of
// them. Not copyable; create it on the stack around a tool's work.
class ReadLog {
 public:
  ReadLog();
  ~ReadLog();
  ReadLog(const ReadLog&) = delete;
  ReadLog& operator=(const ReadLog&) = delete;

  const std::vector<FileId>& files() const { return files_; }
  // Notes a file read by other means (the runtime's DataLoader); a path that cannot be stat'ed is
  // ignored (the reader reports it).
  void add_path(const std::string& path);
  void add(const std::string& path, uint64_t device, uint64_t inode);

  // The innermost active log of this thread, or nullptr.
  static ReadLog* active();

 private:
  std::vector<FileId> files_;
  ReadLog* previous_ = nullptr;
};

// An open regular file (read-only, O_CLOEXEC | O_NONBLOCK) and its size at open time. Owns the fd.
class RegularFile {
 public:
  // Throws HostIoError "<what> <path>: cannot open: <errno text>", "...: not a regular file (FIFO)"
  // or "...: 5000 bytes, above the limit of 4096 bytes". `what` (a flag or a role, may be empty)
  // prefixes the path in messages. Noted in the active ReadLog.
  static RegularFile open(const std::string& path, uint64_t max_bytes, const std::string& what = "");
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // "<what> <path>" as messages name the file.
  const std::string& label() const { return label_; }

  // Reads the whole file: exactly size() bytes. Throws when it ends early or is longer (the file
  // changed while being read).
  std::string read_all() const;
  // Reads [offset, offset + size) with pread; the range must lie inside size() (checked without
  // overflow). Throws naming the range and the file size.
  void read_at(uint64_t offset, void* out, size_t size) const;

 private:
  RegularFile() = default;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_, label_;
};

// RegularFile::open(path, max_bytes, what).read_all().
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what = "");

// ---- JSON ---------------------------------------------------------------------------------------

struct JsonLimits {
  uint64_t max_bytes = uint64_t(128) << 20;  // a large tokenizer.json is ~20 MiB
  int max_depth = 512;                       // arrays and objects inside each other
};

// Parses `text`; `source` (a path, or "tokenizer.json" for text given in memory) names it in
// errors: "<source>: JSON nested deeper than 512 levels at line 1, column 513 (byte 512)",
// "<source>: not valid JSON at line 3, column 7 (byte 40): syntax error while parsing object - ...",
// "<source>: 200 bytes of JSON, above the limit of 100 bytes". Never recurses on the input's depth.
nlohmann::json parse_json(std::string_view text, const std::string& source, const JsonLimits& limits = {});
// read_regular_file(path, limits.max_bytes, what) + parse_json(text, "<what> <path>", limits).
nlohmann::json read_json_file(const std::string& path, const JsonLimits& limits = {}, const std::string& what = "");

// "null", "boolean", "integer", "unsigned integer" -> "integer", "number", "string", "array", "object".
const char* json_type_name(const nlohmann::json& value);
// A short JSON rendering of `value` for messages (at most ~80 characters, shallow).
std::string json_excerpt(const nlohmann::json& value);

// ---- Paths --------------------------------------------------------------------------------------

// `relative` (a name found inside a model file, e.g. an ONNX external-data location or a shard of
// a safetensors index) resolved against `folder`: symlinks followed, ".." collapsed. Unless
// `allow_outside`, the result must be `folder`'s real path or below it, and `relative` must not be
// absolute. Throws HostIoError naming `what` (e.g. "tensor 'w': external data"), the entry, what it
// resolves to and `allow_flag` (the option that would allow it), or "does not exist" when it
// cannot be resolved. Returns the resolved path. One layout is recognised: in a Hugging Face hub
// cache snapshot (.../models--org--name/snapshots/<revision>), entries may resolve into that
// repository's .../models--org--name/blobs/ (where the hub keeps the files the snapshot links to).
std::string resolve_inside(const std::string& folder, const std::string& relative, bool allow_outside,
                           const std::string& what, const std::string& allow_flag);

// ---- Output -------------------------------------------------------------------------------------

// A file written atomically: the bytes go to a temporary file in the destination's folder
// ("<folder>/.<name>.XXXXXX"), and commit() fsyncs it, gives it the mode a new file would get (or
// the replaced file's), and renames it over the destination (a symlinked destination is replaced
// at its target). Destroyed without commit(), the temporary file is removed. The destination must
// not exist or be a regular file, and must not be the same file as any in `inputs` or in the
// active ReadLog (checked when opening and again at commit).
class AtomicFile {
 public:
  // `what` (a flag such as "-o", may be empty) prefixes the destination in messages.
  AtomicFile(const std::string& path, const std::string& what = "", const std::vector<std::string>& inputs = {});
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();
  const std::string& temp_path() const { return temp_path_; }

 private:
  void check_destination() const;
  std::string path_, target_, label_, temp_path_;
  std::vector<std::string> inputs_;
  int fd_ = -1;
  bool committed_ = false;
};

// AtomicFile(path, what, inputs) + write + commit.
void write_file_atomically(const std::string& path, const void* data, size_t size, const std::string& what = "",
                           const std::vector<std::string>& inputs = {});

// Throws HostIoError "<what> <path>: is the same file as the input <input>" when `path` exists and
// is `input` (same device and inode: hard links and other spellings included).
void refuse_same_file(const std::string& path, const std::string& input, const std::string& what = "");

}  // namespace ember::tools
