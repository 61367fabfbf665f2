// Per-target pieces of kernels/cpu/quantized_linear.cc: the type aliases and fixed powers of two,
// the e4m3 / e2m1 decoders, the block-scale tables (ScaleRow, FoldRow) and the accumulator block
// (Accum) that every row walker uses. Included once per Highway target by quantized_linear.cc,
// after kernels/cpu/quantized_linear_plan.h.
#if defined(EMBER_KERNELS_CPU_QUANTIZED_LINEAR_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef EMBER_KERNELS_CPU_QUANTIZED_LINEAR_DECODE_INL_H_
#undef EMBER_KERNELS_CPU_QUANTIZED_LINEAR_DECODE_INL_H_
#else
#define EMBER_KERNELS_CPU_QUANTIZED_LINEAR_DECODE_INL_H_
#endif

#include <cmath>
#include <cstdint>

#include "hwy/highway.h"
#include "kernels/cpu/hwy_util-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::QuantFormat;
using cpu_detail::QuantPlan;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;

static_assert(8 * HWY_MAX_BYTES / 4 <= cpu_detail::kMaxGroup, "an NVFP4 group must fit kMaxGroup");

// Powers of two of the e4m3 path: raw = value * 2^kRawExp, folded scale = s * 2^kFoldExp, x' =
// x * 2^c with max|x'| in [2^(kXExp - 1), 2^kXExp). The SCALAR target reads exact values from a
// table and needs none of it.
#if HWY_TARGET == HWY_SCALAR
constexpr int kRawExp = 0, kFoldExp = 0, kXExp = 0;
#else
constexpr int kRawExp = -120, kFoldExp = 90, kXExp = 31;
#endif
constexpr float kFold = kFoldExp == 0 ? 1.0f : 0x1p90f;
constexpr float kUnraw = kRawExp == 0 ? 1.0f : 0x1p120f;      // raw -> value
constexpr float kPrescale = kRawExp == 0 ? 1.0f : 0x1p-30f;   // 2^(kRawExp + kFoldExp)
constexpr float kFoldLimit = 0x1p38f;  // |s| below this folds exactly and keeps s * 2^90 finite

template <QuantFormat F>
constexpr bool IsE4m3() {
  return F == QuantFormat::Fp8 || F == QuantFormat::Mxfp8;
}

HWY_INLINE VF QuietNan(DF d) { return hn::BitCast(d, hn::Set(DI(), 0x7FC00000)); }

// ---------------------------------------------------------------- decoders

// e4m3 codes p[0, L) -> value * 2^kRawExp per lane. kFixNan: codes 0x7F / 0xFF give NaN (otherwise
// they give 480 * 2^-120 and the caller must know there are none).
template <bool kFixNan>
HWY_INLINE VF RawE4m3(const uint8_t* p) {
  const DF d;
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(d, cpu_detail::e4m3fn_table()[p[0]]);
#else
  const DI di;
  const hn::Rebind<int8_t, DF> d8;
  const auto v = hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p)));
  // Sign-extended: bits 31..27 hold the sign; keep bit 31 and the magnitude at 26..20.
  const VF raw = hn::BitCast(d, hn::And(hn::ShiftLeft<20>(v), hn::Set(di, int32_t(0x87F00000u))));
  if constexpr (!kFixNan) return raw;
  const auto mag = hn::And(v, hn::Set(di, 0x7F));
  return hn::IfThenElse(hn::RebindMask(d, hn::Eq(mag, hn::Set(di, 0x7F))), QuietNan(d), raw);
#endif
}

// The e2m1 values of the low nibble of every lane (higher bits ignored).
HWY_INLINE VF E2m1Low(hn::Vec<DU> v) {
  const DF d;
  alignas(64) static constexpr float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // vpermps reads the low 4 bits of each index.
  return VF{_mm512_permutexvar_ps(v.raw, hn::Load(d, kValues).raw)};
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  // 8-lane vpermps reads the low 3 bits (the magnitude); bit 3 is the sign, moved to bit 31. A
  // gather per 8 codes (the generic path) costs several times more, and much more on CPUs whose
  // vgatherdps is microcoded.
  const __m256 mag = _mm256_permutevar8x32_ps(_mm256_load_ps(kValues), v.raw);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(v.raw, _mm256_set1_epi32(8)), 28);
  (void)d;
  return VF{_mm256_or_ps(mag, _mm256_castsi256_ps(sign))};
#else
  const auto idx = hn::BitCast(DI(), hn::And(v, hn::Set(DU(), 0xFu)));
  return hn::GatherIndex(d, kValues, idx);
