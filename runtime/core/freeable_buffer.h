// FreeableBuffer: bytes that may need releasing (a heap copy, an mmap view, or borrowed memory that
// needs nothing). Move-only; the release function runs once, in the destructor or free().
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

class FreeableBuffer {
 public:
  using FreeFn = void (*)(void* context, const void* data, size_t size);

  FreeableBuffer() = default;
  FreeableBuffer(const void* data, size_t size, FreeFn free_fn = nullptr, void* context = nullptr)
      : data_(data), size_(size), free_fn_(free_fn), context_(context) {}
  FreeableBuffer(FreeableBuffer&& other) noexcept { *this = static_cast<FreeableBuffer&&>(other); }
  FreeableBuffer& operator=(FreeableBuffer&& other) noexcept {
    if (this != &other) {
      free();
      data_ = other.data_;
      size_ = other.size_;
      free_fn_ = other.free_fn_;
      context_ = other.context_;
      other.data_ = nullptr;
      other.size_ = 0;
      other.free_fn_ = nullptr;
    }
    return *this;
  }
  FreeableBuffer(const FreeableBuffer&) = delete;
  FreeableBuffer& operator=(const FreeableBuffer&) = delete;
  ~FreeableBuffer() { free(); }

  void free() {
    if (free_fn_ != nullptr) free_fn_(context_, data_, size_);
    free_fn_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }
  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  const void* data_ = nullptr;
  size_t size_ = 0;
  FreeFn free_fn_ = nullptr;
  void* context_ = nullptr;
};

}  // namespace ember
