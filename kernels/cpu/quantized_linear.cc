// Linear layers with FP8 / MXFP8 / NVFP4 / bf16 weights (quantized_linear.h has the contract).
//
// Every output y[i, j] is computed by one fixed sequence of vector operations that depends on the
// weight and on row i of x only, never on m, on the thread count or on which path runs it:
//   x'  = row i of x, prepared once per call into the scratch: permuted to the order in which the
//         weight decoder produces elements, zero-padded to a whole group, and (e4m3 formats on SIMD
//         targets) multiplied by a power of two 2^c that puts max|x'| in [2^30, 2^31);
//   for each scale block b of row j (a group of lanes for NVFP4):
//       p = Σ x'_v · raw_v over the block's vectors (one FMA chain, lane-wise; NVFP4: four chains,
//       planes n % 4, to hide the FMA latency), then
//       acc = p · s'_b + acc (one FMA), s'_b = the block scale times a fixed power of two (NVFP4:
//       acc = (p + p3) · s + acc, acc2 = (p2 + p4) · s + acc2);
//   y = f32(sum of the lanes of acc (NVFP4: acc + acc2) · 2^e_i) (+ bias), e_i undoing 2^c and the
//   fixed powers of two.
// The walkers take kCols = 4 weight rows side by side (FP8 / MXFP8, m = 1..2; 2 for m = 3..6 and
// GEMM row groups; 1 for NVFP4 and for bf16 decode, 2 for bf16 prefill on AVX-512, see RowGroup),
// so one x' vector serves kCols FMAs, and prefetch the rows at least kPrefetchBytes ahead. A GEMM
// runs the same micro-kernel over groups of rows of x (6 for FP8 / MXFP8 on AVX-512, else 4) per
// unit of 16 weight rows (the unit's weights stay in cache after the first group), so prefill and
// decode give a row the same bits. bf16 puts even and odd elements on two chains (p, p2).
// "raw" is the code's value times a power of two, exact: e4m3 through a bit trick (sign << 31 |
// magnitude << 20 read as an f32 is value · 2^-120, e4m3 subnormals landing on f32 subnormals),
// e2m1 through a 16-entry table (vpermps / vpermw on AVX-512; byte shuffles below it and on NEON,
// see E2m1Indices; a gather elsewhere), bf16 by a shift. The
// block scale is applied once per block instead of once per element, which is what makes the
// GEMV cheap enough to run at memory speed; its rounding differs from "dequantize, then f32" by
// f32 dot-product error (tests: relative L2 <= 1e-5 against the reference).
//
// Weight element order per group (x' follows it):
// - e4m3 (FP8, MXFP8): natural order, one vector of L = Lanes codes per step.
// - NVFP4: a group of 8L elements is one L-lane u32 load (4 bytes = 8 nibbles per lane); plane n
//   (n = 0..7) is nibble n of every lane, so lane l of plane n is element 8l + n; lane l covers
//   elements 8l .. 8l + 7, i.e. half a 16-element block, and one flush per group scales each lane
//   pair by its block's scale. On AVX-512, per 32 elements: one shift (v >> 4n), a vpermps (plane
//   n, bits 0..3), a zero-masked vpermw (plane n + 4, bits 16..19) and two FMAs; with byte
//   shuffles (AVX2 / SSE4 / SSSE3 single rows, NEON, EMU128) all 8 planes of a group at once
//   (E2m1Indices, E2m1Four), then the same FMAs; elsewhere per plane (L elements) a shift, a
//   table lookup and an FMA.
// - bf16: a group of 2L elements is one L-lane u32 load; the even elements are lane << 16, the odd
//   ones lane & 0xFFFF0000.
//
// Magnitudes (e4m3 on SIMD): raw ≤ 448 · 2^-120 and |x'| < 2^31, so p stays far inside the normal
// range; an x element below 2^-24 · max|x| may make a subnormal product (a negligible term). The
// scale is folded as s · 2^90 when |s| < 2^38 (exact). A chunk whose scales do not fold (huge,
// Inf or NaN scales) and rows whose blocks straddle vectors (FP8 blocks along k that are not a
// multiple of L) take the pre-scaled path: w = (value · s) · 2^-30 per lane, the reference's
// dequantized weight (Inf where it overflows) times a power of two, flushed with s' = 1.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantized_linear.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_QUANTIZED_LINEAR_PLAN_
#define EMBER_KERNELS_CPU_QUANTIZED_LINEAR_PLAN_
#include "kernels/cpu/quantized_linear_plan.h"
#endif

// Sanitizer builds keep the row walkers out of line: clang-14 with ASan + UBSan + coverage spent
// over ten minutes on the fully inlined micro-kernels of this file.
#ifndef EMBER_QL_WALKER
#if defined(__SANITIZE_ADDRESS__)
#define EMBER_QL_WALKER HWY_NOINLINE
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_QL_WALKER HWY_NOINLINE
#endif
#endif
#ifndef EMBER_QL_WALKER
#define EMBER_QL_WALKER HWY_INLINE
#endif
#endif

#include "kernels/cpu/quantized_linear_decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {

// ---------------------------------------------------------------- e4m3 rows (FP8, MXFP8, W8A8)

