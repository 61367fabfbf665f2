// Per-target helpers shared by kernels/cpu files. Include after hwy/highway.h, inside no namespace.
// Highway 1.0.3 has no LoadN/StoreN: partial vectors go through a stack buffer, which never reads
// or writes past `count` elements (MaskedLoad on SSE targets would read the whole vector).
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
  HWY_ALIGN hn::TFromD<D> buf[hn::MaxLanes(d)];
  for (size_t i = 0; i < hn::MaxLanes(d); ++i) buf[i] = fill;
  std::memcpy(buf, p, count * sizeof(hn::TFromD<D>));
  return hn::Load(d, buf);
}

// Stores the first count (< Lanes(d)) lanes of v.
template <class D>
HWY_INLINE void StoreTail(D d, hn::VFromD<D> v, hn::TFromD<D>* p, size_t count) {
  HWY_ALIGN hn::TFromD<D> buf[hn::MaxLanes(d)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, count * sizeof(hn::TFromD<D>));
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
