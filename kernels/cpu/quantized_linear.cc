// Linear layers with FP8 / MXFP8 / NVFP4 / bf16 weights (quantized_linear.h has the contract).
//
// One walker, ForEachWeightVector, produces the dequantized weight vectors of kCols rows, one vector
// step of L = Lanes(d) elements at a time (k = 0, L, 2L, ...; a zero-padded last step), and hands
// them to a visitor: the GEMV visitor FMAs them into kRows x kCols accumulators exactly as
// LinearMicro does (linear_tile-inl.h), the panel visitor stores them for LinearTile. So every path
// computes y[i, j] with one and the same FMA chain, which is cpu::linear's on the dequantized weight.
//
// Dequantized value = f32(code) * scale, rounded once, as the reference dequantizers compute it:
// - e4m3: the sign-extended code shifted left by 20 and masked puts the sign at bit 31 and the 7
//   magnitude bits at 26..20: an f32 of value * 2^-120 (e4m3 subnormals become f32 subnormals);
//   times (scale * 2^120) that is value * scale rounded once. The SCALAR target reads a 256-entry
//   f32 table. Measured on the bench VM (AVX-512 Zen, 512 KiB in L2, m = 1, GB/s of codes): bit trick
//   40.8, 256-entry f32 gather 2.9, f16 bits + vcvtph2ps 30.1 on AVX-512; 14.7 / 2.2 / 15.4 on AVX2.
// - e2m1: 512-bit x86 permutes a 16-lane f32 table (vpermps; exact values); other SIMD targets look
//   up 2 * value as int8 in a 16-byte table (pshufb), widen and convert it; NVFP4 decodes two steps
//   per L-byte load.
// The folded multipliers (scale * 2^120, scale * 0.5 for the pshufb path) are exact unless they
// overflow or round; a chunk whose scales do not fold, a chunk holding an e4m3 NaN code (0x7F /
// 0xFF; a byte scan per chunk finds them) and the zero-padded last step take an exact slow decode.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantized_linear.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/hwy_util-inl.h"
#include "kernels/cpu/linear_tile-inl.h"

#ifndef EMBER_KERNELS_CPU_QUANTIZED_LINEAR_PLAN_
#define EMBER_KERNELS_CPU_QUANTIZED_LINEAR_PLAN_
#include "kernels/cpu/e4m3_encode.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized_linear.h"
#include "runtime/core/float_codecs.h"
namespace ember::kernels::cpu_detail {

enum class QuantFormat : uint8_t { Fp8, Mxfp8, Nvfp4, Bf16 };

constexpr int64_t kGemvUnitRows = 16;  // weight rows per GEMV work unit

// One call, as the per-target code sees it.
struct QuantPlan {
  QuantFormat format;
  bool w8a8;               // FP8 codes taken unscaled; y = (S * sx[i]) * s_w[j] + bias[j] afterwards
  const float* x;          // [m, k]; W8A8: the e4m3 values f32(x8) in the scratch
  const float* sx;         // W8A8: [m]
  int64_t m, n, k;
  const uint8_t* w;        // row j starts at w + j * row_bytes
  int64_t row_bytes;
  const float* fp8_scales;
  const uint8_t* u8_scales;
  int64_t block_n, block_k, block_cols;  // block_k = k (>= 1) where the scale is one per row
  float global_scale;
  const float* bias;
  float* y;
  float* panels;           // GEMM: one slot of slot_floats per task
  size_t slot_floats;
  size_t units, tasks;     // GEMM: panels of kQuantPanelRows rows; tasks (<= slots)

  // The exact f32 scale of row j, block column b, as the reference dequantizers compute it.
  float scale(int64_t j, int64_t b) const {
    switch (format) {
      case QuantFormat::Fp8:
        return w8a8 ? 1.0f : fp8_scales[(j / block_n) * block_cols + b];
      case QuantFormat::Mxfp8: return e8m0_to_f32(u8_scales[j * block_cols + b]);
      case QuantFormat::Nvfp4: return global_scale * ue4m3_to_f32(u8_scales[j * block_cols + b]);
      case QuantFormat::Bf16: break;
    }
    return 1.0f;
  }
};

// The 256 e4m3fn values (for the SCALAR target, which has no vector integer ops to decode with).
const float* e4m3fn_table();

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::QuantFormat;
using cpu_detail::QuantPlan;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

#if HWY_TARGET == HWY_SCALAR
constexpr float kE4m3Fold = 1.0f;  // the table holds the values themselves
constexpr float kE2m1Fold = 1.0f;
#elif HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr float kE4m3Fold = 0x1p120f;  // raw e4m3 decode = value * 2^-120
constexpr float kE2m1Fold = 1.0f;      // e2m1 through a 16-lane f32 table: the values themselves
#else
constexpr float kE4m3Fold = 0x1p120f;
constexpr float kE2m1Fold = 0.5f;  // e2m1 through a byte table: 2 * value as an integer
#endif

// x86 targets below AVX-512 have 16 vector registers: 4 x rows x 4 w rows would spill.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int GemvCols(int rows) { return rows <= 2 ? 4 : 2; }
#else
constexpr int GemvCols(int) { return 4; }
#endif

template <QuantFormat F>
constexpr float FoldOf() {
  return F == QuantFormat::Nvfp4 ? kE2m1Fold : (F == QuantFormat::Bf16 ? 1.0f : kE4m3Fold);
}

// Whether raw * (s * fold) == (raw * fold) * s for every raw: s * fold must be exact (no overflow
// to Inf, no rounding in the subnormal range). NaN folds (the product stays NaN).
template <QuantFormat F>
HWY_INLINE bool Foldable(float s) {
  if constexpr (FoldOf<F>() == 1.0f) {
    return true;
  } else if constexpr (FoldOf<F>() < 1.0f) {
    return s == 0.0f || !(std::fabs(s) < 0x1p-125f);
  } else {
    return !(std::fabs(s) >= 256.0f);
  }
}

HWY_INLINE VF QuietNan(DF d) {
  const hn::RebindToSigned<DF> di;
  return hn::BitCast(d, hn::Set(di, 0x7FC00000));
}

// e4m3 codes p[0, L) -> value * 2^-120 per lane (the table value on SCALAR). kFixNan: codes 0x7F /
// 0xFF give NaN (otherwise they give 480 * 2^-120 and the caller must know there are none).
template <bool kFixNan>
HWY_INLINE VF RawE4m3(const uint8_t* p) {
  const DF d;
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(d, cpu_detail::e4m3fn_table()[p[0]]);
#else
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  const auto v = hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p)));
  // Sign-extended: bits 31..27 hold the sign; keep bit 31 and the magnitude at 26..20.
  const VF raw = hn::BitCast(d, hn::And(hn::ShiftLeft<20>(v), hn::Set(di, int32_t(0x87F00000u))));
  if constexpr (!kFixNan) return raw;
  const auto mag = hn::And(v, hn::Set(di, 0x7F));
  return hn::IfThenElse(hn::RebindMask(d, hn::Eq(mag, hn::Set(di, 0x7F))), QuietNan(d), raw);