#endif
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// The e2m1 values of bits 16..19 of every lane: vpermw looks up the upper u16 half of each lane in
// a table of the values' bf16 bits (exact: e2m1 values have 2 significant bits) and zero-masks
// the lower half, so the lane is the f32 value. With E2m1Low, one shifted group gives two planes.
HWY_INLINE VF E2m1High(hn::Vec<DU> v) {
  alignas(64) static constexpr uint16_t kBf16[32] = {
      0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,   // 0 .. 6
      0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0,   // -0 .. -6
      0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,   // vpermw reads 5 bits:
      0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};  // bit 20 is ignored here
  const __m512i table = _mm512_load_si512(reinterpret_cast<const void*>(kBf16));
  return VF{_mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, v.raw, table))};
}
#endif

// Whether an NVFP4 group may be decoded by E2m1Indices / E2m1Four (byte shuffles within 128-bit
// blocks) instead of plane by plane with E2m1Low: x86 below AVX-512 (SSSE3 .. AVX2; AVX-512's
// vpermps + vpermw take fewer operations), NEON and EMU128 (whose gathers are scalar loops).
// Scalable targets keep the gather: their TableLookupBytes / Interleave* blocks are not checked
// here. Only SSSE3, SSE4 and AVX2 run in the x86 tests (NEON: not compiled here; EMU128: compiled
// with clang-14, GCC 12 being too old for Highway's EMU128, and checked by hand, see the commit).
#undef EMBER_QL_E2M1_SHUFFLE
#if (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3 && HWY_TARGET != HWY_SCALAR) || HWY_TARGET == HWY_NEON || \
    HWY_TARGET == HWY_EMU128
#define EMBER_QL_E2M1_SHUFFLE 1
#else
#define EMBER_QL_E2M1_SHUFFLE 0
#endif

#if EMBER_QL_E2M1_SHUFFLE
using D8 = hn::Repartition<uint8_t, DF>;

// Walkers over more rows of x than this decode plane by plane (E2m1Low): see Nvfp4Group.
constexpr int kE2m1ShuffleMaxRows = HWY_ARCH_X86 ? 1 : 8;

// The 8 planes of an NVFP4 group v, in two halves: plane n, lane l = the e2m1 value of nibble n of
// lane l of v, the same values as E2m1Low(v >> 4n). Per 128-bit block (4 lanes, 16 bytes, 32
// nibbles), with byte shuffles from two 16-entry tables (the high and the next byte of each
// value's f32 bits; the low 16 bits are zero: e2m1 values have 2 significant bits):
//   t      = the block's bytes transposed, t[4j + l] = byte j of lane l (nibbles 2j, 2j + 1);
//   idx[h] = (t & 15, t >> 4) interleaved, bytes 8h .. 8h + 7 of t: the nibbles of bytes 2h and
//            2h + 1 of lanes 0..3, low then high (E2m1Indices);
//   two lookups of idx[h] (next byte, high byte) interleaved into u16 pairs: the u32 lane l holds
//   the values of nibbles 2j and 2j + 1 of lane l as bf16, so plane 2j is the lane << 16 and
//   plane 2j + 1 the lane & 0xFFFF0000, as the bf16 walker splits them (E2m1Four: planes 4h ..
//   4h + 3).
// Per 64 weights on AVX2: 22 operations (5 of them vpshufb), against 40 for E2m1Low's shift,
// vpermps and sign bit (8 vpermps).
HWY_INLINE void E2m1Indices(hn::Vec<DU> v, hn::Vec<D8>* idx) {
  const D8 d8;
  const hn::Repartition<uint16_t, DF> d16;
  alignas(16) static constexpr uint8_t kTranspose[16] = {0, 4, 8, 12, 1, 5, 9, 13,
                                                         2, 6, 10, 14, 3, 7, 11, 15};
  const auto t = hn::TableLookupBytes(hn::BitCast(d8, v), hn::LoadDup128(d8, kTranspose));
  const auto nibble = hn::Set(d8, uint8_t{0x0F});
  const auto lo = hn::And(t, nibble);
  const auto hi = hn::And(hn::BitCast(d8, hn::ShiftRight<4>(hn::BitCast(d16, t))), nibble);
  idx[0] = hn::InterleaveLower(d8, lo, hi);
  idx[1] = hn::InterleaveUpper(d8, lo, hi);
}