// Whether any code in [begin, end) of the kCols rows is an e4m3 NaN (0x7F / 0xFF). Run once per
// row group unless the caller promised NaN-free codes (plan.nan_free: bind scans each constant once).
template <int kCols>
HWY_INLINE bool AnyNanCode(const uint8_t* const* rows, int64_t begin, int64_t end) {
#if HWY_TARGET == HWY_SCALAR
  (void)rows;
  (void)begin;
  (void)end;
  return false;  // the table decodes NaN codes to NaN
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

// Whether the aligned group of 4 weight rows around j0 holds a NaN code.
HWY_INLINE bool GroupHasNanCode(const QuantPlan& plan, int64_t j0) {
  const int64_t g0 = j0 / 4 * 4, g1 = g0 + 4 < plan.n ? g0 + 4 : plan.n;
  const uint8_t* rows[4];
  for (int q = 0; q < 4; ++q) rows[q] = plan.w + (g0 + q < g1 ? g0 + q : g1 - 1) * plan.row_bytes;
  return AnyNanCode<4>(rows, 0, plan.k);
}

// Streams of kCols rows that each cover one 4 KiB page or so get little from the hardware
// prefetchers, so the walker prefetches kCols rows further on (`next`: the first of them, at
// least kPrefetchBytes ahead, see RowGroup) at the byte offset it reads, spread over the steps
// (measured on fp8 per channel from DRAM, 1 thread: 21 GiB/s, against 11 without software
// prefetch and 14 with one burst per chunk).
template <int kCols>
HWY_INLINE void PrefetchNext(const uint8_t* next, int64_t row_bytes, int64_t offset) {
  for (int q = 0; q < kCols; ++q) __builtin_prefetch(next + q * row_bytes + offset);
}

// Raw e4m3 codes [e, k) of a row (fewer than L: the last, partial step) through a zeroed buffer.
HWY_INLINE VF E4m3Tail(const uint8_t* row, int64_t e, int64_t k) {
  HWY_ALIGN uint8_t buf[HWY_MAX_BYTES] = {};
  std::memcpy(buf, row + e, static_cast<size_t>(k - e));
  return RawE4m3<true>(buf);
}

// Steps [e, end) of one block run, all full (end <= k rounded down to L); `first`: the run starts
// the block's partial sum.
template <int kRows, int kCols>
HWY_NOINLINE void E4m3Run(const uint8_t* const* rows, int64_t e, int64_t end, bool first,
                          const uint8_t* next, int64_t row_bytes, Accum<kRows, kCols>& acc) {
  Accum<kRows, kCols> a;  // in registers for the loop (see E4m3Blocks)
  a.CopyMainFrom(acc);
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const uint8_t* row[kCols];  // local copies (see E4m3Blocks)
  for (int q = 0; q < kCols; ++q) row[q] = rows[q];
  VF w[kCols];
  if (first && e < end) {
    if (next != nullptr && e % 64 == 0) PrefetchNext<kCols>(next, row_bytes, e);
    for (int q = 0; q < kCols; ++q) w[q] = RawE4m3<false>(row[q] + e);
    a.template Step<true>(e, w);
    e += lanes;
  }
  for (; e < end; e += lanes) {
    if (next != nullptr && e % 64 == 0) PrefetchNext<kCols>(next, row_bytes, e);
    for (int q = 0; q < kCols; ++q) w[q] = RawE4m3<false>(row[q] + e);
    a.template Step<false>(e, w);
  }
  acc.CopyMainFrom(a);
}

// nb whole blocks of kSteps steps each (kSteps = 0: `steps`, known at run time) starting at e, a
// block boundary; block b's folded scales are mult[q][b0 + b], or (kCodes, MXFP8 on SIMD targets)
// made from the e8m0 codes[q][b] directly: 2^(c - 127) * 2^kFoldExp is the float with biased
// exponent c + kFoldExp (c = 0 too: 2^-127 * 2^90 is normal), the same bits as FoldRow(ScaleRow),
// for the codes that fold (c <= 254 - kFoldExp, see E8m0GroupFolds).
template <int kSteps, bool kCodes, int kRows, int kCols>
HWY_NOINLINE void E4m3Blocks(const uint8_t* const* rows, int64_t e, int64_t nb, int64_t steps,
                             const float (*mult)[kMultSize], const uint8_t* const* codes,
                             int64_t b0, const uint8_t* next, int64_t row_bytes,
                             Accum<kRows, kCols>& acc) {
  // Out of line, with the accumulators copied into locals: the loop keeps them in registers
  // whatever the (large) caller looks like; inlined into it, register allocation varied with
  // unrelated code and the block loop ran up to 1.5x slower.
  Accum<kRows, kCols> a;
  a.CopyMainFrom(acc);
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t n = kSteps > 0 ? kSteps : steps;
  // Local copies: VF stores may alias anything (the vector types are may_alias), which would make
  // the compiler reload rows[] from memory at every step.
  const uint8_t* row[kCols];
  for (int q = 0; q < kCols; ++q) row[q] = rows[q];
  const uint8_t* code[kCols];
  for (int q = 0; q < kCols; ++q) code[q] = kCodes ? codes[q] : nullptr;
  VF w[kCols], s[kCols];
  for (int64_t b = 0; b < nb; ++b) {
    if (next != nullptr && e % 64 == 0) PrefetchNext<kCols>(next, row_bytes, e);
    for (int q = 0; q < kCols; ++q) w[q] = RawE4m3<false>(row[q] + e);
    a.template Step<true>(e, w);
    e += lanes;
#pragma GCC unroll 16
    for (int64_t t = 1; t < n; ++t, e += lanes) {
      if (next != nullptr && e % 64 == 0) PrefetchNext<kCols>(next, row_bytes, e);
      for (int q = 0; q < kCols; ++q) w[q] = RawE4m3<false>(row[q] + e);
      a.template Step<false>(e, w);
    }
    for (int q = 0; q < kCols; ++q) {
      if constexpr (kCodes) {
        s[q] = hn::BitCast(d, hn::Set(DU(), (uint32_t{code[q][b]} + uint32_t{kFoldExp}) << 23));
      } else {
        s[q] = hn::Set(d, mult[q][b0 + b]);
      }
    }
    a.Flush(s);
  }
  acc.CopyMainFrom(a);
}

template <bool kCodes, int kRows, int kCols>
HWY_INLINE void E4m3BlocksFor(const uint8_t* const* rows, int64_t e, int64_t nb, int64_t steps,
                              const float (*mult)[kMultSize], const uint8_t* const* codes,
                              int64_t b0, const uint8_t* next, int64_t row_bytes,
                              Accum<kRows, kCols>& a) {
  switch (steps) {  // the common block lengths, unrolled: MXFP8 (32) and 128 on 8 / 16 lanes
    case 2: return E4m3Blocks<2, kCodes>(rows, e, nb, steps, mult, codes, b0, next, row_bytes, a);
    case 4: return E4m3Blocks<4, kCodes>(rows, e, nb, steps, mult, codes, b0, next, row_bytes, a);
    case 8: return E4m3Blocks<8, kCodes>(rows, e, nb, steps, mult, codes, b0, next, row_bytes, a);
    case 16: return E4m3Blocks<16, kCodes>(rows, e, nb, steps, mult, codes, b0, next, row_bytes, a);
    default: return E4m3Blocks<0, kCodes>(rows, e, nb, steps, mult, codes, b0, next, row_bytes, a);
  }
}

// Whether the e8m0 codes of blocks [b0, b0 + count) fold (scale < kFoldLimit, not NaN: codes <=
// 254 - kFoldExp) in every row of the aligned group of 4 weight rows around j0 (the group decides,
// as in E4m3Rows).
HWY_INLINE bool E8m0GroupFolds(const QuantPlan& plan, int64_t j0, int64_t b0, int64_t count) {
  const int64_t g0 = j0 / 4 * 4, g1 = g0 + 4 < plan.n ? g0 + 4 : plan.n;
  for (int64_t j = g0; j < g1; ++j) {
    const uint8_t* codes = plan.u8_scales + j * plan.block_cols + b0;
    if (!AllBelow(codes, count, uint8_t{255 - kFoldExp})) return false;
  }
  return true;
}

// The rows j0 .. j0 + kCols of an e4m3 weight into acc (see the file comment).
template <QuantFormat F, int kRows, int kCols>
EMBER_QL_WALKER void E4m3Rows(const QuantPlan& plan, int64_t j0, int64_t prefetch_ahead,
                              Accum<kRows, kCols>& a) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t k = plan.k, k_full = k / lanes * lanes;
  const uint8_t* rows[kCols];
  for (int q = 0; q < kCols; ++q) rows[q] = plan.w + (j0 + q) * plan.row_bytes;
  const uint8_t* next = prefetch_ahead > 0 ? rows[0] + prefetch_ahead : nullptr;
  const int64_t bk = plan.block_k;
  const bool one_block = bk >= k;
  const bool uniform = one_block || bk % lanes == 0;  // no step straddles two blocks
  // Chunks of whole blocks where blocks are shorter than a chunk; whole steps always.
  int64_t chunk = kMaxChunkSteps * lanes;
  if (!one_block && bk < chunk) {
    const int64_t fit = (kMaxChunkBlocks - 2) * bk;
    chunk = (chunk < fit ? chunk : fit) / bk * bk;
  }
  chunk = chunk / lanes * lanes;
  if (chunk < lanes) chunk = lanes;
  // Rows with a NaN code take the pre-scaled path below for all chunks (exact: NaN where the
  // reference is NaN); like the fold, decided for the aligned group of 4 weight rows around j0,
  // never for this walker's kCols rows.
  const bool nan = !plan.nan_free && GroupHasNanCode(plan, j0);
  float mult[kCols][kMultSize];
  bool folded = true;
  VF s[kCols];
  bool pending = false;  // p holds the partial sum of a folded block that continues
  for (int64_t c0 = 0; c0 < k; c0 += chunk) {
    const int64_t c1 = c0 + chunk < k ? c0 + chunk : k;
    const int64_t b_lo = c0 / bk, b_hi = (c1 - 1) / bk;
    if constexpr (F == QuantFormat::Mxfp8 && HWY_TARGET != HWY_SCALAR) {
      // Whole blocks whose codes fold: scales from the codes as the walk goes (no ScaleRow /
      // FoldRow pass, a tenth of an MXFP8 GEMV in cache); the same path and bits as below.
      if (uniform && !nan && !pending && c0 % bk == 0 && c1 <= k_full && (c1 - c0) % bk == 0 &&
          E8m0GroupFolds(plan, j0, b_lo, b_hi - b_lo + 1)) {
        const uint8_t* codes[kCols];
        for (int q = 0; q < kCols; ++q) {
          codes[q] = plan.u8_scales + (j0 + q) * plan.block_cols + b_lo;
        }
        E4m3BlocksFor<true>(rows, c0, (c1 - c0) / bk, bk / lanes, nullptr, codes, 0, next,
                            plan.row_bytes, a);
        continue;
      }
    }
    if (c0 == 0 || !one_block) {  // one block column: its scales serve every chunk
      folded = true;
      for (int q = 0; q < kCols; ++q) folded &= ScaleRow<F>(plan, j0 + q, b_lo, b_hi - b_lo + 1, mult[q]);
      // Whether a chunk folds is decided for the aligned group of 4 weight rows around j0, not
      // for this walker's kCols rows: kCols depends on how many x rows the call has (ColsFor), and
      // a row's bits must not (batch invariance). Groups of 1, 2 and 4 rows never straddle one.
      const int64_t g0 = j0 / 4 * 4, g1 = g0 + 4 < plan.n ? g0 + 4 : plan.n;
      for (int64_t j = g0; j < g1 && folded; ++j) {
        if (j >= j0 && j < j0 + kCols) continue;
        float other[kMultSize];
        folded &= ScaleRow<F>(plan, j, b_lo, b_hi - b_lo + 1, other);
      }
      if (folded && uniform && !nan) {
        for (int q = 0; q < kCols; ++q) FoldRow(mult[q], b_hi - b_lo + 1);
      }
    }
    if (uniform && folded && !nan) {
      int64_t e = c0, b = b_lo;
      if (!one_block && !pending && c0 % bk == 0) {  // whole blocks of whole steps: unrolled
        const int64_t limit = c1 < k_full ? c1 : k_full;
        const int64_t nb = limit > e ? (limit - e) / bk : 0;
        E4m3BlocksFor<false>(rows, e, nb, bk / lanes, mult, nullptr, 0, next, plan.row_bytes, a);
        e += nb * bk;
        b += nb;
      }
      // Block runs: steps, then a flush at the block's end (a block may continue in the next chunk).
      int64_t block_end = one_block ? k : (b + 1) * bk;
      for (; e < c1; ++b, block_end += bk) {
        const int64_t run_end = block_end < c1 ? block_end : c1;
        const int64_t full_end = run_end < k_full ? run_end : k_full;
        E4m3Run(rows, e, full_end, !pending, next, plan.row_bytes, a);
        pending = pending || e < full_end;
        e = full_end;
        if (e < run_end) {  // the partial last step
          VF w[kCols];
          for (int q = 0; q < kCols; ++q) w[q] = E4m3Tail(rows[q], e, k);
          if (pending) a.template Step<false>(e, w); else a.template Step<true>(e, w);
          pending = true;
          e = run_end;
        }
        if (run_end == block_end || run_end >= k) {
          for (int q = 0; q < kCols; ++q) s[q] = hn::Set(d, mult[q][b - b_lo]);
          a.Flush(s);
          pending = false;
        }
      }
      continue;
    }
    // Pre-scaled: w = (value * s) * 2^(kRawExp + kFoldExp) per lane. A pending block partial sum
    // (this chunk starts inside a block whose first part was folded) is flushed with that block's
    // scale first.
    if (pending) {
      for (int q = 0; q < kCols; ++q) s[q] = hn::Set(d, mult[q][0] * kFold);
      a.Flush(s);
      pending = false;
    }
    HWY_ALIGN float lane_mult[HWY_MAX_BYTES / 4];
    for (int64_t e = c0; e < c1; e += lanes) {
      VF w[kCols];
      for (int q = 0; q < kCols; ++q) {
        for (int64_t i = 0; i < lanes; ++i) {
          const int64_t ei = e + i < c1 ? e + i : c1 - 1;
          lane_mult[i] = mult[q][ei / bk - b_lo];
        }
        // The reference's dequantized value (Inf where it overflows), then the power of two.
        const VF raw = e + lanes <= k ? RawE4m3<true>(rows[q] + e) : E4m3Tail(rows[q], e, k);
        const VF value = hn::Mul(raw, hn::Set(d, kUnraw));
        w[q] = hn::Mul(hn::Mul(value, hn::Load(d, lane_mult)), hn::Set(d, kPrescale));
        if (e + lanes > k) w[q] = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(k - e)), w[q]);
      }
      if (e == c0) a.template Step<true>(e, w); else a.template Step<false>(e, w);
    }
    for (int q = 0; q < kCols; ++q) s[q] = hn::Set(d, 1.0f);
    a.Flush(s);
  }
}

