// Per-target helpers shared by kernels/cpu files. Include after hwy/highway.h, inside no namespace.
// Also: ExpArg / TanhArg (defined arguments for hwy's Exp / Tanh), ReluKeepNaN and ClampKeepNaN
// (relu and clip with NaN and -0 kept), EvenLanes (a stride-2 row).
// Highway 1.0.3 has no LoadN/StoreN. On AVX-512 (HWY_MEM_OPS_MIGHT_FAULT == 0) partial vectors
// are masked loads and stores, which touch no element past `count`; elsewhere they go through a
// stack buffer (MaskedLoad on SSE / AVX2 targets may read the whole vector). The buffer costs a
// failed store-to-load forwarding per load (narrow stores, then a wide load): with NVFP4 at
// k = 896, the 56 scale codes of every row took a sixth of the LLM decode step that way.
#if defined(EMBER_KERNELS_CPU_HWY_UTIL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_CPU_HWY_UTIL_INL_H_
#undef EMBER_KERNELS_CPU_HWY_UTIL_INL_H_
#else
#define EMBER_KERNELS_CPU_HWY_UTIL_INL_H_
#endif

#include <cstddef>
#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loads count (< Lanes(d)) elements; the other lanes are `fill`.
template <class D>
HWY_INLINE hn::VFromD<D> LoadTail(D d, const hn::TFromD<D>* p, size_t count,
                                  hn::TFromD<D> fill = hn::TFromD<D>(0)) {
#if !HWY_MEM_OPS_MIGHT_FAULT && HWY_TARGET != HWY_SCALAR
  const auto mask = hn::FirstN(d, count);
  return hn::IfThenElse(mask, hn::MaskedLoad(mask, d, p), hn::Set(d, fill));
#else
  HWY_ALIGN hn::TFromD<D> buf[hn::MaxLanes(d)];
  for (size_t i = 0; i < hn::MaxLanes(d); ++i) buf[i] = fill;
  std::memcpy(buf, p, count * sizeof(hn::TFromD<D>));
  return hn::Load(d, buf);
#endif
}

// Stores the first count (< Lanes(d)) lanes of v.
template <class D>
HWY_INLINE void StoreTail(D d, hn::VFromD<D> v, hn::TFromD<D>* p, size_t count) {
#if !HWY_MEM_OPS_MIGHT_FAULT && HWY_TARGET != HWY_SCALAR
  hn::BlendedStore(v, hn::FirstN(d, count), d, p);
#else
  HWY_ALIGN hn::TFromD<D> buf[hn::MaxLanes(d)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, count * sizeof(hn::TFromD<D>));
#endif
}

// An argument for hwy's Exp that is defined on every target. The SCALAR / EMU128 (and non-x86)
// Exp converts float to int in C++, undefined behaviour for NaN and -inf: there NaN lanes become 0
// and the rest is clamped to >= -110 (Exp gives 0 below -104 anyway). x86 SIMD conversions are
// defined for every input (cvttps2dq), so x passes as is, costing nothing on the fast path. Either
// way the caller masks the result of a NaN lane itself (hwy's Exp gives 0 for NaN).
template <class D>
HWY_INLINE hn::VFromD<D> ExpArg(D d, hn::VFromD<D> x) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  (void)d;
  return x;
#else
  return hn::Max(hn::IfThenZeroElse(hn::IsNaN(x), x), hn::Set(d, -110.0f));
#endif
}

// An argument for hwy's Tanh that is defined on every target: NaN lanes become 0 except on x86
// SIMD (as ExpArg; Tanh(NaN) is undefined behaviour on SCALAR, ±inf is fine). The caller passes
// NaN through itself.
template <class D>
HWY_INLINE hn::VFromD<D> TanhArg(D d, hn::VFromD<D> x) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  (void)d;
  return x;
#else
  return hn::IfThenZeroElse(hn::IsNaN(x), x);
#endif
}

// max(0, x) with NaN and -0 passed through: x < 0 ? 0 : x, the reference's relu. hn::Max does
// not define NaN or signed zeros: x86's maxps returns its second operand when either is NaN or both
// are zero, so Max(0, x) is exactly this there (one instruction; Max(x, 0) gave relu(NaN) = 0),
// while the SCALAR Max returns the non-NaN operand; other targets compare and select.
template <class D>
HWY_INLINE hn::VFromD<D> ReluKeepNaN(D d, hn::VFromD<D> x) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  return hn::Max(hn::Zero(d), x);
#else
  return hn::IfThenZeroElse(hn::Lt(x, hn::Zero(d)), x);
#endif
}

// min(max(x, lo), hi) as the reference's clip: x < lo ? lo : x, then > hi ? hi : x, so a NaN x stays
// NaN and -0 stays -0 (lo, hi not NaN). On x86 maxps / minps are exactly these selects (the second
// operand when either is NaN or both are zero), as in ReluKeepNaN; elsewhere compare and select.
template <class V>
HWY_INLINE V ClampKeepNaN(V x, V lo, V hi) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  return hn::Min(hi, hn::Max(lo, x));
#else
  x = hn::IfThenElse(hn::Lt(x, lo), lo, x);
  return hn::IfThenElse(hn::Gt(x, hi), hi, x);
#endif
}


// Lanes 0, 2, 4, ... of src[0 .. 2 * lanes): a stride-2 row (pool.cc, conv_gemm.cc). Reads all 2 *
// lanes floats; callers keep the second load inside their buffer.
template <class D>
HWY_INLINE hn::Vec<D> EvenLanes(D d, const float* src) {
#if HWY_TARGET == HWY_SCALAR
  return hn::LoadU(d, src);
#else
  return hn::ConcatEven(d, hn::LoadU(d, src + hn::Lanes(d)), hn::LoadU(d, src));
#endif
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