HWY_INLINE void E2m1Four(hn::Vec<D8> idx, VF* w) {
  const DF d;
  const DU du;
  const D8 d8;
  // Bits 31..24 and 23..16 of 0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, ..., -6.
  alignas(16) static constexpr uint8_t kHigh[16] = {0x00, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40,
                                                    0x80, 0xBF, 0xBF, 0xBF, 0xC0, 0xC0, 0xC0, 0xC0};
  alignas(16) static constexpr uint8_t kNext[16] = {0x00, 0x00, 0x80, 0xC0, 0x00, 0x40, 0x80, 0xC0,
                                                    0x00, 0x00, 0x80, 0xC0, 0x00, 0x40, 0x80, 0xC0};
  const auto h = hn::TableLookupBytes(hn::LoadDup128(d8, kHigh), idx);
  const auto b = hn::TableLookupBytes(hn::LoadDup128(d8, kNext), idx);
  const auto p01 = hn::BitCast(du, hn::InterleaveLower(d8, b, h));
  const auto p23 = hn::BitCast(du, hn::InterleaveUpper(d8, b, h));
  const auto top = hn::Set(du, 0xFFFF0000u);
  w[0] = hn::BitCast(d, hn::ShiftLeft<16>(p01));
  w[1] = hn::BitCast(d, hn::And(p01, top));
  w[2] = hn::BitCast(d, hn::ShiftLeft<16>(p23));
  w[3] = hn::BitCast(d, hn::And(p23, top));
}
#endif

// ---------------------------------------------------------------- scales

constexpr int64_t kMaxChunkBlocks = 130;
constexpr int64_t kMaxChunkSteps = 128;
// A chunk's scales, with room for one vector read past the last block (zeros).
constexpr int64_t kMultSize = kMaxChunkBlocks + HWY_MAX_BYTES / 4;

template <QuantFormat F>
HWY_INLINE bool Foldable(float s) {
  if constexpr (IsE4m3<F>()) {
    return std::fabs(s) < kFoldLimit;  // false for Inf and NaN
  } else {
    return std::isfinite(s);
  }
}

// The exact scales of block columns [b0, b0 + count) of weight row j (plan.scale) into out, and
// zeros after them up to kMultSize; returns whether all of them fold.
template <QuantFormat F>
HWY_INLINE bool ScaleRow(const QuantPlan& plan, int64_t j, int64_t b0, int64_t count, float* out) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  bool ok = true;
  if (HWY_TARGET == HWY_SCALAR || count < lanes) {  // few blocks (per channel, per tensor): scalar
    for (int64_t b = 0; b < count; ++b) {
      out[b] = plan.scale(j, b0 + b);
      ok = ok && Foldable<F>(out[b]);
    }
  } else {
#if HWY_TARGET != HWY_SCALAR
    const hn::Rebind<uint8_t, DF> d8;
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
        const auto v = hn::PromoteTo(DU(), full ? hn::LoadU(d8, p) : LoadTail(d8, p, n));
        if constexpr (F == QuantFormat::Mxfp8) {  // e8m0: 2^(v - 127); 0 is 2^-127, 0xFF NaN
          auto bits = hn::ShiftLeft<23>(v);
          bits = hn::IfThenElse(hn::Eq(v, hn::Zero(DU())), hn::Set(DU(), 0x00400000u), bits);
          bits = hn::IfThenElse(hn::Eq(v, hn::Set(DU(), 0xFFu)), hn::Set(DU(), 0x7FC00000u), bits);
          s = hn::BitCast(d, bits);
        } else {  // ue4m3 (codes above kUe4m3MaxValidCode are invalid: NaN), times the global scale
          const VF value = hn::Mul(hn::BitCast(d, hn::ShiftLeft<20>(v)), hn::Set(d, 0x1p120f));
          const auto invalid =
              hn::RebindMask(d, hn::Gt(hn::BitCast(DI(), v), hn::Set(DI(), int32_t{kUe4m3MaxValidCode})));
          s = hn::Mul(hn::Set(d, plan.global_scale), hn::IfThenElse(invalid, QuietNan(d), value));
        }
      }
      if constexpr (IsE4m3<F>()) {
        ok = ok && hn::AllTrue(d, hn::Lt(hn::Abs(s), hn::Set(d, kFoldLimit)));
      } else {
        ok = ok && hn::AllTrue(d, hn::Lt(hn::Abs(s), hn::Set(d, HUGE_VALF)));
      }
      if (full) hn::StoreU(s, d, out + b); else StoreTail(d, s, out + b, n);
    }
#endif
  }
  // Zeros for the one vector the NVFP4 walker may read past the last block.
  const int64_t pad_end = count + HWY_MAX_BYTES / 4 < kMultSize ? count + HWY_MAX_BYTES / 4 : kMultSize;
  for (int64_t b = count; b < pad_end; ++b) out[b] = 0.0f;
  return ok;
}

// out[b] *= kFold for b < count (e4m3 formats).
HWY_INLINE void FoldRow(float* out, int64_t count) {
  if (kFold == 1.0f) return;
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const VF fold = hn::Set(d, kFold);
  int64_t b = 0;
  for (; b + lanes <= count; b += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, out + b), fold), d, out + b);
  for (; b < count; ++b) out[b] *= kFold;
}

