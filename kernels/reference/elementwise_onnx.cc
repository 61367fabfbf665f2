// Elementwise reference kernels added for real-world ONNX models (issue 17): parameterized
// activations, unary math, comparisons, logical ops and binary max / min. f32 values are computed in
// double and rounded once to f32; integer max / min / abs / neg are exact (abs and neg wrap at the
// type's minimum, as two's complement and onnxruntime do). NaN / ±Inf / ±0 rules: README.md.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"

namespace ember::kernels::reference {
namespace {

// f32 unary in double, rounded once.
template <typename Fn>
void unary_f32(const TensorView* inputs, TensorView* outputs, Fn fn) {
  const float* px = inputs[0].data_as<const float>();
  float* po = outputs[0].data_as<float>();
  const int64_t n = internal::numel(outputs[0]);
  for (int64_t i = 0; i < n; ++i) po[i] = static_cast<float>(fn(static_cast<double>(px[i])));
}

// Calls fn.template operator()<T>() for the element type of `type` (f32, i32, i64; the types these
// kernels are registered for).
template <typename Fn>
void by_dtype(ScalarType type, Fn fn) {
  switch (type) {
    case ScalarType::F32: fn(float{}); break;
    case ScalarType::I32: fn(int32_t{}); break;
    case ScalarType::I64: fn(int64_t{}); break;
    default: break;  // not registered
  }
}

// Comparison of two values of one dtype, bool output; NaN compares false.
template <typename Cmp>
void compare(const TensorView* inputs, TensorView* outputs, Cmp cmp) {
  by_dtype(inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    internal::binary_typed<T, uint8_t>(inputs, outputs, [&](T x, T y) { return cmp(x, y) ? uint8_t{1} : uint8_t{0}; });
  });
}

// Bool inputs are bytes; any nonzero byte is true (Cast's rule), the output 0 or 1.
template <typename Fn>
void logical(const TensorView* inputs, TensorView* outputs, Fn fn) {
  internal::binary_typed<uint8_t, uint8_t>(inputs, outputs,
                                 [&](uint8_t x, uint8_t y) { return fn(x != 0, y != 0) ? uint8_t{1} : uint8_t{0}; });
}

// Integer negation modulo 2^bits (no overflow UB): -INT_MIN = INT_MIN, as onnxruntime.
template <typename T>
T wrap_neg(T v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U{0} - static_cast<U>(v));
}

}  // namespace

// x < 0 ? alpha x : x. NaN and -0 pass through.
void leaky_relu(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs,
                size_t) {
  const double alpha = attrs.alpha;
  unary_f32(inputs, outputs, [alpha](double x) { return x < 0.0 ? alpha * x : x; });
}

// x < 0 ? slope x : x with the slope broadcast to x (its shape function checked that it does).
void prelu(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  internal::binary_typed<float, float>(inputs, outputs, [](float x, float s) {
    return x < 0.0f ? static_cast<float>(static_cast<double>(s) * static_cast<double>(x)) : x;
  });
}

// x < 0 ? alpha (exp(x) - 1) : x, with expm1 (exact near 0).
void elu(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const double alpha = attrs.alpha;
  unary_f32(inputs, outputs, [alpha](double x) { return x < 0.0 ? alpha * std::expm1(x) : x; });
}

// gamma (x <= 0 ? alpha (exp(x) - 1) : x); gamma is attrs.beta. selu(-0) = +0, as torch and
// onnxruntime (+ 0.0 turns the -0 of gamma x into +0 and changes nothing else).
void selu(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const double alpha = attrs.alpha, gamma = attrs.beta;
  unary_f32(inputs, outputs,
            [alpha, gamma](double x) { return x < 0.0 ? gamma * alpha * std::expm1(x) : gamma * x + 0.0; });
}

// log(1 + exp(x)) without overflow: x + log1p(exp(-x)) for x > 0.
void softplus(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); });
}

// log(±0) = -inf, log(x < 0) = NaN.
void log(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return std::log(x); });
}

// f32: the sign bit cleared (NaN too); i32 / i64: |x|, wrapping at the minimum.
void abs(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  by_dtype(inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* px = inputs[0].data_as<const T>();
    T* po = outputs[0].data_as<T>();
    const int64_t n = internal::numel(outputs[0]);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        po[i] = std::fabs(px[i]);
      } else {
        po[i] = px[i] < 0 ? wrap_neg(px[i]) : px[i];
      }
    }
  });
}

// neg on i32 / i64 (f32 is `neg` in elementwise.cc): -x modulo 2^bits.
void neg_int(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  by_dtype(inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_floating_point_v<T>) {
      const T* px = inputs[0].data_as<const T>();
      T* po = outputs[0].data_as<T>();
      const int64_t n = internal::numel(outputs[0]);
      for (int64_t i = 0; i < n; ++i) po[i] = wrap_neg(px[i]);
    }
  });
}

// 1 / x: 1 / ±0 = ±inf.
void reciprocal(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return 1.0 / x; });
}

void floor(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return std::floor(x); });
}

void ceil(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return std::ceil(x); });
}

// Half to even (ONNX Round): nearbyint in the default rounding mode; the sign of a zero is kept.
void round(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return std::nearbyint(x); });
}

void sin(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return std::sin(x); });
}

void cos(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  unary_f32(inputs, outputs, [](double x) { return std::cos(x); });
}

void greater(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  compare(inputs, outputs, [](auto x, auto y) { return x > y; });
}

void less(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  compare(inputs, outputs, [](auto x, auto y) { return x < y; });
}

void greater_equal(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
                   size_t) {
  compare(inputs, outputs, [](auto x, auto y) { return x >= y; });
}

void less_equal(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  compare(inputs, outputs, [](auto x, auto y) { return x <= y; });
}

void logical_and(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  logical(inputs, outputs, [](bool x, bool y) { return x && y; });
}

void logical_or(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  logical(inputs, outputs, [](bool x, bool y) { return x || y; });
}

void logical_xor(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  logical(inputs, outputs, [](bool x, bool y) { return x != y; });
}

void logical_not(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const uint8_t* px = inputs[0].data_as<const uint8_t>();
  uint8_t* po = outputs[0].data_as<uint8_t>();
  const int64_t n = internal::numel(outputs[0]);
  for (int64_t i = 0; i < n; ++i) po[i] = px[i] != 0 ? 0 : 1;
}

// NaN if either is NaN (a's NaN first), else a > b ? a : b: a tie (+0 and -0) gives b, as onnxruntime.
void max(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  by_dtype(inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    internal::binary_typed<T, T>(inputs, outputs, [](T a, T b) { return a != a ? a : (a > b ? a : b); });
  });
}

// NaN if either is NaN (a's NaN first), else a < b ? a : b: a tie gives b, as onnxruntime.
void min(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  by_dtype(inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    internal::binary_typed<T, T>(inputs, outputs, [](T a, T b) { return a != a ? a : (a < b ? a : b); });
  });
}

}  // namespace ember::kernels::reference