#endif
}

#if HWY_TARGET != HWY_SCALAR
// L e2m1 codes, one per u8 lane in element order -> the values times 1 / kE2m1Fold: a 16-lane f32
// table lookup on 512-bit x86 (exact, -0 included), else a byte table of 2 * value (pshufb), widened
// and converted (-0 becomes +0, which no sum can tell apart).
HWY_INLINE VF E2m1Values(hn::Vec<hn::Rebind<uint8_t, DF>> nibbles) {
  const DF d;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  alignas(64) static constexpr float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const hn::RebindToSigned<DF> di;
  const auto idx = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<DF>(), nibbles));
  return hn::TableLookupLanes(hn::Load(d, kValues), hn::IndicesFromVec(d, idx));
#else
  alignas(16) static constexpr int8_t kTwice[16] = {0, 1, 2, 3, 4, 6, 8, 12,
                                                   0, -1, -2, -3, -4, -6, -8, -12};
  const hn::Rebind<int8_t, DF> di8;
  const hn::Full128<int8_t> dt;
  const auto twice = hn::TableLookupBytes(hn::Load(dt, kTwice), hn::BitCast(di8, nibbles));
  return hn::ConvertTo(d, hn::PromoteTo(hn::RebindToSigned<DF>(), twice));
#endif
}
#endif

// e2m1 elements [e, e + L) of a packed row (e a multiple of L; element 2i in the low nibble of
// byte i) -> the values times 1 / kE2m1Fold (the value on SCALAR). Reads L / 2 bytes.
HWY_INLINE VF RawE2m1(const uint8_t* row, int64_t e) {
  const DF d;
#if HWY_TARGET == HWY_SCALAR
  const uint8_t byte = row[e / 2];
  return hn::Set(d, e2m1_to_f32(static_cast<uint8_t>((e & 1) != 0 ? byte >> 4 : byte)));
#else
  (void)d;
  const hn::Rebind<uint8_t, DF> d8;
  const hn::Half<decltype(d8)> d8h;
  const auto bytes = hn::LoadU(d8h, row + e / 2);
  const auto lo = hn::ZeroExtendVector(d8, hn::And(bytes, hn::Set(d8h, 0x0F)));
  const auto hi = hn::ZeroExtendVector(d8, hn::ShiftRight<4>(bytes));
  return E2m1Values(hn::InterleaveLower(lo, hi));  // element order
#endif
}

// bf16 elements [e, e + L) of a row -> f32, exact.
HWY_INLINE VF RawBf16(const uint8_t* row, int64_t e) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  const hn::RebindToUnsigned<DF> du;
  const auto* p = reinterpret_cast<const uint16_t*>(row) + e;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}

template <QuantFormat F>
constexpr int64_t RowBytes(int64_t elements) {
  return F == QuantFormat::Nvfp4 ? elements / 2 : (F == QuantFormat::Bf16 ? 2 * elements : elements);
}

// Raw decode of elements [e, e + L) of a row (kFixNan only matters for e4m3).
template <QuantFormat F, bool kFixNan>
HWY_INLINE VF Raw(const uint8_t* row, int64_t e) {
  if constexpr (F == QuantFormat::Nvfp4) {
    return RawE2m1(row, e);
  } else if constexpr (F == QuantFormat::Bf16) {
    return RawBf16(row, e);
  } else {
    return RawE4m3<kFixNan>(row + e);
  }
}

// The exact slow decode of elements [e, e + count), count <= L: NaN codes handled, the fold
// applied to the raw value first when the chunk's multipliers are not folded, lanes >= count zero.
template <QuantFormat F>
HWY_INLINE VF DecodeSlow(const uint8_t* row, int64_t e, size_t count, VF mult, bool folded) {
  const DF d;
#if HWY_TARGET == HWY_SCALAR
  (void)count;
  (void)folded;
  const VF raw = Raw<F, true>(row, e);  // the table and the codecs are exact
#else
  // Copying into a zeroed buffer keeps the reads inside the row.
  HWY_ALIGN uint8_t buf[hn::MaxLanes(d) * 4] = {};
  std::memcpy(buf, row + RowBytes<F>(e), static_cast<size_t>(RowBytes<F>(static_cast<int64_t>(count))));
  VF raw = Raw<F, true>(buf, 0);
  if (!folded) raw = hn::Mul(raw, hn::Set(d, FoldOf<F>()));
#endif
  VF w = F == QuantFormat::Bf16 ? raw : hn::Mul(raw, mult);
  if (count < hn::Lanes(d)) w = hn::IfThenElseZero(hn::FirstN(d, count), w);
  return w;
}

