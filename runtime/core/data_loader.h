// DataLoader: where program bytes come from. Program::load asks for the header, the FlatBuffer and
// each segment separately, so an mmap loader maps weights zero-copy while a file loader reads them.
// Loaders are used at load time only (they may allocate then). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/freeable_buffer.h"
#include "runtime/core/status.h"

namespace ember {

class DataLoader {
 public:
  virtual ~DataLoader() = default;
  virtual uint64_t size() const = 0;
  // Bytes [offset, offset + size), aligned to `alignment` (a power of two <= 65536). InvalidArgument
  // when the range is outside the data; OutOfMemory / NotFound on I/O failure.
  virtual Result<FreeableBuffer> load(uint64_t offset, size_t size, size_t alignment) = 0;
  // True when load() returns views of memory that is already resident or mapped (no copy).
  virtual bool is_zero_copy() const = 0;
};

// Serves views of a caller-owned buffer (which must outlive every returned FreeableBuffer). A range
// whose address is not aligned as asked is copied.
class BufferDataLoader final : public DataLoader {
 public:
  BufferDataLoader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  uint64_t size() const override { return size_; }
  Result<FreeableBuffer> load(uint64_t offset, size_t size, size_t alignment) override;
  bool is_zero_copy() const override { return true; }

 private:
  const uint8_t* data_;
  size_t size_;
};

// What kind of file a stat() st_mode describes, for "not a regular file (FIFO)" messages:
// "regular file", "directory", "FIFO", "character device", "block device", "socket",
// "symbolic link" or "unknown file type". Shared with the host tools (tools/common/host_io).
const char* file_kind_name(uint32_t st_mode);

// Reads with pread into aligned heap buffers (platform_aligned_alloc).
class FileDataLoader final : public DataLoader {
 public:
  static Result<FileDataLoader> open(const char* path, ErrorContext* ctx = nullptr);
  FileDataLoader(FileDataLoader&& other) noexcept;
  FileDataLoader(const FileDataLoader&) = delete;
  ~FileDataLoader() override;
  uint64_t size() const override { return size_; }
  Result<FreeableBuffer> load(uint64_t offset, size_t size, size_t alignment) override;
  bool is_zero_copy() const override { return false; }

 private:
  FileDataLoader(int fd, uint64_t size) : fd_(fd), size_(size) {}
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Maps the whole file read-only once; load() returns views into the mapping. The mapping lives
// until the loader and every buffer it returned are gone.
class MmapDataLoader final : public DataLoader {
 public:
  static Result<MmapDataLoader> open(const char* path, ErrorContext* ctx = nullptr);
  MmapDataLoader(MmapDataLoader&& other) noexcept;
  MmapDataLoader(const MmapDataLoader&) = delete;
  ~MmapDataLoader() override;
  uint64_t size() const override { return size_; }
  Result<FreeableBuffer> load(uint64_t offset, size_t size, size_t alignment) override;
  bool is_zero_copy() const override { return true; }

 private:
  struct Mapping;
  explicit MmapDataLoader(Mapping* mapping, uint64_t size) : mapping_(mapping), size_(size) {}
  Mapping* mapping_ = nullptr;  // refcounted: buffers keep it alive
  uint64_t size_ = 0;
};

}  // namespace ember