// Whether all `count` bytes at p are below `bound`.
HWY_INLINE bool AllBelow(const uint8_t* p, int64_t count, uint8_t bound) {
#if HWY_TARGET == HWY_SCALAR
  for (int64_t i = 0; i < count; ++i) {
    if (p[i] >= bound) return false;
  }
  return true;
#else
  const hn::Repartition<uint8_t, DF> d8;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d8));
  auto mx = hn::Zero(d8);
  int64_t i = 0;
  for (; i + n <= count; i += n) mx = hn::Max(mx, hn::LoadU(d8, p + i));
  if (i < count) mx = hn::Max(mx, LoadTail(d8, p + i, static_cast<size_t>(count - i)));
  return hn::AllTrue(d8, hn::Lt(mx, hn::Set(d8, bound)));
#endif
}

// ---------------------------------------------------------------- accumulation

// kRows x kCols outputs: acc and the block partial sums p, lane-wise.
template <int kRows, int kCols>
struct Accum {
  VF acc[kRows][kCols];
  VF acc2[kRows][kCols];  // NVFP4: the odd planes' accumulator (Flush4), added to acc at the end
  VF p[kRows][kCols];
  // NVFP4: planes n % 4 = 1, 2, 3 go to p2, p3, p4 (four chains hide the FMA latency: with two,
  // a group of 8 planes waited ~16 cycles on them).
  VF p2[kRows][kCols], p3[kRows][kCols], p4[kRows][kCols];
  const float* x;  // prepared row 0; row r at x + r * kp
  int64_t kp;

  HWY_INLINE void Init(const float* rows, int64_t stride) {
    const DF d;
    x = rows;
    kp = stride;
    for (int r = 0; r < kRows; ++r) {
      for (int q = 0; q < kCols; ++q) {
        acc[r][q] = acc2[r][q] = p[r][q] = p2[r][q] = p3[r][q] = p4[r][q] = hn::Zero(d);
      }
    }
  }
  // The parts the e4m3 and bf16 walkers use (x, acc, p), copied between an Accum and a local one.
  HWY_INLINE void CopyMainFrom(const Accum& o) {
    x = o.x;
    kp = o.kp;
    for (int r = 0; r < kRows; ++r) {
      for (int q = 0; q < kCols; ++q) {
        acc[r][q] = o.acc[r][q];
        p[r][q] = o.p[r][q];
      }
    }
  }
  // What the NVFP4 walker carries from group to group (x, acc, acc2; p .. p4 restart per group).
  HWY_INLINE void CopyNvfp4From(const Accum& o) {
    x = o.x;
    kp = o.kp;
    for (int r = 0; r < kRows; ++r) {
      for (int q = 0; q < kCols; ++q) {
        acc[r][q] = o.acc[r][q];
        acc2[r][q] = o.acc2[r][q];
      }
    }
  }
  // chain (p, p2, p3, p4)[kChain] = x'[e, e + L) * w (kFirst: the chain's first step) or += it,
  // for each row of x and each weight row. x' rows are 64-byte aligned and e is a multiple of L.
  template <bool kFirst, int kChain = 0>
  HWY_INLINE void Step(int64_t e, const VF* w) {
    const DF d;
    VF (&c)[kRows][kCols] = kChain == 0 ? p : (kChain == 1 ? p2 : (kChain == 2 ? p3 : p4));
    for (int r = 0; r < kRows; ++r) {
      const VF xv = hn::Load(d, x + r * kp + e);
      for (int q = 0; q < kCols; ++q) c[r][q] = kFirst ? hn::Mul(xv, w[q]) : hn::MulAdd(xv, w[q], c[r][q]);
    }
  }
  // acc = (p + p3) * s + acc, acc2 = (p2 + p4) * s + acc2 (two independent accumulator chains).
  HWY_INLINE void Flush4(const VF* s) {
    for (int r = 0; r < kRows; ++r) {
      for (int q = 0; q < kCols; ++q) {
        acc[r][q] = hn::MulAdd(hn::Add(p[r][q], p3[r][q]), s[q], acc[r][q]);
        acc2[r][q] = hn::MulAdd(hn::Add(p2[r][q], p4[r][q]), s[q], acc2[r][q]);
      }
    }
  }
  // acc = (p + p2) + acc (bf16's two chains, scale 1); the next Steps must be first ones.
  HWY_INLINE void Flush2() {
    for (int r = 0; r < kRows; ++r) {
      for (int q = 0; q < kCols; ++q) acc[r][q] = hn::Add(hn::Add(p[r][q], p2[r][q]), acc[r][q]);
    }
  }
  // acc += p * s (s per weight row); the next Step must be a first one.
  HWY_INLINE void Flush(const VF* s) {
    for (int r = 0; r < kRows; ++r) {
      for (int q = 0; q < kCols; ++q) acc[r][q] = hn::MulAdd(p[r][q], s[q], acc[r][q]);
    }
  }
};

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
