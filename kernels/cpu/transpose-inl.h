// In-register transposes of an L x L block of floats (L = 16 with AVX-512, 8 with AVX2) and the raw
// vector helpers around them, per Highway target: linear_packed.cc's few-token path and conv_gemm.cc's
// small-map depthwise. Defined only on x86 AVX3 / AVX2 targets (EMBER_HAS_FEW_TRANSPOSE 1); other
// targets take the callers' other paths. Include after hwy/highway.h, inside no namespace.
#if defined(EMBER_KERNELS_CPU_TRANSPOSE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_CPU_TRANSPOSE_INL_H_
#undef EMBER_KERNELS_CPU_TRANSPOSE_INL_H_
#else
#define EMBER_KERNELS_CPU_TRANSPOSE_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

#undef EMBER_HAS_FEW_TRANSPOSE
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
#define EMBER_HAS_FEW_TRANSPOSE 1
#if HWY_TARGET <= HWY_AVX3
using FewV = __m512;
constexpr int64_t kFewL = 16;
HWY_INLINE FewV FewLoad(const float* p) { return _mm512_loadu_ps(p); }
HWY_INLINE FewV FewSet(float v) { return _mm512_set1_ps(v); }
HWY_INLINE FewV FewZero() { return _mm512_setzero_ps(); }
HWY_INLINE FewV FewFma(FewV a, FewV b, FewV c) { return _mm512_fmadd_ps(a, b, c); }
HWY_INLINE void FewStore(float* p, FewV v) { _mm512_storeu_ps(p, v); }
HWY_INLINE FewV FewAdd(FewV a, FewV b) { return _mm512_add_ps(a, b); }
// min(hi, max(lo, x)) with x86's operand rule (the second operand when either is NaN or both are
// zeros): x < lo ? lo : x, then > hi ? hi : x, NaN kept, as ClampKeepNaN.
HWY_INLINE FewV FewClampKeepNaN(FewV x, FewV lo, FewV hi) { return _mm512_min_ps(hi, _mm512_max_ps(lo, x)); }
// The first n (< 16) floats, zeros after; masked: nothing past p + n is touched.
HWY_INLINE FewV FewLoadN(const float* p, int64_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
HWY_INLINE void FewStoreN(float* p, FewV v, int64_t n) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
}
// rows[r] (r < 16) = w[r, k0 .. k0 + 16) -> col[j] lane r = w[r, k0 + j].
HWY_INLINE void FewTranspose(const FewV* rows, FewV* col) {
  FewV t[16], q[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  // q[4i + j], 128-bit block b: rows 4i..4i+3 at column 4b + j.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    q[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    q[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    q[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    q[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // 4 x 4 transpose of 128-bit blocks
    const FewV s0 = _mm512_shuffle_f32x4(q[j], q[4 + j], 0x44);
    const FewV s1 = _mm512_shuffle_f32x4(q[j], q[4 + j], 0xEE);
    const FewV s2 = _mm512_shuffle_f32x4(q[8 + j], q[12 + j], 0x44);
    const FewV s3 = _mm512_shuffle_f32x4(q[8 + j], q[12 + j], 0xEE);
    col[j] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    col[4 + j] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
    col[8 + j] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    col[12 + j] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  }
}
#else
using FewV = __m256;
constexpr int64_t kFewL = 8;
HWY_INLINE FewV FewLoad(const float* p) { return _mm256_loadu_ps(p); }
HWY_INLINE FewV FewSet(float v) { return _mm256_set1_ps(v); }
HWY_INLINE FewV FewZero() { return _mm256_setzero_ps(); }
HWY_INLINE FewV FewFma(FewV a, FewV b, FewV c) { return _mm256_fmadd_ps(a, b, c); }
HWY_INLINE void FewStore(float* p, FewV v) { _mm256_storeu_ps(p, v); }
HWY_INLINE FewV FewAdd(FewV a, FewV b) { return _mm256_add_ps(a, b); }
HWY_INLINE FewV FewClampKeepNaN(FewV x, FewV lo, FewV hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, x)); }
// vmaskmovps: masked-off elements are neither read nor written (no fault past p + n).
HWY_INLINE __m256i FewMaskN(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
HWY_INLINE FewV FewLoadN(const float* p, int64_t n) { return _mm256_maskload_ps(p, FewMaskN(n)); }
HWY_INLINE void FewStoreN(float* p, FewV v, int64_t n) { _mm256_maskstore_ps(p, FewMaskN(n), v); }
HWY_INLINE void FewTranspose(const FewV* rows, FewV* col) {
  FewV t[8], q[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    q[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    q[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    q[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    q[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    col[j] = _mm256_permute2f128_ps(q[j], q[4 + j], 0x20);
    col[4 + j] = _mm256_permute2f128_ps(q[j], q[4 + j], 0x31);
  }
}
#endif
#else
#define EMBER_HAS_FEW_TRANSPOSE 0
#endif

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
