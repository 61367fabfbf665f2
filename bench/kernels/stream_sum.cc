// sum_bytes: 8 independent SumsOf8 (psadbw) accumulators and a software prefetch 2 KiB ahead. On
// the 2-core EPYC bench VM a 2-accumulator loop read DRAM at ~21-25 GB/s with AVX-512 and this one
// at ~38 GB/s: the roofline must keep as many loads in flight as the hardware allows.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/kernels/stream_sum.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cstddef>
#include <cstdint>

#include "bench/kernels/stream_sum.h"

HWY_BEFORE_NAMESPACE();
namespace ember::bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

uint64_t SumBytesImpl(const uint8_t* p, size_t count) {
  uint64_t total = 0;
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<uint8_t> d8;
  const hn::Repartition<uint64_t, decltype(d8)> d64;
  const size_t lanes = hn::Lanes(d8);
  constexpr int kUnroll = 8;
  hn::Vec<decltype(d64)> acc[kUnroll];
  for (int u = 0; u < kUnroll; ++u) acc[u] = hn::Zero(d64);
  for (; i + kUnroll * lanes <= count; i += kUnroll * lanes) {
    for (size_t off = 0; off < kUnroll * lanes; off += 64) __builtin_prefetch(p + i + off + 2048);
    for (int u = 0; u < kUnroll; ++u) acc[u] = hn::Add(acc[u], hn::SumsOf8(hn::LoadU(d8, p + i + u * lanes)));
  }
  for (int u = 1; u < kUnroll; ++u) acc[0] = hn::Add(acc[0], acc[u]);
  total = hn::GetLane(hn::SumOfLanes(d64, acc[0]));
#endif
  for (; i < count; ++i) total += p[i];
  return total;
}

}  // namespace ember::bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::bench {
HWY_EXPORT(SumBytesImpl);
uint64_t sum_bytes(const uint8_t* p, size_t count) { return HWY_DYNAMIC_DISPATCH(SumBytesImpl)(p, count); }
}  // namespace ember::bench
#endif
