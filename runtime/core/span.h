// Span<T>: a borrowed, non-owning range (C++17 stand-in for std::span).
#pragma once

#include <cstddef>
#include <type_traits>

namespace ember {

template <typename T>
class Span {
 public:
  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  template <size_t N>
  constexpr Span(T (&array)[N]) : data_(array), size_(N) {}
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T>>>
  constexpr Span(Span<U> other) : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }
  constexpr Span subspan(size_t offset, size_t count) const { return Span(data_ + offset, count); }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ember
