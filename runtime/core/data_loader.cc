#include "runtime/core/data_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "runtime/platform/platform.h"

namespace ember {
namespace {

void free_aligned(void*, const void* data, size_t) { platform_aligned_free(const_cast<void*>(data)); }

bool range_ok(uint64_t offset, size_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

Result<FreeableBuffer> copy_aligned(const uint8_t* src, size_t size, size_t alignment) {
  void* copy = platform_aligned_alloc(alignment < 64 ? 64 : alignment, size);
  if (copy == nullptr) return EMBER_ERROR(Error::OutOfMemory, "allocating a load buffer");
  if (size) std::memcpy(copy, src, size);
  return FreeableBuffer(copy, size, free_aligned);
}

// Opens a regular file for reading. O_NONBLOCK: a FIFO's open() returns at once instead of waiting
// for a writer (and is then refused by the fstat check); reads of a regular file ignore the flag.
Status open_regular(const char* path, ErrorContext* ctx, int* out_fd, uint64_t* out_size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return EMBER_FAIL(ctx, Error::NotFound, "cannot open '%s': %s", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return EMBER_FAIL(ctx, Error::InvalidArgument, "cannot stat '%s': %s", path, std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return EMBER_FAIL(ctx, Error::InvalidArgument, "'%s' is not a regular file (%s)", path, file_kind_name(st.st_mode));
  }
  *out_fd = fd;
  *out_size = static_cast<uint64_t>(st.st_size);
  return Status::ok();
}

}  // namespace

const char* file_kind_name(uint32_t st_mode) {
  const mode_t mode = static_cast<mode_t>(st_mode);
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  return "unknown file type";
}

Result<FreeableBuffer> BufferDataLoader::load(uint64_t offset, size_t size, size_t alignment) {
  if (!range_ok(offset, size, size_)) return EMBER_ERROR(Error::InvalidArgument, "range outside buffer");
  const uint8_t* p = data_ + offset;
  if (alignment > 1 && reinterpret_cast<uintptr_t>(p) % alignment != 0) return copy_aligned(p, size, alignment);
  return FreeableBuffer(p, size);
}

Result<FileDataLoader> FileDataLoader::open(const char* path, ErrorContext* ctx) {
  int fd = -1;
  uint64_t size = 0;
  EMBER_RETURN_IF_ERROR(open_regular(path, ctx, &fd, &size));
  return FileDataLoader(fd, size);
}

FileDataLoader::FileDataLoader(FileDataLoader&& other) noexcept : fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

FileDataLoader::~FileDataLoader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<FreeableBuffer> FileDataLoader::load(uint64_t offset, size_t size, size_t alignment) {
  if (!range_ok(offset, size, size_)) return EMBER_ERROR(Error::InvalidArgument, "range outside file");
  void* buffer = platform_aligned_alloc(alignment < 64 ? 64 : alignment, size);
  if (buffer == nullptr) return EMBER_ERROR(Error::OutOfMemory, "allocating a load buffer");
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, static_cast<uint8_t*>(buffer) + done, size - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      platform_aligned_free(buffer);
      return EMBER_ERROR(Error::NotFound, "short read from program file");
    }
    done += static_cast<size_t>(n);
  }
  return FreeableBuffer(buffer, size, free_aligned);
}

struct MmapDataLoader::Mapping {
  void* base = nullptr;
  size_t size = 0;
  std::atomic<int> refs{1};
  void release() {
    if (refs.fetch_sub(1) == 1) {
      if (base != nullptr && size != 0) munmap(base, size);
      platform_aligned_free(this);
    }
  }
};

Result<MmapDataLoader> MmapDataLoader::open(const char* path, ErrorContext* ctx) {
  int fd = -1;
  uint64_t file_size = 0;
  EMBER_RETURN_IF_ERROR(open_regular(path, ctx, &fd, &file_size));
  if (file_size > SIZE_MAX) {
    ::close(fd);
    return EMBER_FAIL(ctx, Error::InvalidArgument, "'%s' is too large to map", path);
  }
  const size_t size = static_cast<size_t>(file_size);
  void* base = nullptr;
  if (size != 0) {
    base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      ::close(fd);
      return EMBER_FAIL(ctx, Error::OutOfMemory, "cannot map '%s': %s", path, std::strerror(errno));
    }
  }
  ::close(fd);
  void* storage = platform_aligned_alloc(alignof(Mapping), sizeof(Mapping));
  if (storage == nullptr) {
    if (base) munmap(base, size);
    return EMBER_FAIL(ctx, Error::OutOfMemory, "allocating the mapping record");
  }
  Mapping* mapping = new (storage) Mapping();
  mapping->base = base;
  mapping->size = size;
  return MmapDataLoader(mapping, size);
}

MmapDataLoader::MmapDataLoader(MmapDataLoader&& other) noexcept
    : mapping_(other.mapping_), size_(other.size_) {
  other.mapping_ = nullptr;
}

MmapDataLoader::~MmapDataLoader() {
  if (mapping_ != nullptr) mapping_->release();
}

Result<FreeableBuffer> MmapDataLoader::load(uint64_t offset, size_t size, size_t alignment) {
  if (!range_ok(offset, size, size_)) return EMBER_ERROR(Error::InvalidArgument, "range outside file");
  const uint8_t* p = static_cast<const uint8_t*>(mapping_->base) + offset;
  if (alignment > 1 && reinterpret_cast<uintptr_t>(p) % alignment != 0) return copy_aligned(p, size, alignment);
  mapping_->refs.fetch_add(1);
  return FreeableBuffer(p, size, [](void* context, const void*, size_t) {
    static_cast<Mapping*>(context)->release();
  }, mapping_);
}

}  // namespace ember