constexpr int64_t kMaxChunkBlocks = 130;
constexpr int64_t kMaxChunkSteps = 128;

// Elements per chunk: a multiple of L (vector steps never cross a chunk) of at most kMaxChunkSteps
// steps, touching at most kMaxChunkBlocks block columns (len elements touch at most len / bk + 2).
HWY_INLINE int64_t ChunkLength(int64_t bk, int64_t lanes) {
  int64_t len = kMaxChunkSteps * lanes;
  if (bk < len) {
    const int64_t fit = (kMaxChunkBlocks - 2) * bk / lanes * lanes;
    len = fit < len ? fit : len;
  }
  return len < lanes ? lanes : len;
}

// The exact scales of block columns [b0, b0 + count) of weight row j (what plan.scale gives) into
// out, decoded a vector at a time; returns whether all of them fold (Foldable).
template <QuantFormat F>
HWY_INLINE bool ScaleRow(const QuantPlan& plan, int64_t j, int64_t b0, int64_t count, float* out) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  if (HWY_TARGET == HWY_SCALAR || count < lanes) {  // few blocks (per channel, per tensor): scalar
    bool ok = true;
    for (int64_t b = 0; b < count; ++b) {
      out[b] = plan.scale(j, b0 + b);
      ok = ok && Foldable<F>(out[b]);
    }
    return ok;
  }
#if HWY_TARGET != HWY_SCALAR
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint8_t, DF> d8;
  bool ok = true;
  for (int64_t b = 0; b < count; b += lanes) {
    const size_t n = static_cast<size_t>(count - b < lanes ? count - b : lanes);
    const bool full = n == static_cast<size_t>(lanes);
    VF s;
    if constexpr (F == QuantFormat::Fp8) {
      if (plan.w8a8) {
        s = hn::Set(d, 1.0f);
      } else {
        const float* p = plan.fp8_scales + (j / plan.block_n) * plan.block_cols + b0 + b;
        s = full ? hn::LoadU(d, p) : LoadTail(d, p, n);
      }
    } else {
      const uint8_t* p = plan.u8_scales + j * plan.block_cols + b0 + b;
      const auto v = hn::PromoteTo(du, full ? hn::LoadU(d8, p) : LoadTail(d8, p, n));
      if constexpr (F == QuantFormat::Mxfp8) {  // e8m0: 2^(v - 127); 0 is 2^-127, 0xFF NaN
        auto bits = hn::ShiftLeft<23>(v);
        bits = hn::IfThenElse(hn::Eq(v, hn::Zero(du)), hn::Set(du, 0x00400000u), bits);
        bits = hn::IfThenElse(hn::Eq(v, hn::Set(du, 0xFFu)), hn::Set(du, 0x7FC00000u), bits);
        s = hn::BitCast(d, bits);
      } else {  // ue4m3 (codes >= 0x7F are invalid: NaN), times the global scale
        const VF value = hn::Mul(hn::BitCast(d, hn::ShiftLeft<20>(v)), hn::Set(d, 0x1p120f));
        const auto invalid = hn::RebindMask(d, hn::Gt(hn::BitCast(hn::RebindToSigned<DF>(), v),
                                                      hn::Set(hn::RebindToSigned<DF>(), 0x7E)));
        s = hn::Mul(hn::Set(d, plan.global_scale), hn::IfThenElse(invalid, QuietNan(d), value));
      }
    }
    const VF a = hn::Abs(s);
    if constexpr (FoldOf<F>() < 1.0f) {  // the vector form of Foldable
      ok = ok && hn::AllTrue(d, hn::Or(hn::Eq(s, hn::Zero(d)), hn::Not(hn::Lt(a, hn::Set(d, 0x1p-125f)))));
    } else if constexpr (FoldOf<F>() > 1.0f) {
      ok = ok && hn::AllTrue(d, hn::Not(hn::Ge(a, hn::Set(d, 256.0f))));
    }
    if (full) hn::StoreU(s, d, out + b); else StoreTail(d, s, out + b, n);
  }
  return ok;
#else
  return true;
#endif
}

// out[b] *= FoldOf<F>() for b < count.
template <QuantFormat F>
HWY_INLINE void FoldRow(float* out, int64_t count) {
  if constexpr (FoldOf<F>() == 1.0f) return;
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const VF fold = hn::Set(d, FoldOf<F>());
  int64_t b = 0;
  for (; b + lanes <= count; b += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, out + b), fold), d, out + b);
  for (; b < count; ++b) out[b] *= FoldOf<F>();
}

// One vector step at element e of every row: the exact slow decode (NaN codes, multipliers that
// did not fold, a partial last step), then visit.
template <QuantFormat F, int kCols, class Visit>
HWY_INLINE void SlowStep(const uint8_t* const* rows, int64_t e, size_t count, const VF* m, bool folded,
                         const Visit& visit) {
  VF wv[kCols];
  for (int q = 0; q < kCols; ++q) wv[q] = DecodeSlow<F>(rows[q], e, count, m[q], folded);
  visit(e, wv, count);
}