// ---------------------------------------------------------------- NVFP4 and bf16 rows

// One L-lane u32 group of a row at byte offset `offset`: a full one, or (Tail) the last, partial
// one, whose bytes past `row_bytes` read as zero.
HWY_INLINE hn::Vec<DU> LoadGroup(const uint8_t* row, int64_t offset) {
  const DU du;
#if HWY_TARGET == HWY_SCALAR
  uint32_t v;
  std::memcpy(&v, row + offset, 4);
  return hn::Set(du, v);
#else
  return hn::BitCast(du, hn::LoadU(hn::Repartition<uint8_t, DU>(), row + offset));
#endif
}
HWY_INLINE hn::Vec<DU> LoadGroupTail(const uint8_t* row, int64_t offset, int64_t row_bytes) {
  const DU du;
  HWY_ALIGN uint32_t buf[HWY_MAX_BYTES / 4] = {};
  std::memcpy(buf, row + offset, static_cast<size_t>(row_bytes - offset));
  return hn::Load(du, buf);
}

// Plane kPlane of an NVFP4 group into the accumulators: plane n into chain n % 4 (p, p2, p3, p4),
// then the next plane. AVX-512: planes n and n + 4 from one shift (E2m1Low reads bits 0..3 of
// v >> 4n, E2m1High bits 16..19), the chain's steps in the same order (plane n, then n + 4), so
// the bits are those of eight separate planes; per 32 elements a shift, a vpermps, a vpermw and
// two FMAs instead of two shifts, two vpermps and two FMAs (the shifts and permutes share two
// pipes on Zen 4 / 5: 7.4 against 8.6 cycles per 128 elements in a stand-alone loop).
template <int kPlane, bool kFolded, int kRows, int kCols>
HWY_INLINE void Nvfp4Plane(const hn::Vec<DU>* v, const VF* s, int64_t e, Accum<kRows, kCols>& a) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  constexpr int kLast = 4;
#else
  constexpr int kLast = 8;
