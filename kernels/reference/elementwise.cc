// Elementwise reference kernels (f32). Each value is computed in double and rounded once to f32;
// for the four arithmetic ops that equals the correctly rounded f32 result. Also where (any dtype of
// 8 bits or more, bytes moved) and equal (compared by value).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"

namespace ember::kernels::reference {
namespace {

// f32 binary with numpy broadcasting, computed in double and rounded once.
template <typename Fn>
void binary(const TensorView* inputs, TensorView* outputs, Fn fn) {
  internal::binary_typed<float, float>(inputs, outputs, [&](float x, float y) {
    return static_cast<float>(fn(static_cast<double>(x), static_cast<double>(y)));
  });
}

template <typename Fn>
void unary(const TensorView* inputs, TensorView* outputs, Fn fn) {
  const float* px = inputs[0].data_as<const float>();
  float* po = outputs[0].data_as<float>();
  const int64_t n = internal::numel(outputs[0]);
  for (int64_t i = 0; i < n; ++i) po[i] = static_cast<float>(fn(static_cast<double>(px[i])));
}

}  // namespace

void add(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  binary(inputs, outputs, [](double x, double y) { return x + y; });
}

void sub(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  binary(inputs, outputs, [](double x, double y) { return x - y; });
}

void mul(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  binary(inputs, outputs, [](double x, double y) { return x * y; });
}

void div(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  binary(inputs, outputs, [](double x, double y) { return x / y; });
}

void relu(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
          size_t) {
  // NaN propagates (x < 0 is false for NaN), as in PyTorch.
  unary(inputs, outputs, [](double x) { return x < 0.0 ? 0.0 : x; });
}

void gelu(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
          TensorView* outputs, size_t) {
  if (attrs.gelu_approx == GeluApprox::Tanh) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const double k = std::sqrt(2.0 / 3.14159265358979323846);
    unary(inputs, outputs,
          [k](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); });
  } else {
    // 0.5 x (1 + erf(x / sqrt(2)))
    unary(inputs, outputs,
          [](double x) { return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440)); });
  }
}

void silu(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
          size_t) {
  unary(inputs, outputs, [](double x) { return x / (1.0 + std::exp(-x)); });
}

void sigmoid(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
             size_t) {
  unary(inputs, outputs, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}

void tanh(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
          size_t) {
  unary(inputs, outputs, [](double x) { return std::tanh(x); });
}

// min(max(x, lo), hi); NaN propagates (both comparisons are false for NaN).
void clip(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
          TensorView* outputs, size_t) {
  const double lo = attrs.clip_min, hi = attrs.clip_max;
  unary(inputs, outputs, [lo, hi](double x) {
    const double y = x < lo ? lo : x;
    return y > hi ? hi : y;
  });
}

// max(0, min(1, alpha x + beta)); NaN propagates.
void hard_sigmoid(KernelContext&, const OpAttrs& attrs, const TensorView* inputs, size_t,
                  TensorView* outputs, size_t) {
  const double alpha = attrs.alpha, beta = attrs.beta;
  unary(inputs, outputs, [alpha, beta](double x) {
    const double y = alpha * x + beta;
    return y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
  });
}

// x * relu6(x + 3) / 6; NaN propagates.
void hard_swish(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t,
                TensorView* outputs, size_t) {
  unary(inputs, outputs, [](double x) {
    const double r = x + 3.0;
    return x * (r < 0.0 ? 0.0 : (r > 6.0 ? 6.0 : r)) / 6.0;
  });
}

void erf(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  unary(inputs, outputs, [](double x) { return std::erf(x); });
}

// Negative inputs give NaN.
void sqrt(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
          size_t) {
  unary(inputs, outputs, [](double x) { return std::sqrt(x); });
}

void exp(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  unary(inputs, outputs, [](double x) { return std::exp(x); });
}

void neg(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  unary(inputs, outputs, [](double x) { return -x; });
}

// x ** y with C's pow rules (pow(x, 0) = 1 even for NaN x; negative x with a non-integer y is NaN).
void pow(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
         size_t) {
  binary(inputs, outputs, [](double x, double y) { return std::pow(x, y); });
}

// out = cond ? x : y, numpy broadcasting over all three; bytes are copied, never interpreted.
void where(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
           size_t) {
  const TensorView& cond = inputs[0];
  const TensorView& x = inputs[1];
  const TensorView& y = inputs[2];
  TensorView& out = outputs[0];
  const size_t elem = internal::element_size(out.dtype);
  int64_t sc[kMaxRank], sx[kMaxRank], sy[kMaxRank];
  internal::broadcast_strides(cond.dims, cond.rank, out.rank, sc);
  internal::broadcast_strides(x.dims, x.rank, out.rank, sx);
  internal::broadcast_strides(y.dims, y.rank, out.rank, sy);
  internal::Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  it.strides[0] = sc;
  it.strides[1] = sx;
  it.strides[2] = sy;
  const uint8_t* pc = cond.data_as<const uint8_t>();
  const uint8_t* px = x.data_as<const uint8_t>();
  const uint8_t* py = y.data_as<const uint8_t>();
  uint8_t* po = out.data_as<uint8_t>();
  const int64_t n = internal::numel(out);
  for (int64_t i = 0; i < n; ++i, it.next()) {
    const uint8_t* src = pc[it.offset[0]] != 0 ? px + static_cast<size_t>(it.offset[1]) * elem
                                               : py + static_cast<size_t>(it.offset[2]) * elem;
    std::memmove(po + static_cast<size_t>(i) * elem, src, elem);
  }
}

// a == b by value (NaN != NaN, -0 == +0), numpy broadcasting, bool output.
void equal(KernelContext&, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs,
           size_t) {
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  TensorView& out = outputs[0];
  int64_t sa[kMaxRank], sb[kMaxRank];
  internal::broadcast_strides(a.dims, a.rank, out.rank, sa);
  internal::broadcast_strides(b.dims, b.rank, out.rank, sb);
  internal::Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  it.strides[0] = sa;
  it.strides[1] = sb;
  uint8_t* po = out.data_as<uint8_t>();
  const int64_t n = internal::numel(out);
  for (int64_t i = 0; i < n; ++i, it.next()) {
    const internal::Scalar x = internal::load_scalar(a.dtype, a.data, it.offset[0]);
    const internal::Scalar y = internal::load_scalar(b.dtype, b.data, it.offset[1]);
    po[i] = (x.is_float ? x.f == y.f : x.i == y.i) ? 1 : 0;
  }
}

}  // namespace ember::kernels::reference