// Whether any code in [begin, end) of the kCols rows is an e4m3 NaN (0x7F / 0xFF). Run once per
// chunk before decoding it, it also pulls the chunk's lines in with a tight read loop (the decode
// pass then reads them from L1).
template <int kCols>
HWY_INLINE bool AnyNanCode(const uint8_t* const* rows, int64_t begin, int64_t end) {
#if HWY_TARGET == HWY_SCALAR
  (void)rows;
  (void)begin;
  (void)end;
  return false;
#else
  // (code | 0x80) is 0xFF exactly for the NaN codes; one max chain per row keeps them independent.
  const hn::Repartition<uint8_t, DF> du8;
  const int64_t bytes = static_cast<int64_t>(hn::Lanes(du8));
  const auto top = hn::Set(du8, 0x80);
  hn::Vec<decltype(du8)> acc[kCols];
  for (int q = 0; q < kCols; ++q) acc[q] = top;
  int64_t e = begin;
  for (; e + bytes <= end; e += bytes) {
    for (int q = 0; q < kCols; ++q) acc[q] = hn::Max(acc[q], hn::Or(hn::LoadU(du8, rows[q] + e), top));
  }
  if (e < end) {
    for (int q = 0; q < kCols; ++q) {
      const auto v = LoadTail(du8, rows[q] + e, static_cast<size_t>(end - e));
      acc[q] = hn::Max(acc[q], hn::Or(v, top));
    }
  }
  for (int q = 1; q < kCols; ++q) acc[0] = hn::Max(acc[0], acc[q]);
  return !hn::AllFalse(du8, hn::Eq(acc[0], hn::Set(du8, 0xFF)));
#endif
}

// Streams of kCols rows that each cover one 4 KiB page or so get little from the hardware
// prefetchers, so the walker prefetches the next kCols rows at the byte offset it reads, spread
// over the steps (measured on fp8 per channel from DRAM, 1 thread: 21 GiB/s, against 11 without
// software prefetch and 14 with one burst per chunk).
template <int kCols>
HWY_INLINE void PrefetchNext(const uint8_t* next, int64_t row_bytes, int64_t offset) {
  for (int q = 0; q < kCols; ++q) __builtin_prefetch(next + q * row_bytes + offset);
}

// One full step at element e: weight vectors times the block multipliers m, then visit.
template <QuantFormat F, int kCols, bool kFixNan, class Visit>
HWY_INLINE void FastStep(const uint8_t* const* rows, int64_t e, const VF* m, const Visit& visit) {
  const DF d;
  VF wv[kCols];
  for (int q = 0; q < kCols; ++q) {
    const VF raw = Raw<F, kFixNan>(rows[q], e);
    wv[q] = F == QuantFormat::Bf16 ? raw : hn::Mul(raw, m[q]);
  }
  visit(e, wv, hn::Lanes(d));
}

// Full steps [c0, end) of a chunk whose multipliers fold and whose block columns are whole steps
// (or one block): block by block, its multipliers mult[q][b - b_lo] broadcast once. kFixNan: the
// chunk holds an e4m3 NaN code.
template <QuantFormat F, int kCols, bool kFixNan, class Visit>
HWY_INLINE void FastSteps(const uint8_t* const* rows, int64_t c0, int64_t end, int64_t bk,
                          int64_t b_lo, const float (*mult)[kMaxChunkBlocks], const Visit& visit,
                          const uint8_t* next, int64_t row_bytes) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  VF m[kCols];
  for (int q = 0; q < kCols; ++q) m[q] = hn::Zero(d);
  int64_t e = c0;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (F == QuantFormat::Nvfp4) {
    // Two steps per L-byte load (2L nibbles): InterleaveLower / Upper give them in element order.
    // The block (16 elements) of element e is e >> 4.
    const hn::Rebind<uint8_t, DF> d8;
    for (; e + 2 * lanes <= end; e += 2 * lanes) {
      if (next != nullptr && (e / 2) % 64 == 0) PrefetchNext<kCols>(next, row_bytes, e / 2);
      VF w0[kCols], w1[kCols];
      for (int q = 0; q < kCols; ++q) {
        const auto bytes = hn::LoadU(d8, rows[q] + e / 2);
        const auto lo = hn::And(bytes, hn::Set(d8, 0x0F));
        const auto hi = hn::ShiftRight<4>(bytes);
        w0[q] = hn::Mul(E2m1Values(hn::InterleaveLower(lo, hi)),
                        hn::Set(d, mult[q][(e >> 4) - b_lo]));
        w1[q] = hn::Mul(E2m1Values(hn::InterleaveUpper(d8, lo, hi)),
                        hn::Set(d, mult[q][((e + lanes) >> 4) - b_lo]));
      }
      visit(e, w0, static_cast<size_t>(lanes));
      visit(e + lanes, w1, static_cast<size_t>(lanes));
    }
  }
#endif
  for (int64_t b = e / bk; e < end; ++b) {
    const int64_t run_end = (b + 1) * bk < end ? (b + 1) * bk : end;
    if constexpr (F != QuantFormat::Bf16) {
      for (int q = 0; q < kCols; ++q) m[q] = hn::Set(d, mult[q][b - b_lo]);
    }
    for (; e < run_end; e += lanes) {
      if (next != nullptr && RowBytes<F>(e) % 64 == 0) PrefetchNext<kCols>(next, row_bytes, RowBytes<F>(e));
      FastStep<F, kCols, kFixNan>(rows, e, m, visit);
    }
  }
}