#endif
  if constexpr (kPlane < kLast) {
    const DF d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    VF w[kCols];
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    VF w_high[kCols];
#endif
    for (int q = 0; q < kCols; ++q) {
      // Each plane's shift from the loaded group (not from the previous plane's): no serial chain.
      const auto shifted = hn::ShiftRight<4 * kPlane>(v[q]);
      w[q] = E2m1Low(shifted);
      if constexpr (!kFolded) w[q] = hn::Mul(w[q], s[q]);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      w_high[q] = E2m1High(shifted);
      if constexpr (!kFolded) w_high[q] = hn::Mul(w_high[q], s[q]);
#endif
    }
    a.template Step<(kPlane < 4), kPlane % 4>(e + kPlane * lanes, w);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    a.template Step<false, kPlane>(e + (kPlane + 4) * lanes, w_high);
#endif
    Nvfp4Plane<kPlane + 1, kFolded>(v, s, e, a);
  }
}

// One NVFP4 group (8 planes) of kCols rows at element e; s: the lanes' block scales. kFolded: the
// scales are applied at the flush (else to every weight: non-finite scales).
template <bool kFolded, int kRows, int kCols>
HWY_INLINE void Nvfp4Group(hn::Vec<DU>* v, const VF* s, int64_t e, Accum<kRows, kCols>& a) {
#if EMBER_QL_E2M1_SHUFFLE
  // All 8 planes (E2m1Indices, E2m1Four), then the same steps as Nvfp4Plane's: plane n on chain
  // n % 4, planes 0..3 first. More rows of x than kE2m1ShuffleMaxRows take Nvfp4Plane: on x86
  // below AVX-512 the shuffles' five constants next to the 24 accumulators of 4 rows made m = 32
  // 3-5 % slower (AVX2, in cache, 1 thread: 61.4-63.3 against 64.3-66.1 GFLOP/s).
  if constexpr (kRows > kE2m1ShuffleMaxRows) {
    Nvfp4Plane<0, kFolded>(v, s, e, a);
  } else {
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(DF()));
    VF planes[kCols][8];
    for (int q = 0; q < kCols; ++q) {
      hn::Vec<D8> idx[2];
      E2m1Indices(v[q], idx);
      E2m1Four(idx[0], planes[q]);
      E2m1Four(idx[1], planes[q] + 4);
      if constexpr (!kFolded) {
        for (int n = 0; n < 8; ++n) planes[q][n] = hn::Mul(planes[q][n], s[q]);
      }
    }
    auto step = [&](auto plane) {
      constexpr int kPlane = decltype(plane)::value;
      VF w[kCols];
      for (int q = 0; q < kCols; ++q) w[q] = planes[q][kPlane];
      a.template Step<(kPlane < 4), kPlane % 4>(e + kPlane * lanes, w);
    };
    step(std::integral_constant<int, 0>());
    step(std::integral_constant<int, 1>());
    step(std::integral_constant<int, 2>());
    step(std::integral_constant<int, 3>());
    step(std::integral_constant<int, 4>());
    step(std::integral_constant<int, 5>());
    step(std::integral_constant<int, 6>());
    step(std::integral_constant<int, 7>());
  }
#else
  Nvfp4Plane<0, kFolded>(v, s, e, a);
#endif
  if constexpr (kFolded) {
    a.Flush4(s);
  } else {
    const DF d;
    VF ones[kCols];
    for (int q = 0; q < kCols; ++q) ones[q] = hn::Set(d, 1.0f);
    a.Flush4(ones);
  }
}

// Whether all `count` ue4m3 codes at p are valid (ue4m3_is_valid: <= kUe4m3MaxValidCode, 0x7E).
HWY_INLINE bool ValidUe4m3(const uint8_t* p, int64_t count) {
  return AllBelow(p, count, uint8_t{kUe4m3MaxValidCode + 1});
}

#if HWY_TARGET != HWY_SCALAR
// The lanes' block scales of one NVFP4 group (kFolded, inline): the L / 2 ue4m3 codes at p, all
// valid (<= 0x7E), lane l <- g * value(p[l / 2]), the product ScaleRow computes.
template <class Idx>
HWY_INLINE VF Nvfp4GroupScales(const uint8_t* p, VF g, Idx dup) {
  const DF d;
  const hn::Half<DU> dh;
  const auto codes = hn::PromoteTo(dh, hn::LoadU(hn::Rebind<uint8_t, decltype(dh)>(), p));
  const VF raw = hn::BitCast(d, hn::ShiftLeft<20>(hn::ZeroExtendVector(DU(), codes)));
  return hn::Mul(g, hn::Mul(hn::TableLookupLanes(raw, dup), hn::Set(d, 0x1p120f)));
}

