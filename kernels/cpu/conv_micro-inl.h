// The conv micro-kernel shared by conv_gemm.cc (im2col GEMM) and conv_winograd.cc (the Winograd
// transforms' batched GEMM), per Highway target. Include after hwy_util-inl.h, inside no namespace.
#if defined(EMBER_KERNELS_CPU_CONV_MICRO_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_CPU_CONV_MICRO_INL_H_
#undef EMBER_KERNELS_CPU_CONV_MICRO_INL_H_
#else
#define EMBER_KERNELS_CPU_CONV_MICRO_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/cpu/hwy_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes (AVX-512's), whatever the target (SVE may have more): a GEMM panel (2 vectors) is
// at most kConvMaxNr columns, and the depthwise slack covers 4 vectors.
using ConvTag = hn::CappedTag<float, 16>;

#if HWY_TARGET <= HWY_AVX3
constexpr int kConvMr = 8;
#else
constexpr int kConvMr = 6;
#endif

// C[kRows x ncols] (+)= A[kRows x kc] * Bp[kc x kNv vectors]; ncols <= kNv * Lanes. `first`: start
// from 0, else from C; `bias` (rows' biases) and `clamp` ({out_min, out_max}, after the bias) only on
// the last reduction block.
template <int kRows, int kNv>
HWY_NOINLINE void ConvMicro(const float* HWY_RESTRICT a, int64_t lda, const float* HWY_RESTRICT bp,
                          int64_t kc, int64_t ldb, float* HWY_RESTRICT c, int64_t ldc, size_t ncols,
                          bool first, const float* bias, const float* clamp) {
  const ConvTag d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  V acc[kRows][kNv];
  const bool full = ncols == kNv * lanes;
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kNv; ++v) {
      if (first) {
        acc[r][v] = hn::Zero(d);
      } else {
        const size_t n = ncols > v * lanes ? ncols - v * lanes : 0;
        const float* src = c + r * ldc + v * lanes;
        acc[r][v] = full || n >= lanes ? hn::LoadU(d, src) : (n == 0 ? hn::Zero(d) : LoadTail(d, src, n));
      }
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    V b[kNv];
    for (int v = 0; v < kNv; ++v) b[v] = hn::LoadU(d, bp + k * ldb + v * lanes);
    for (int r = 0; r < kRows; ++r) {
      const V av = hn::Set(d, a[r * lda + k]);
      for (int v = 0; v < kNv; ++v) acc[r][v] = hn::MulAdd(av, b[v], acc[r][v]);
    }
  }
  const V lo = hn::Set(d, clamp != nullptr ? clamp[0] : 0.0f);
  const V hi = hn::Set(d, clamp != nullptr ? clamp[1] : 0.0f);
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kNv; ++v) {
      V x = acc[r][v];
      if (bias != nullptr) x = hn::Add(x, hn::Set(d, bias[r]));
      if (clamp != nullptr) x = ClampKeepNaN(x, lo, hi);
      const size_t n = ncols > v * lanes ? ncols - v * lanes : 0;
      float* dst = c + r * ldc + v * lanes;
      if (full || n >= lanes) {
        hn::StoreU(x, d, dst);
      } else if (n != 0) {
        StoreTail(d, x, dst, n);
      }
    }
  }
}

template <int kNv>
HWY_INLINE void ConvRows(int rows, const float* a, int64_t lda, const float* bp, int64_t kc, int64_t ldb,
                         float* c, int64_t ldc, size_t ncols, bool first, const float* bias,
                         const float* clamp) {
  switch (rows) {
#define EMBER_CONV_ROWS_CASE(R)                                                   \
  case R:                                                                         \
    if constexpr (R <= kConvMr) {                                                 \
      ConvMicro<R, kNv>(a, lda, bp, kc, ldb, c, ldc, ncols, first, bias, clamp);  \
    }                                                                             \
    break;
    EMBER_CONV_ROWS_CASE(1)
    EMBER_CONV_ROWS_CASE(2)
    EMBER_CONV_ROWS_CASE(3)
    EMBER_CONV_ROWS_CASE(4)
    EMBER_CONV_ROWS_CASE(5)
    EMBER_CONV_ROWS_CASE(6)
    EMBER_CONV_ROWS_CASE(7)
    EMBER_CONV_ROWS_CASE(8)
#undef EMBER_CONV_ROWS_CASE
    default: break;
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