// Calls visit(e, wv, count) for e = 0, L, 2L, ... < k, with wv[q] the dequantized elements
// [e, e + L) of weight row j0 + q (unscaled codes for W8A8) and count = min(L, k - e); lanes >= count
// are zero. Prefetches the same columns of the next kCols rows when prefetch_next.
template <QuantFormat F, int kCols, class Visit>
HWY_INLINE void ForEachWeightVector(const QuantPlan& plan, int64_t j0, bool prefetch_next,
                                    const Visit& visit) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t k = plan.k;
  const uint8_t* rows[kCols];
  for (int q = 0; q < kCols; ++q) rows[q] = plan.w + (j0 + q) * plan.row_bytes;
  const uint8_t* next = prefetch_next ? rows[0] + kCols * plan.row_bytes : nullptr;
  constexpr bool kScaled = F != QuantFormat::Bf16;
  const int64_t bk = kScaled ? plan.block_k : k;
  // Every step lies in one block column when blocks are whole steps or there is only one.
  const bool uniform = bk % lanes == 0 || bk >= k;
  const int64_t chunk = ChunkLength(bk, lanes);
  constexpr bool kE4m3 = F == QuantFormat::Fp8 || F == QuantFormat::Mxfp8;
  float mult[kCols][kMaxChunkBlocks];
  HWY_ALIGN float lane_mult[hn::MaxLanes(d)];
  VF m[kCols];
  bool folded = true;
  for (int64_t c0 = 0; c0 < k; c0 += chunk) {
    const int64_t c1 = c0 + chunk < k ? c0 + chunk : k;
    const int64_t b_lo = c0 / bk, b_hi = (c1 - 1) / bk;
    if (kScaled && (c0 == 0 || bk < k)) {  // one block column: its multipliers serve every chunk
      folded = true;
      for (int q = 0; q < kCols; ++q) folded &= ScaleRow<F>(plan, j0 + q, b_lo, b_hi - b_lo + 1, mult[q]);
      if (folded) {
        for (int q = 0; q < kCols; ++q) FoldRow<F>(mult[q], b_hi - b_lo + 1);
      }
    }
    const int64_t full_end = c0 + (c1 - c0) / lanes * lanes;
    int64_t e = c0;
    if (uniform && folded) {
      const bool nan = kE4m3 && AnyNanCode<kCols>(rows, c0, c1);
      const int64_t bk_run = kScaled ? bk : k;
      if (HWY_LIKELY(!nan)) {
        FastSteps<F, kCols, false>(rows, c0, full_end, bk_run, b_lo, mult, visit, next, plan.row_bytes);
      } else {
        FastSteps<F, kCols, kE4m3>(rows, c0, full_end, bk_run, b_lo, mult, visit, next, plan.row_bytes);
      }
      e = full_end;
    }
    // The rest: steps straddling blocks (block_k not a multiple of L), chunks whose multipliers do
    // not fold, and the partial last step.
    for (; e < c1; e += lanes) {
      const int64_t count = c1 - e < lanes ? c1 - e : lanes;
      if constexpr (kScaled) {
        for (int q = 0; q < kCols; ++q) {
          for (int64_t i = 0; i < lanes; ++i) {
            const int64_t ei = e + i < c1 ? e + i : c1 - 1;
            lane_mult[i] = mult[q][ei / bk - b_lo];
          }
          m[q] = hn::Load(d, lane_mult);
        }
      } else {
        for (int q = 0; q < kCols; ++q) m[q] = hn::Zero(d);
      }
      SlowStep<F, kCols>(rows, e, static_cast<size_t>(count), m, folded, visit);
    }
  }
}

// ---------------------------------------------------------------- GEMV (m = kRows <= 4)

// Accumulates x [kRows, k] · w for one weight step: LinearMicro's order (the step's weight vectors,
// then row by row an x vector and its FMAs).
template <int kRows, int kCols>
struct GemvVisitor {
  VF (&acc)[kRows][kCols];
  const float* x;
  int64_t k;
  HWY_INLINE void operator()(int64_t e, const VF* wv, size_t count) const {
    const DF d;
    for (int r = 0; r < kRows; ++r) {
      const float* xr = x + r * k + e;
      const VF xv = count == hn::Lanes(d) ? hn::LoadU(d, xr) : LoadTail(d, xr, count);
      for (int q = 0; q < kCols; ++q) acc[r][q] = hn::MulAdd(xv, wv[q], acc[r][q]);
    }
  }
};

// y[0..kRows, j0..j0 + kCols) (W8A8: the sums S, scaled by W8a8Epilogue afterwards).
template <QuantFormat F, int kRows, int kCols>
HWY_INLINE void GemvMicro(const QuantPlan& plan, int64_t j0, bool prefetch_next) {
  const DF d;
  VF acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r)
    for (int q = 0; q < kCols; ++q) acc[r][q] = hn::Zero(d);
  const GemvVisitor<kRows, kCols> visit{acc, plan.x, plan.k};
  ForEachWeightVector<F, kCols>(plan, j0, prefetch_next, visit);
  const float* bias = plan.w8a8 ? nullptr : plan.bias;
  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < kCols; ++q) {
      float v = hn::GetLane(hn::SumOfLanes(d, acc[r][q]));
      if (bias != nullptr) v += bias[j0 + q];
      plan.y[r * plan.n + j0 + q] = v;
    }
  }
}