// The same for two consecutive groups from their L codes at p: decoded and multiplied in one
// vector, then spread to each group's lanes (the same products, so the same bits). Per group one
// permute instead of a widening, a shift, a permute and two multiplies.
template <class Idx>
HWY_INLINE void Nvfp4PairScales(const uint8_t* p, VF g, Idx dup0, Idx dup1, VF& s0, VF& s1) {
  const DF d;
#if HWY_TARGET == HWY_AVX2
  // Codes in the order c0 c1 c4 c5 | c2 c3 c6 c7 (one word shuffle), so that the in-block unpacks
  // spread them: two vpunpck*dq instead of two vpermps, which share the FMAs' two pipes on Zen 5.
  (void)dup0;
  (void)dup1;
  const __m128i order = _mm_shufflelo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                                            _MM_SHUFFLE(3, 1, 2, 0));
  const hn::Vec<DU> codes{_mm256_cvtepu8_epi32(order)};
#else
  const auto codes = hn::PromoteTo(DU(), hn::LoadU(hn::Rebind<uint8_t, DU>(), p));
#endif
  const VF raw = hn::BitCast(d, hn::ShiftLeft<20>(codes));
  const VF values = hn::Mul(g, hn::Mul(raw, hn::Set(d, 0x1p120f)));
#if HWY_TARGET == HWY_AVX2
  s0 = hn::InterleaveLower(d, values, values);
  s1 = hn::InterleaveUpper(d, values, values);
#else
  s0 = hn::TableLookupLanes(values, dup0);
  s1 = hn::TableLookupLanes(values, dup1);
#endif
}
#endif

// i / 2 for i in [0, 2 L): the block of each lane of a group (and of the next group).
struct HalfIndexTable {
  int32_t v[2 * HWY_MAX_BYTES / 4];
};
constexpr HalfIndexTable MakeHalfIndexTable() {
  HalfIndexTable t{};
  for (int i = 0; i < 2 * HWY_MAX_BYTES / 4; ++i) t.v[i] = i / 2;
  return t;
}
alignas(64) constexpr HalfIndexTable kHalfIndex = MakeHalfIndexTable();

// The full groups of chunk [c0, c1) and its last, partial one. kInline (folded chunks of whole
// groups, SIMD targets): scales decoded per group from scale_rows[q] + e / 16, no mult table; else
// from mult.
template <bool kFolded, bool kInline, int kRows, int kCols>
HWY_INLINE void Nvfp4ChunkBody(const uint8_t* const* rows, int64_t c0, int64_t c1,
                               int64_t row_bytes, const float (*mult)[kMultSize],
                               const uint8_t* const* scale_rows, float global_scale,
                               const uint8_t* next, Accum<kRows, kCols>& a) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t group = 8 * lanes;
  // Lane l of a group covers elements 8l .. 8l + 7: the group's block l / 2 (of the next group's
  // blocks, lanes / 2 + l / 2).
  const auto dup = hn::SetTableIndices(d, kHalfIndex.v);
  auto scales = [&](int q, int64_t e) {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kInline) return Nvfp4GroupScales(scale_rows[q] + e / 16, hn::Set(d, global_scale), dup);
#endif
    (void)scale_rows;  // SCALAR: never inline
    (void)global_scale;
    return hn::TableLookupLanes(hn::LoadU(d, mult[q] + (e - c0) / 16), dup);
  };
  hn::Vec<DU> v[kCols];
  VF s[kCols];
  int64_t e = c0;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kInline) {  // two groups per step (Nvfp4PairScales)
    const auto dup1 = hn::SetTableIndices(d, kHalfIndex.v + lanes);
    const VF g = hn::Set(d, global_scale);
    hn::Vec<DU> v1[kCols];
    VF s1[kCols];
    for (; e + 2 * group <= c1; e += 2 * group) {
      if (next != nullptr) {  // the 64-byte lines that start in the two groups' bytes
        if (HWY_LIKELY(group == 128 && (e / 2) % 64 == 0)) {  // AVX-512, aligned rows: two lines
          PrefetchNext<kCols>(next, row_bytes, e / 2);
          PrefetchNext<kCols>(next, row_bytes, e / 2 + 64);
        } else if (group == 64) {  // AVX2: exactly one line starts in the pair's 64 bytes
          PrefetchNext<kCols>(next, row_bytes, (e / 2 + 63) / 64 * 64);
        } else {
          for (int64_t b = (e / 2 + 63) / 64 * 64; b < e / 2 + group; b += 64) {
            PrefetchNext<kCols>(next, row_bytes, b);
          }
        }
      }
      for (int q = 0; q < kCols; ++q) {
        v[q] = LoadGroup(rows[q], e / 2);
        v1[q] = LoadGroup(rows[q], e / 2 + group / 2);
        Nvfp4PairScales(scale_rows[q] + e / 16, g, dup, dup1, s[q], s1[q]);
      }
      Nvfp4Group<kFolded>(v, s, e, a);
      Nvfp4Group<kFolded>(v1, s1, e + group, a);
    }
  }
#endif
  for (; e + group <= c1; e += group) {
    if (next != nullptr && (e / 2) % 64 == 0) PrefetchNext<kCols>(next, row_bytes, e / 2);
    for (int q = 0; q < kCols; ++q) {
      v[q] = LoadGroup(rows[q], e / 2);
      s[q] = scales(q, e);
    }
    Nvfp4Group<kFolded>(v, s, e, a);
  }
  if (e < c1) {  // the last, partial group (from mult: the scales past the row are zero there)
    for (int q = 0; q < kCols; ++q) {
      v[q] = LoadGroupTail(rows[q], e / 2, row_bytes);
      s[q] = hn::TableLookupLanes(hn::LoadU(d, mult[q] + (e - c0) / 16), dup);
    }
    Nvfp4Group<kFolded>(v, s, e, a);
  }
}

template <bool kFolded, bool kInline, int kRows, int kCols>
HWY_NOINLINE void Nvfp4Chunk(const uint8_t* const* rows, int64_t c0, int64_t c1, int64_t row_bytes,
                             const float (*mult)[kMultSize], const uint8_t* const* scale_rows,
                             float global_scale, const uint8_t* next, Accum<kRows, kCols>& acc) {
  Accum<kRows, kCols> a;  // in registers for the loop (see E4m3Blocks)
  a.CopyNvfp4From(acc);
  Nvfp4ChunkBody<kFolded, kInline>(rows, c0, c1, row_bytes, mult, scale_rows, global_scale, next,
                                   a);
  acc.CopyNvfp4From(a);
}

