// Elementwise reference kernels (f32). Each value is computed in double and rounded once to f32;
// for the four arithmetic ops that equals the correctly rounded f32 result.
#include <cmath>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"

namespace ember::kernels::reference {
namespace {

template <typename Fn>
void binary(const TensorView* inputs, TensorView* outputs, Fn fn) {
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  TensorView& out = outputs[0];
  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* po = out.data_as<float>();
  int64_t sa[kMaxRank], sb[kMaxRank];
  internal::broadcast_strides(a.dims, a.rank, out.rank, sa);
  internal::broadcast_strides(b.dims, b.rank, out.rank, sb);
  internal::Odometer it;
  it.rank = out.rank;
  it.dims = out.dims;
  it.strides[0] = sa;
  it.strides[1] = sb;
  const int64_t n = internal::numel(out);
  for (int64_t i = 0; i < n; ++i, it.next()) {
    po[i] = static_cast<float>(
        fn(static_cast<double>(pa[it.offset[0]]), static_cast<double>(pb[it.offset[1]])));
  }
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

}  // namespace ember::kernels::reference