// Row i of y over columns [j_begin, j_end): y = (S * s_x) * s_w + bias (MulAdd: one FMA where the
// target has FMA). Lane-wise, so the result does not depend on the range.
void W8a8Epilogue(const QuantPlan& plan, int64_t i, int64_t j_begin, int64_t j_end) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  float* yr = plan.y + i * plan.n;
  const VF sx = hn::Set(d, plan.sx[i]);
  const bool per_channel = plan.block_n == 1;
  const VF sw_tensor = hn::Set(d, plan.fp8_scales[0]);
  for (int64_t j = j_begin; j < j_end; j += lanes) {
    const size_t count = static_cast<size_t>(j_end - j < lanes ? j_end - j : lanes);
    const bool full = count == static_cast<size_t>(lanes);
    const VF s = full ? hn::LoadU(d, yr + j) : LoadTail(d, yr + j, count);
    VF sw = sw_tensor;
    if (per_channel) sw = full ? hn::LoadU(d, plan.fp8_scales + j) : LoadTail(d, plan.fp8_scales + j, count);
    const VF t = hn::Mul(s, sx);
    VF out;
    if (plan.bias != nullptr) {
      out = hn::MulAdd(t, sw, full ? hn::LoadU(d, plan.bias + j) : LoadTail(d, plan.bias + j, count));
    } else {
      out = hn::Mul(t, sw);
    }
    if (full) hn::StoreU(out, d, yr + j); else StoreTail(d, out, yr + j, count);
  }
}

template <QuantFormat F, int kRows>
void GemvRows(const QuantPlan& plan, int64_t j_begin, int64_t j_end) {
  constexpr int kC = GemvCols(kRows);
  int64_t j = j_begin;
  for (; j + kC <= j_end; j += kC) GemvMicro<F, kRows, kC>(plan, j, j + 2 * kC <= plan.n);
  for (; j < j_end; ++j) GemvMicro<F, kRows, 1>(plan, j, false);
  if (plan.w8a8) {
    for (int r = 0; r < kRows; ++r) W8a8Epilogue(plan, r, j_begin, j_end);
  }
}

template <QuantFormat F>
void GemvFormat(const QuantPlan& plan, int64_t j_begin, int64_t j_end) {
  switch (plan.m) {
    case 1: return GemvRows<F, 1>(plan, j_begin, j_end);
    case 2: return GemvRows<F, 2>(plan, j_begin, j_end);
    case 3: return GemvRows<F, 3>(plan, j_begin, j_end);
    case 4: return GemvRows<F, 4>(plan, j_begin, j_end);
    default: return;
  }
}

// Work units [begin, end) of kGemvUnitRows weight rows.
void quant_gemv_impl(const QuantPlan& plan, size_t begin, size_t end) {
  const int64_t j_begin = static_cast<int64_t>(begin) * cpu_detail::kGemvUnitRows;
  int64_t j_end = static_cast<int64_t>(end) * cpu_detail::kGemvUnitRows;
  if (j_end > plan.n) j_end = plan.n;
  switch (plan.format) {
    case QuantFormat::Fp8: return GemvFormat<QuantFormat::Fp8>(plan, j_begin, j_end);
    case QuantFormat::Mxfp8: return GemvFormat<QuantFormat::Mxfp8>(plan, j_begin, j_end);
    case QuantFormat::Nvfp4: return GemvFormat<QuantFormat::Nvfp4>(plan, j_begin, j_end);
    case QuantFormat::Bf16: return GemvFormat<QuantFormat::Bf16>(plan, j_begin, j_end);
  }
}

// ---------------------------------------------------------------- GEMM (m > 4): panels

// Stores one weight step of kCols rows into a panel of row stride k.
template <int kCols>
struct PanelVisitor {
  float* panel;
  int64_t k;
  HWY_INLINE void operator()(int64_t e, const VF* wv, size_t count) const {
    const DF d;
    for (int q = 0; q < kCols; ++q) {
      if (count == hn::Lanes(d)) hn::StoreU(wv[q], d, panel + q * k + e);
      else StoreTail(d, wv[q], panel + q * k + e, count);
    }
  }
};

template <QuantFormat F, int kCols>
HWY_INLINE void DequantRows(const QuantPlan& plan, int64_t j0, float* panel) {
  const PanelVisitor<kCols> visit{panel, plan.k};
  ForEachWeightVector<F, kCols>(plan, j0, false, visit);
}

template <QuantFormat F>
void GemmPanels(const QuantPlan& plan, size_t unit_begin, size_t unit_end, float* panel) {
  const int64_t k = plan.k;
  for (size_t u = unit_begin; u < unit_end; ++u) {
    const int64_t j0 = static_cast<int64_t>(u) * cpu::kQuantPanelRows;
    const int64_t rows = plan.n - j0 < cpu::kQuantPanelRows ? plan.n - j0 : cpu::kQuantPanelRows;
    int64_t q = 0;
    for (; q + 4 <= rows; q += 4) DequantRows<F, 4>(plan, j0 + q, panel + q * k);
    for (; q < rows; ++q) DequantRows<F, 1>(plan, j0 + q, panel + q * k);
    const float* bias = plan.w8a8 || plan.bias == nullptr ? nullptr : plan.bias + j0;
    LinearTile(plan.x, k, panel, k, bias, plan.y + j0, plan.n, k, 0, plan.m, 0, rows);
    if (plan.w8a8) {
      for (int64_t i = 0; i < plan.m; ++i) W8a8Epilogue(plan, i, j0, j0 + rows);
    }
  }
}