template <int kRows, int kCols>
HWY_INLINE void Nvfp4Rows(const QuantPlan& plan, int64_t j0, int64_t prefetch_ahead,
                          Accum<kRows, kCols>& a) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t k = plan.k;
  const uint8_t* rows[kCols];
  for (int q = 0; q < kCols; ++q) rows[q] = plan.w + (j0 + q) * plan.row_bytes;
  const uint8_t* next = prefetch_ahead > 0 ? rows[0] + prefetch_ahead : nullptr;
  const int64_t chunk = kMaxChunkSteps * lanes;  // 16 groups, 8L blocks
  const uint8_t* scale_rows[kCols];
  for (int q = 0; q < kCols; ++q) scale_rows[q] = plan.u8_scales + (j0 + q) * plan.block_cols;
  // Every scale g * value is finite when g * 448 (the largest ue4m3) is and no code is invalid.
  const bool finite_products = std::isfinite(plan.global_scale * 448.0f);
  float mult[kCols][kMultSize];
  // The common case in one call: every full group's scale code valid and g * 448 finite.
  int64_t start = 0;
  const int64_t whole_k = k / (8 * lanes) * (8 * lanes);
  if (HWY_TARGET != HWY_SCALAR && finite_products && whole_k > 0) {
    bool valid = true;
    for (int q = 0; q < kCols && valid; ++q) valid = ValidUe4m3(scale_rows[q], whole_k / 16);
    if (HWY_LIKELY(valid)) {
      Nvfp4Chunk<true, true>(rows, 0, whole_k, plan.row_bytes, mult, scale_rows, plan.global_scale, next, a);
      start = whole_k;
    }
  }
  // Otherwise (and for the last, partial group) chunk by chunk, inline where the chunk allows it.
  for (int64_t c0 = start; c0 < k; c0 += chunk) {
    const int64_t c1 = c0 + chunk < k ? c0 + chunk : k;
    const int64_t whole = (c1 - c0) / (8 * lanes) * (8 * lanes);  // the chunk's full groups
    bool inline_scales = HWY_TARGET != HWY_SCALAR && finite_products && c1 - c0 == whole;
    for (int q = 0; q < kCols && inline_scales; ++q) {
      inline_scales = ValidUe4m3(scale_rows[q] + c0 / 16, (c1 - c0) / 16);
    }
    if (HWY_LIKELY(inline_scales)) {  // folded, the same scale products as ScaleRow's
      Nvfp4Chunk<true, true>(rows, c0, c1, plan.row_bytes, mult, scale_rows, plan.global_scale, next, a);
      continue;
    }
    bool folded = true;
    for (int q = 0; q < kCols; ++q) {
      folded &= ScaleRow<QuantFormat::Nvfp4>(plan, j0 + q, c0 / 16, (c1 - c0) / 16, mult[q]);
    }
    if (HWY_LIKELY(folded)) {
      Nvfp4Chunk<true, false>(rows, c0, c1, plan.row_bytes, mult, scale_rows, plan.global_scale, next, a);
    } else {
      Nvfp4Chunk<false, false>(rows, c0, c1, plan.row_bytes, mult, scale_rows, plan.global_scale, next, a);
    }
  }
}

#if HWY_TARGET != HWY_SCALAR
// Rows up to this k (a whole number of groups) take Nvfp4UnitInline. LLM decode (Qwen2.5-0.5B
// shapes: k = 896 for q, k, v, gate and up), NVFP4, 1 thread, alternated with the per-row calls:
// 73.2-80.9 against 65.6-69.4 tok/s (perf put a quarter of the step around the per-row calls).
// For k = 4096 from DRAM (m = 1, 256 MiB, 1 thread) the unit walker read 0.64-0.70 of the sum
// against 0.71-0.75 with the per-row calls, and the same in cache (cause not found): long rows keep
// the per-row path.
constexpr int64_t kNvfp4UnitInlineMaxK = 2048;

// Weight rows [j_begin, j_end) of a unit for x rows i0 .. i0 + kRows, when k is a whole number of
// groups (at most kNvfp4UnitInlineMaxK) and g * 448 is finite: each row whose ue4m3 codes are all
// valid gets what Nvfp4Rows would compute for it (the same inline chunk over all of k, so the same
// bits) into sums[r][j - j_begin], with done[j - j_begin] = true; the other rows are left to Micro.
// One call per unit instead of a call, an Accum copy and Nvfp4Rows' setup per row. Prefetch as
// RowGroup: ahead_rows rows on, where they exist.
template <int kRows>
HWY_NOINLINE void Nvfp4UnitInline(const QuantPlan& plan, int64_t i0, int64_t j_begin,
                                  int64_t j_end, bool prefetch, int64_t ahead_rows,
                                  VF (*sums)[cpu_detail::kUnitRows], bool* done) {
  const int64_t k = plan.k;
  for (int64_t j = j_begin; j < j_end; ++j) {
    const uint8_t* scale_row = plan.u8_scales + j * plan.block_cols;
    done[j - j_begin] = ValidUe4m3(scale_row, k / 16);
    if (!done[j - j_begin]) continue;
    const uint8_t* row = plan.w + j * plan.row_bytes;
    const bool pf = prefetch && j + 1 + ahead_rows <= plan.n;
    Accum<kRows, 1> a;
    a.Init(plan.xp + i0 * plan.kp, plan.kp);
    Nvfp4ChunkBody<true, true>(&row, 0, k, plan.row_bytes, nullptr, &scale_row, plan.global_scale,
                               pf ? row + ahead_rows * plan.row_bytes : nullptr, a);
    for (int r = 0; r < kRows; ++r) sums[r][j - j_begin] = hn::Add(a.acc[r][0], a.acc2[r][0]);
  }
}
#endif

template <int kRows, int kCols>
EMBER_QL_WALKER void Bf16Rows(const QuantPlan& plan, int64_t j0, int64_t prefetch_ahead,
                              Accum<kRows, kCols>& a) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t group = 2 * lanes, k = plan.k;
  const uint8_t* rows[kCols];
  for (int q = 0; q < kCols; ++q) rows[q] = plan.w + (j0 + q) * plan.row_bytes;
  const uint8_t* next = prefetch_ahead > 0 ? rows[0] + prefetch_ahead : nullptr;
  const auto high = hn::Set(DU(), 0xFFFF0000u);
  VF even[kCols], odd[kCols];
  int64_t e = 0;
  for (; e + group <= k; e += group) {
    if (next != nullptr && (2 * e) % 64 == 0) PrefetchNext<kCols>(next, plan.row_bytes, 2 * e);
    for (int q = 0; q < kCols; ++q) {
      const auto v = LoadGroup(rows[q], 2 * e);
      even[q] = hn::BitCast(d, hn::ShiftLeft<16>(v));
      odd[q] = hn::BitCast(d, hn::And(v, high));
    }
    // Even elements on chain p, odd ones on p2: two independent FMA chains (one chain bound the
    // GEMV to one FMA per latency, 16 weights per 4 cycles on AVX2).
    if (e == 0) {
      a.template Step<true, 0>(e, even);
      a.template Step<true, 1>(e + lanes, odd);
    } else {
      a.template Step<false, 0>(e, even);
      a.template Step<false, 1>(e + lanes, odd);
    }
  }
  if (e < k) {
    for (int q = 0; q < kCols; ++q) {
      const auto v = LoadGroupTail(rows[q], 2 * e, plan.row_bytes);
      even[q] = hn::BitCast(d, hn::ShiftLeft<16>(v));
      odd[q] = hn::BitCast(d, hn::And(v, high));
    }
    if (e == 0) {
      a.template Step<true, 0>(e, even);
      a.template Step<true, 1>(e + lanes, odd);
    } else {
      a.template Step<false, 0>(e, even);
      a.template Step<false, 1>(e + lanes, odd);
    }
  }
  a.Flush2();
}

