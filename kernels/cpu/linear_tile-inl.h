// The f32 linear micro-kernel and tile loop (C = x w^T + bias, w rows K-contiguous) of gemm.cc
// (cpu::linear).
// Include after hwy/highway.h and hwy_util-inl.h, inside no namespace.
//
// A micro-tile of kRows x rows by kCols w rows keeps kRows * kCols vector dot products along K
// (lane-wise FMA chains over K in vector steps, a zero-filled last step), reduced across lanes at
// the end, then + bias. Every output element is computed by that one sequence whichever micro-tile
// shape computes it.
#if defined(EMBER_KERNELS_CPU_LINEAR_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_CPU_LINEAR_TILE_INL_H_
#undef EMBER_KERNELS_CPU_LINEAR_TILE_INL_H_
#else
#define EMBER_KERNELS_CPU_LINEAR_TILE_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/cpu/hwy_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <int kRows, int kCols>
HWY_INLINE void LinearMicro(const float* HWY_RESTRICT x, int64_t ldx, const float* HWY_RESTRICT w,
                            int64_t ldw, const float* bias, float* HWY_RESTRICT c, int64_t ldc,
                            int64_t k_count) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  V acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r)
    for (int q = 0; q < kCols; ++q) acc[r][q] = hn::Zero(d);
  size_t k = 0;
  const size_t kn = static_cast<size_t>(k_count);
  for (; k + lanes <= kn; k += lanes) {
    V wv[kCols];
    for (int q = 0; q < kCols; ++q) wv[q] = hn::LoadU(d, w + q * ldw + k);
    for (int r = 0; r < kRows; ++r) {
      const V xv = hn::LoadU(d, x + r * ldx + k);
      for (int q = 0; q < kCols; ++q) acc[r][q] = hn::MulAdd(xv, wv[q], acc[r][q]);
    }
  }
  if (k < kn) {
    V wv[kCols];
    for (int q = 0; q < kCols; ++q) wv[q] = LoadTail(d, w + q * ldw + k, kn - k);
    for (int r = 0; r < kRows; ++r) {
      const V xv = LoadTail(d, x + r * ldx + k, kn - k);
      for (int q = 0; q < kCols; ++q) acc[r][q] = hn::MulAdd(xv, wv[q], acc[r][q]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < kCols; ++q) {
      float v = hn::GetLane(hn::SumOfLanes(d, acc[r][q]));
      if (bias != nullptr) v += bias[q];
      c[r * ldc + q] = v;
    }
  }
}

inline void LinearTile(const float* x, int64_t ldx, const float* w, int64_t ldw, const float* bias,
                float* c, int64_t ldc, int64_t k_count, int64_t m_begin, int64_t m_end,
                int64_t n_begin, int64_t n_end) {
  constexpr int kR = 4, kC = 4;
  int64_t j = n_begin;
  for (; j + kC <= n_end; j += kC) {
    const float* wj = w + j * ldw;
    const float* bj = bias != nullptr ? bias + j : nullptr;
    int64_t i = m_begin;
    for (; i + kR <= m_end; i += kR) {
      LinearMicro<kR, kC>(x + i * ldx, ldx, wj, ldw, bj, c + i * ldc + j, ldc, k_count);
    }
    for (; i < m_end; ++i) {
      LinearMicro<1, kC>(x + i * ldx, ldx, wj, ldw, bj, c + i * ldc + j, ldc, k_count);
    }
  }
  for (; j < n_end; ++j) {
    const float* wj = w + j * ldw;
    const float* bj = bias != nullptr ? bias + j : nullptr;
    int64_t i = m_begin;
    for (; i + kR <= m_end; i += kR) {
      LinearMicro<kR, 1>(x + i * ldx, ldx, wj, ldw, bj, c + i * ldc + j, ldc, k_count);
    }
    for (; i < m_end; ++i) {
      LinearMicro<1, 1>(x + i * ldx, ldx, wj, ldw, bj, c + i * ldc + j, ldc, k_count);
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