// Task `task` of plan.tasks: a contiguous range of panels, dequantized into the task's own slot.
void quant_gemm_impl(const QuantPlan& plan, size_t task) {
  const size_t begin = plan.units * task / plan.tasks, end = plan.units * (task + 1) / plan.tasks;
  float* panel = plan.panels + task * plan.slot_floats;
  switch (plan.format) {
    case QuantFormat::Fp8: return GemmPanels<QuantFormat::Fp8>(plan, begin, end, panel);
    case QuantFormat::Mxfp8: return GemmPanels<QuantFormat::Mxfp8>(plan, begin, end, panel);
    case QuantFormat::Nvfp4: return GemmPanels<QuantFormat::Nvfp4>(plan, begin, end, panel);
    case QuantFormat::Bf16: return GemmPanels<QuantFormat::Bf16>(plan, begin, end, panel);
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(quant_gemv_impl);
EMBER_HWY_EXPORT(quant_gemm_impl);

namespace cpu_detail {

const float* e4m3fn_table() {
  struct Table {
    float values[256];
    Table() {
      for (int c = 0; c < 256; ++c) values[c] = e4m3fn_to_f32(static_cast<uint8_t>(c));
    }
  };
  static const Table table;  // built on first use; no heap
  return table.values;
}

namespace {

constexpr double kMinParallelWork = 1 << 18;  // weight elements (GEMV) or flops (GEMM)

long long ll(int64_t v) { return static_cast<long long>(v); }

size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
size_t mul_sat(size_t a, size_t b) { return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b; }
size_t round64(size_t a) { return a > SIZE_MAX - 63 ? SIZE_MAX : (a + 63) / 64 * 64; }

// The quantized activations of W8A8: m * k values, then m scales.
size_t w8a8_bytes(int64_t m, int64_t k) {
  return add_sat(round64(mul_sat(mul_sat(size_t(m), size_t(k)), 4)), round64(size_t(m) * 4));
}
size_t slot_bytes(int64_t k) {
  return round64(mul_sat(mul_sat(size_t(cpu::kQuantPanelRows), size_t(k)), 4));
}

Status check_dims(int64_t m, int64_t n, int64_t k, ErrorContext* error) {
  if (m < 0 || n < 0 || k < 0) {
    return EMBER_FAIL(error, Error::InvalidArgument, "linear m = %lld, n = %lld, k = %lld: negative",
                      ll(m), ll(n), ll(k));
  }
  auto fits = [](int64_t a, int64_t b) { return a == 0 || b <= INT64_MAX / 2 / a; };
  if (!fits(m, k) || !fits(n, k) || !fits(m, n)) {
    return EMBER_FAIL(error, Error::InvalidArgument, "linear m = %lld, n = %lld, k = %lld: too large",
                      ll(m), ll(n), ll(k));
  }
  return Status::ok();
}

Status check_pointers(const QuantPlan& p, const void* scales, bool has_scales, ErrorContext* error) {
  const char* missing = nullptr;
  if (p.m * p.k > 0 && p.x == nullptr) missing = "x";
  else if (p.n * p.k > 0 && p.w == nullptr) missing = "the weight";
  else if (has_scales && p.n * p.k > 0 && scales == nullptr) missing = "the weight scales";
  else if (p.m * p.n > 0 && p.y == nullptr) missing = "y";
  if (missing != nullptr) return EMBER_FAIL(error, Error::InvalidArgument, "linear: %s is null", missing);
  return Status::ok();
}

Status check_fp8_blocks(int64_t block_n, int64_t block_k, ErrorContext* error) {
  if (block_n < 1 || block_k < 1) {
    return EMBER_FAIL(error, Error::InvalidArgument, "FP8 block [%lld, %lld] must be at least [1, 1]",
                      ll(block_n), ll(block_k));
  }
  return Status::ok();
}

Status check_multiple(int64_t k, int64_t block, const char* scheme, ErrorContext* error) {
  if (k % block != 0) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "%s needs k to be a multiple of %lld, got k = %lld", scheme, ll(block), ll(k));
  }
  return Status::ok();
}

void gemv_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(quant_gemv_impl)(*static_cast<const QuantPlan*>(plan), begin, end);
}

void gemm_task(void* plan, size_t task) {
  EMBER_HWY_DISPATCH(quant_gemm_impl)(*static_cast<const QuantPlan*>(plan), task);
}

struct QuantizeRows {
  const float* x;
  int64_t k;
  float* xq;
  float* sx;
};

void quantize_units(const void* arg, size_t begin, size_t end) {
  const QuantizeRows& a = *static_cast<const QuantizeRows*>(arg);
  cpu::quantize_rows_e4m3fn(a.x, a.k, begin, end, a.xq, a.sx);
}

Status run(const KernelContext& context, QuantPlan& plan, ErrorContext* error) {
  if (plan.m == 0 || plan.n == 0) return Status::ok();
  if (plan.k == 0) {  // x wᵀ is all zeros: y = bias, or 0
    for (int64_t i = 0; i < plan.m; ++i)
      for (int64_t j = 0; j < plan.n; ++j) plan.y[i * plan.n + j] = plan.bias != nullptr ? plan.bias[j] : 0.0f;
    return Status::ok();
  }
  ThreadPool* pool = context.pool;
  const size_t threads = pool != nullptr ? pool->thread_count() : 1;
  const bool gemv = plan.m <= cpu::kQuantGemvMaxRows;
  // The scratch, aligned to 64 bytes; its minimum is the W8A8 rows plus one GEMM slot.
  uint8_t* cursor = context.scratch.data();
  const size_t pad = (64 - reinterpret_cast<uintptr_t>(cursor) % 64) % 64;
  size_t avail = context.scratch.size() > pad ? context.scratch.size() - pad : 0;
  cursor += pad;
  const size_t activations = plan.w8a8 ? w8a8_bytes(plan.m, plan.k) : 0;
  const size_t slot = gemv ? 0 : slot_bytes(plan.k);
  const size_t need = add_sat(activations, slot);
  if (need > 0 && avail < need) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "quantized linear [%lld, %lld] x [%lld, %lld]: scratch of %zu bytes is too small "
                      "(quantized_linear_scratch_bytes)", ll(plan.m), ll(plan.k), ll(plan.n),
                      ll(plan.k), context.scratch.size());
  }
  if (plan.w8a8) {
    const size_t values = round64(size_t(plan.m) * size_t(plan.k) * 4);
    QuantizeRows q{plan.x, plan.k, reinterpret_cast<float*>(cursor),
                   reinterpret_cast<float*>(cursor + values)};
    run_units(pool, size_t(plan.m), double(plan.m) * double(plan.k), kMinParallelWork, &q,
              quantize_units);
    plan.x = q.xq;
    plan.sx = q.sx;
    cursor += activations;
    avail -= activations;
  }
  if (gemv) {
    const size_t units = size_t((plan.n + kGemvUnitRows - 1) / kGemvUnitRows);
    run_units(pool, units, double(plan.n) * double(plan.k), kMinParallelWork, &plan, gemv_units);
    return Status::ok();
  }
  plan.units = size_t((plan.n + cpu::kQuantPanelRows - 1) / cpu::kQuantPanelRows);
  size_t tasks = avail / slot;
  if (tasks > threads) tasks = threads;
  if (tasks > plan.units) tasks = plan.units;
  if (2.0 * double(plan.m) * double(plan.n) * double(plan.k) < kMinParallelWork) tasks = 1;
  plan.tasks = tasks;
  plan.panels = reinterpret_cast<float*>(cursor);
  plan.slot_floats = slot / sizeof(float);
  parallel_for(pool, tasks, gemm_task, &plan);
  return Status::ok();
}