// ---------------------------------------------------------------- driver

// x86 targets below AVX-512 have 16 vector registers: acc and p of 2 x rows x 4 w rows would spill.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int ColsFor(int rows) { return rows == 1 ? 4 : (rows == 2 ? 2 : 1); }
#else
constexpr int ColsFor(int rows) { return rows <= 2 ? 4 : 2; }
#endif

// bf16 prefill groups: weight rows in pairs where 32 registers hold acc, p and p2 of 4 x 2.
#if HWY_TARGET <= HWY_AVX3
constexpr int kBf16GemmCols = 2;
#else
constexpr int kBf16GemmCols = 1;
#endif

// The lane-wise sums of y[i0 .. i0 + kRows, j0 .. j0 + kCols) into sums[r][j0 - unit_j + q]
// (RowGroup reduces them).
template <QuantFormat F, int kRows, int kCols>
HWY_INLINE void Micro(const QuantPlan& plan, int64_t i0, int64_t j0, int64_t prefetch_ahead,
                      VF (*sums)[cpu_detail::kUnitRows], int64_t unit_j) {
  Accum<kRows, kCols> a;
  a.Init(plan.xp + i0 * plan.kp, plan.kp);
  if constexpr (F == QuantFormat::Nvfp4) {
    Nvfp4Rows<kRows, kCols>(plan, j0, prefetch_ahead, a);
  } else if constexpr (F == QuantFormat::Bf16) {
    Bf16Rows<kRows, kCols>(plan, j0, prefetch_ahead, a);
  } else {
    E4m3Rows<F, kRows, kCols>(plan, j0, prefetch_ahead, a);
  }
  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < kCols; ++q) {
      sums[r][j0 - unit_j + q] = F == QuantFormat::Nvfp4 ? hn::Add(a.acc[r][q], a.acc2[r][q]) : a.acc[r][q];
    }
  }
}

// How far ahead of the walk the software prefetch reads: whole groups of kC weight rows, at least
// the next group and at least this many bytes. One group ahead was 2 KiB for NVFP4 at k = 4096:
// too close to cover DRAM latency with one thread. Measured (m = 1, k = 4096, 256 MiB, gemv / sum
// paired, two runs each): NVFP4 0.63-0.66 -> 0.68-0.69 with 1 thread and 0.85-0.86 -> 0.89-0.90
// with 2, FP8 128x128 0.83 -> 0.86 with 1; the rest unchanged, in cache unchanged. 16 KiB cost
// bf16 (0.62-0.64 against 0.73 with 1 thread).
constexpr int64_t kPrefetchBytes = 8192;