QuantPlan make_plan(QuantFormat format, const float* x, int64_t m, const void* w, int64_t n,
                    int64_t k, const float* bias, float* y) {
  QuantPlan p{};
  p.format = format;
  p.x = x;
  p.m = m;
  p.n = n;
  p.k = k;
  p.w = static_cast<const uint8_t*>(w);
  p.bias = bias;
  p.y = y;
  p.block_n = 1;
  p.block_k = k > 0 ? k : 1;
  p.block_cols = 1;
  return p;
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

using cpu_detail::QuantFormat;
using cpu_detail::QuantPlan;

size_t quantized_linear_scratch_bytes(int64_t m, int64_t k, size_t thread_count, bool w8a8) {
  if (m <= 0 || k <= 0) return 0;
  size_t bytes = w8a8 ? cpu_detail::w8a8_bytes(m, k) : 0;
  if (m > kQuantGemvMaxRows) {
    bytes = cpu_detail::add_sat(bytes, cpu_detail::mul_sat(thread_count > 0 ? thread_count : 1,
                                                           cpu_detail::slot_bytes(k)));
  }
  return bytes == 0 ? 0 : cpu_detail::add_sat(bytes, 64);  // + alignment slack
}

Status linear_fp8_e4m3(const KernelContext& context, const float* x, int64_t m,
                       const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                       int64_t block_k, const float* scales, const float* bias, float* y,
                       ErrorContext* error) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_fp8_blocks(block_n, block_k, error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Fp8, x, m, codes, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  // Blocks larger than the weight act as the whole dimension (and keep index math small).
  p.block_n = block_n < n ? block_n : (n > 0 ? n : 1);
  p.block_k = block_k < k ? block_k : (k > 0 ? k : 1);
  p.block_cols = (k + p.block_k - 1) / p.block_k;
  p.fp8_scales = scales;
  p.row_bytes = k;
  return cpu_detail::run(context, p, error);
}

Status linear_mxfp8(const KernelContext& context, const float* x, int64_t m, const uint8_t* codes,
                    int64_t n, int64_t k, const uint8_t* scales, const float* bias, float* y,
                    ErrorContext* error) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_multiple(k, 32, "MXFP8", error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Mxfp8, x, m, codes, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  p.block_k = 32;
  p.block_cols = k / 32;
  p.u8_scales = scales;
  p.row_bytes = k;
  return cpu_detail::run(context, p, error);
}

Status linear_nvfp4(const KernelContext& context, const float* x, int64_t m,
                    const uint8_t* packed, int64_t n, int64_t k, const uint8_t* scales,
                    float global_scale, const float* bias, float* y, ErrorContext* error) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_multiple(k, 16, "NVFP4", error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Nvfp4, x, m, packed, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  if (!(global_scale > 0.0f) || !std::isfinite(global_scale)) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "NVFP4 global scale %g must be finite and greater than 0",
                      static_cast<double>(global_scale));
  }
  p.block_k = 16;
  p.block_cols = k / 16;
  p.u8_scales = scales;
  p.global_scale = global_scale;
  p.row_bytes = k / 2;
  return cpu_detail::run(context, p, error);
}

Status linear_bf16(const KernelContext& context, const float* x, int64_t m, const uint16_t* w,
                   int64_t n, int64_t k, const float* bias, float* y, ErrorContext* error) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Bf16, x, m, w, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, nullptr, false, error));
  p.row_bytes = 2 * k;
  return cpu_detail::run(context, p, error);
}

Status linear_fp8_e4m3_w8a8(const KernelContext& context, const float* x, int64_t m,
                            const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                            int64_t block_k, const float* scales, const float* bias, float* y,
                            ErrorContext* error) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_fp8_blocks(block_n, block_k, error));
  if (block_k < k || (block_n != 1 && block_n < n)) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "W8A8 needs a per-tensor or per-channel FP8 weight scale; block [%lld, %lld] "
                      "of a [%lld, %lld] weight is neither", cpu_detail::ll(block_n),
                      cpu_detail::ll(block_k), cpu_detail::ll(n), cpu_detail::ll(k));
  }
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Fp8, x, m, codes, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  p.w8a8 = true;
  p.block_n = block_n == 1 ? 1 : (n > 0 ? n : 1);  // 1: per channel; n: per tensor
  p.fp8_scales = scales;
  p.row_bytes = k;
  return cpu_detail::run(context, p, error);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