// y[i0 .. i0 + kRows, j_begin .. j_end) (W8A8: the sums S, scaled by W8a8Epilogue afterwards), one
// unit. The horizontal sums run after all of the unit's rows: done per row, each one's ~35-cycle
// dependent chain held up retirement behind it (NVFP4 in cache, 1 thread: a sixth of the time).
template <QuantFormat F, int kRows>
HWY_INLINE void RowGroup(const QuantPlan& plan, int64_t i0, int64_t j_begin, int64_t j_end, bool prefetch) {
  // bf16 (decode) and NVFP4 one weight row at a time. bf16, measured from DRAM (m = 1, 256 MiB, 1 thread,
  // gemv / sum paired): 0.78-0.85 of the read-only sum, against 0.62-0.68 with four rows side by
  // side, although four rows run faster in cache (61 against 36 GB/s): one stream keeps the
  // hardware prefetcher ahead. NVFP4 (two FMA chains per row): 0.63 / 0.86 with 1 / 2 threads,
  // against 0.60 / 0.77 with four rows.
  // GEMM row groups (3-4 rows of x: prefill) take bf16 rows in pairs on AVX-512 (kBf16GemmCols), the
  // unit's rows being in cache by then (m = 32 in cache, 1 core: 1.45x faster with one chain). Bits
  // do not depend on kC. NVFP4 stays at one: its invalid-scale fallback is decided per walker call,
  // and a row's bits must not depend on its neighbour.
  constexpr int kC = F == QuantFormat::Nvfp4 ? 1 : (F == QuantFormat::Bf16 ? (kRows >= 3 ? kBf16GemmCols : 1) : ColsFor(kRows));
  const DF d;
  VF sums[kRows][cpu_detail::kUnitRows];
  int64_t j = j_begin;
  const int64_t group_bytes = kC * plan.row_bytes;
  const int64_t ahead_rows =
      kC * std::max<int64_t>(1, (kPrefetchBytes + group_bytes - 1) / group_bytes);
  bool done[cpu_detail::kUnitRows] = {};  // rows Nvfp4UnitInline computed
#if HWY_TARGET != HWY_SCALAR
  if constexpr (F == QuantFormat::Nvfp4) {
    const int64_t group = 8 * static_cast<int64_t>(hn::Lanes(d));
    if (plan.k % group == 0 && plan.k <= kNvfp4UnitInlineMaxK &&
        std::isfinite(plan.global_scale * 448.0f)) {
      Nvfp4UnitInline<kRows>(plan, i0, j_begin, j_end, prefetch, ahead_rows, sums, done);
    }
  }
#endif
  for (; j + kC <= j_end; j += kC) {
    if (done[j - j_begin]) continue;  // NVFP4 only (kC = 1)
    const bool pf = prefetch && j + kC + ahead_rows <= plan.n;
    Micro<F, kRows, kC>(plan, i0, j, pf ? ahead_rows * plan.row_bytes : 0, sums, j_begin);
  }
  for (; j < j_end; ++j) Micro<F, kRows, 1>(plan, i0, j, 0, sums, j_begin);
  const float* bias = plan.w8a8 ? nullptr : plan.bias;
  for (int r = 0; r < kRows; ++r) {
    const double y_scale = plan.y_scale[i0 + r];
    float* y = plan.y + (i0 + r) * plan.n;
    for (j = j_begin; j < j_end; ++j) {
      float v = static_cast<float>(double(hn::GetLane(hn::SumOfLanes(d, sums[r][j - j_begin]))) * y_scale);
      if (bias != nullptr) v += bias[j];
      y[j] = v;
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

// Rows of x per group: 6 with AVX-512's 32 registers (m = 32 in cache, 1 core: FP8 128x128 /
// MXFP8 1.03-1.07x, FP8 per channel unchanged), else 4.
#if HWY_TARGET <= HWY_AVX3
constexpr int64_t kGroupRows = 6;
#else
constexpr int64_t kGroupRows = 4;
#endif

// Work units [begin, end) of kUnitRows weight rows; inside a unit, all rows of x in groups of up
// to kGroupRows (the unit's weight rows stay in cache after the first group, which prefetches).
template <QuantFormat F>
void UnitsFor(const QuantPlan& plan, size_t begin, size_t end) {
  for (size_t u = begin; u < end; ++u) {
    const int64_t j0 = static_cast<int64_t>(u) * cpu_detail::kUnitRows;
    const int64_t j1 = j0 + cpu_detail::kUnitRows < plan.n ? j0 + cpu_detail::kUnitRows : plan.n;
    // NVFP4 keeps 4: its six accumulator sets would spill at 6 rows (m = 32: 1.4x slower); bf16
    // too: acc, p and p2 of 4 x 2 fill AVX-512's 32 registers.
    constexpr int64_t kRowsMax = F == QuantFormat::Nvfp4 || F == QuantFormat::Bf16 ? 4 : kGroupRows;
    for (int64_t i0 = 0; i0 < plan.m; i0 += kRowsMax) {
      const bool prefetch = i0 == 0;
      switch (plan.m - i0 < kRowsMax ? plan.m - i0 : kRowsMax) {
        case 1: RowGroup<F, 1>(plan, i0, j0, j1, prefetch); break;
        case 2: RowGroup<F, 2>(plan, i0, j0, j1, prefetch); break;
        case 3: RowGroup<F, 3>(plan, i0, j0, j1, prefetch); break;
#if HWY_TARGET <= HWY_AVX3
        case 4: RowGroup<F, 4>(plan, i0, j0, j1, prefetch); break;
        case 5: RowGroup<F, 5>(plan, i0, j0, j1, prefetch); break;
        default: RowGroup<F, 6>(plan, i0, j0, j1, prefetch); break;
#else
        default: RowGroup<F, 4>(plan, i0, j0, j1, prefetch); break;
#endif
      }
    }
    if (plan.w8a8) {
      for (int64_t i = 0; i < plan.m; ++i) W8a8Epilogue(plan, i, j0, j1);
    }
  }
}

void quant_units_impl(const QuantPlan& plan, size_t begin, size_t end) {
  switch (plan.format) {
    case QuantFormat::Fp8: return UnitsFor<QuantFormat::Fp8>(plan, begin, end);
    case QuantFormat::Mxfp8: return UnitsFor<QuantFormat::Mxfp8>(plan, begin, end);
    case QuantFormat::Nvfp4: return UnitsFor<QuantFormat::Nvfp4>(plan, begin, end);
    case QuantFormat::Bf16: return UnitsFor<QuantFormat::Bf16>(plan, begin, end);
  }
}

// Rows [begin, end) of x into plan.xp (zero-padded to plan.kp) in the decoder's element order, and
// the factor that undoes the normalization into plan.y_scale.
void quant_prepare_impl(const QuantPlan& plan, size_t begin, size_t end) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t k = plan.k;
  for (int64_t i = static_cast<int64_t>(begin); i < static_cast<int64_t>(end); ++i) {
    const float* x = plan.x + i * k;
    float* out = plan.xp + i * plan.kp;
    // Zero from the last whole group on (the padding the walkers read past k, and the holes the
    // permutations below leave in a partial last group); the rest is overwritten below.
    const int64_t group = plan.format == QuantFormat::Nvfp4 ? 8 * lanes
                          : plan.format == QuantFormat::Bf16 ? 2 * lanes : lanes;
    const int64_t written = k / group * group;
    std::memset(out + written, 0, static_cast<size_t>(plan.kp - written) * sizeof(float));
    plan.y_scale[i] = 1.0;
    if (plan.format == QuantFormat::Nvfp4) {  // lane l of plane n of a group: element 8l + n
      for (int64_t g = 0; g < k; g += group) {
        for (int64_t l = 0; l < lanes; ++l)
          for (int64_t n = 0; n < 8 && g + 8 * l + n < k; ++n) out[g + n * lanes + l] = x[g + 8 * l + n];
      }
    } else if (plan.format == QuantFormat::Bf16) {  // even elements, then odd ones
      for (int64_t g = 0; g < k; g += group) {
        for (int64_t l = 0; l < lanes; ++l) {
          if (g + 2 * l < k) out[g + l] = x[g + 2 * l];
          if (g + 2 * l + 1 < k) out[g + lanes + l] = x[g + 2 * l + 1];
        }
      }
    } else {  // e4m3: x * 2^c with max|x * 2^c| in [2^(kXExp - 1), 2^kXExp)
      int c = 0;
      if (kXExp != 0) {
        VF vmax = hn::Zero(d);
        int64_t p = 0;
        for (; p + lanes <= k; p += lanes) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(d, x + p)));
        float amax = hn::GetLane(hn::MaxOfLanes(d, vmax));
        for (; p < k; ++p) amax = std::fabs(x[p]) > amax ? std::fabs(x[p]) : amax;
        // NaN lanes: Max returns one of its operands, a NaN amax is caught below and any other
        // NaN element reaches the sums unchanged.
        if (amax > 0.0f && std::isfinite(amax)) {
          int e = 0;
          (void)std::frexp(amax, &e);  // amax < 2^e
          c = kXExp - e;
        }
      }
      // Two exact power-of-two factors: 2^c alone may not be a finite float.
      const VF s1 = hn::Set(d, std::ldexp(1.0f, c / 2)), s2 = hn::Set(d, std::ldexp(1.0f, c - c / 2));
      int64_t p = 0;
      for (; p + lanes <= k; p += lanes) hn::Store(hn::Mul(hn::Mul(hn::LoadU(d, x + p), s1), s2), d, out + p);
      for (; p < k; ++p) out[p] = x[p] * hn::GetLane(s1) * hn::GetLane(s2);
      plan.y_scale[i] = std::ldexp(1.0, -(kRawExp + kFoldExp + c));
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(quant_units_impl);
EMBER_HWY_EXPORT(quant_prepare_impl);

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

void quant_prepare(const QuantPlan& plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(quant_prepare_impl)(plan, begin, end);
}

void quant_units(const QuantPlan& plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(quant_units_impl)(plan, begin, end);
}

}  // namespace cpu_detail
}  // namespace ember::kernels
#endif  // HWY_ONCE
