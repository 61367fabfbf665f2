// conv2d as a GEMM over packed operands, and depthwise (stride 1 or 2) over a zero-padded plane; both
// in per-task slots of ctx.scratch (conv2d_scratch bytes). conv.cc's direct path serves the rest.
//
// GEMM, per image and group: out[oc, q] = sum_k w[oc, k] * B[k, q], k = (ic, kh, kw) in order and
// q = oh * OW + ow; B is the im2col matrix (zeros at padded taps). A task unit is a block of up to
// kConvNc output positions x a chunk of output channels; B is packed per unit, kConvKc rows at a
// time, as rows of the block's positions (zero-filled to whole panels of 2 vectors; rows ld apart).
// The micro-kernel keeps kMr rows x 2 vectors of C in registers (kMr = 8 on AVX-512, 32 registers;
// 6 elsewhere), broadcasting kMr weights in place (rows of w are contiguous along k) against 2
// loads of one panel's row per k; it is out of line (inlined, GCC spilled AVX2's accumulators). Between reduction blocks C is stored and reloaded, which is exact, so every output element
// is one FMA chain over k = 0..K-1 from 0, then + bias (and the output clamp, in registers at the
// last block's store), whatever tile, block or thread computes it.
//
// Depthwise (groups == C == O, stride 1, or 2 without dilation): the input plane is copied into a
// zero-padded plane split into stride x stride phase planes (conv_plan.h), where output (oh, ow)
// reads each tap at a fixed offset from q = oh Wq + ow: vectors run along q over whole rows at once
// (rows narrower than a vector included), 9 and 25 taps unrolled; the columns past OW are dropped
// when copying out. Each element: one FMA chain over
// the taps in order from 0, then + bias, then the output clamp (vectorized while copying out).
//
// Padded taps contribute 0 * w: for w = ±inf / NaN that is NaN where the reference skips the tap.
// A NaN can only come out of an element whose chain met a NaN, so when the conv has padding every
// NaN output is recomputed by conv_point (skipping padded taps, the reference's semantics; it
// clamps too, and the clamp keeps NaN, so the NaN outputs are found after it); other elements are
// unchanged (adding an exact 0 product keeps the sum).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/conv_gemm.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/cache_control.h"
#include "kernels/cpu/hwy_util-inl.h"
#include "kernels/cpu/conv_micro-inl.h"
#include "kernels/cpu/transpose-inl.h"

#ifndef EMBER_KERNELS_CPU_CONV_GEMM_RUN_
#define EMBER_KERNELS_CPU_CONV_GEMM_RUN_
#include "kernels/cpu/conv_plan.h"
#include "runtime/core/thread_pool.h"
namespace ember::kernels::cpu_detail {

struct ConvRun {
  ConvPlan p;
  uint8_t* base;   // kConvAlign-aligned; task t uses [t * slot, (t + 1) * slot)
  size_t slot;
  size_t units, tasks;
  int64_t col_blocks, m_chunks, m_chunk;  // GEMM units: (n, g, m chunk, column block)
  int64_t nc;                             // positions per column block (<= kConvNc)
  bool dw_lanes;                          // depthwise with channels in lanes (units of kDwLanesGroup)
  // GEMM with chunks of output channels: B of every (image, group, column block) packed once into
  // shared_b (conv_gemm_split), rows shared_ld apart; split into b_tasks ranges of rows.
  float* shared_b;
  int64_t shared_ld;
  size_t b_tasks;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::ConvPlan;
using cpu_detail::ConvRun;

// The output rows a block of positions crosses: run r covers block columns [start, start + len)
// of output row oh from column ow0. Made once per unit (no divisions per im2col row).
struct Im2colRun {
  int32_t start, len, oh, ow0;
};

HWY_INLINE int64_t Im2colRuns(const ConvPlan& p, int64_t q0, int64_t cols, Im2colRun* runs) {
  int64_t count = 0, oh = q0 / p.ow, ow0 = q0 % p.ow;
  for (int64_t start = 0; start < cols;) {
    const int64_t len = p.ow - ow0 < cols - start ? p.ow - ow0 : cols - start;
    runs[count++] = Im2colRun{int32_t(start), int32_t(len), int32_t(oh), int32_t(ow0)};
    start += len;
    ++oh;
    ow0 = 0;
  }
  return count;
}

// Row (ic, i, j) of im2col over the block's positions (runs), into line.
HWY_INLINE void Im2colLine(const ConvPlan& p, const float* in_c, int64_t i, int64_t j, const Im2colRun* runs,
                           int64_t run_count, float* HWY_RESTRICT line) {
  const int64_t off = j * p.dw - p.pl;  // iw = ow * sw + off
  for (int64_t r = 0; r < run_count; ++r) {
    const Im2colRun& run = runs[r];
    const int64_t ow0 = run.ow0, len = run.len;
    float* dst = line + run.start;
    const int64_t ih = run.oh * p.sh - p.pt + i * p.dh;
    if (ih < 0 || ih >= p.h) {
      for (int64_t t = 0; t < len; ++t) dst[t] = 0.0f;
      continue;
    }
    const float* row = in_c + ih * p.w_in;
    if (p.sw == 1) {
      // Valid ow: 0 <= ow + off < W, clamped to the run.
      int64_t lo = -off, hi = p.w_in - off;
      if (lo < ow0) lo = ow0;
      if (lo > ow0 + len) lo = ow0 + len;
      if (hi > ow0 + len) hi = ow0 + len;
      if (hi < lo) hi = lo;
      for (int64_t t = ow0; t < lo; ++t) dst[t - ow0] = 0.0f;
      if (hi > lo) std::memcpy(dst + (lo - ow0), row + lo + off, size_t(hi - lo) * sizeof(float));
      for (int64_t t = hi; t < ow0 + len; ++t) dst[t - ow0] = 0.0f;
    } else if (p.sw == 2) {
      // Valid ow: 0 <= 2 ow + off < W, clamped to the run; vectors of the even lanes of two loads
      // while both stay inside the row.
      int64_t lo = off < 0 ? (-off + 1) / 2 : 0, hi = (p.w_in - off + 1) / 2;
      if (lo < ow0) lo = ow0;
      if (lo > ow0 + len) lo = ow0 + len;
      if (hi > ow0 + len) hi = ow0 + len;
      if (hi < lo) hi = lo;
      for (int64_t t = ow0; t < lo; ++t) dst[t - ow0] = 0.0f;
      int64_t t = lo;
#if HWY_TARGET != HWY_SCALAR
      const ConvTag d;
      const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
      for (; t + lanes <= hi && 2 * (t + lanes) + off <= p.w_in; t += lanes) {
        const float* src = row + 2 * t + off;
        hn::StoreU(EvenLanes(d, src), d, dst + (t - ow0));
      }
#endif
      for (; t < hi; ++t) dst[t - ow0] = row[2 * t + off];
      for (t = hi; t < ow0 + len; ++t) dst[t - ow0] = 0.0f;
    } else {
      for (int64_t t = 0; t < len; ++t) {
        const int64_t iw = (ow0 + t) * p.sw + off;
        dst[t] = iw >= 0 && iw < p.w_in ? row[iw] : 0.0f;
      }
    }
  }
}

// Rows [R t / tasks, R (t + 1) / tasks) of the shared B, R = images x groups x column blocks x K:
// each row as ConvGemmUnit packs it, zeros past the block's columns up to the panels' end.
void ConvGemmPackShared(const ConvRun& run, size_t t) {
  const ConvPlan& p = run.p;
  const int64_t kdim = p.cpg * p.kh * p.kw, positions = p.oh * p.ow, taps = p.kh * p.kw;
  const int64_t total = p.n * p.groups * run.col_blocks * kdim;
  const int64_t r0 = total * int64_t(t) / int64_t(run.b_tasks), r1 = total * int64_t(t + 1) / int64_t(run.b_tasks);
  Im2colRun runs[cpu_detail::kConvNc];
  int64_t run_count = 0, runs_block = -1;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t block = r / kdim, k = r % kdim;
    const int64_t cb = block % run.col_blocks, ng = block / run.col_blocks;
    const int64_t q0 = cb * run.nc, cols = positions - q0 < run.nc ? positions - q0 : run.nc;
    if (block != runs_block) {
      run_count = Im2colRuns(p, q0, cols, runs);
      runs_block = block;
    }
    const int64_t ic = k / taps, i = (k % taps) / p.kw, j = k % p.kw;
    const int64_t n = ng / p.groups, g = ng % p.groups;
    float* line = run.shared_b + r * run.shared_ld;
    Im2colLine(p, p.in + ((n * p.c + g * p.cpg) + ic) * p.h * p.w_in, i, j, runs, run_count, line);
    for (int64_t c = cols; c < run.shared_ld - cpu_detail::kConvLdPad; ++c) line[c] = 0.0f;
  }
}

// Recomputes the NaN outputs of rows [m0, m1) x positions [q0, q1) of image n (see the top).
HWY_INLINE void FixNaN(const ConvPlan& p, int64_t n, int64_t oc0, int64_t rows, int64_t q0, int64_t q1) {
  const ConvTag d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t plane = p.oh * p.ow;
  for (int64_t r = 0; r < rows; ++r) {
    float* out = p.out + (n * p.o + oc0 + r) * plane;
    for (int64_t q = q0; q < q1; q += lanes) {
      const int64_t cnt = q1 - q < lanes ? q1 - q : lanes;
      const auto v = cnt == lanes ? hn::LoadU(d, out + q) : LoadTail(d, out + q, size_t(cnt));
      if (hn::AllFalse(d, hn::IsNaN(v))) continue;
      for (int64_t t = q; t < q + cnt; ++t) {
        if (std::isnan(out[t])) out[t] = cpu_detail::conv_point(p, n, oc0 + r, t / p.ow, t % p.ow);
      }
    }
  }
}

void ConvGemmUnit(const ConvRun& run, size_t u, float* HWY_RESTRICT buf) {
  const ConvPlan& p = run.p;
  const ConvTag d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t nr = 2 * lanes;
  const int64_t kdim = p.cpg * p.kh * p.kw, positions = p.oh * p.ow;
  int64_t rest = static_cast<int64_t>(u);
  const int64_t cb = rest % run.col_blocks;
  rest /= run.col_blocks;
  const int64_t mb = rest % run.m_chunks;
  rest /= run.m_chunks;
  const int64_t g = rest % p.groups, n = rest / p.groups;
  const int64_t q0 = cb * run.nc;
  const int64_t cols = positions - q0 < run.nc ? positions - q0 : run.nc;
  const int64_t m0 = mb * run.m_chunk;
  const int64_t m1 = m0 + run.m_chunk < p.opg ? m0 + run.m_chunk : p.opg;
  if (m0 >= m1) return;
  const int64_t panels = (cols + nr - 1) / nr;
  const int64_t oc0 = g * p.opg + m0;
  const float* in_g = p.in + (n * p.c + g * p.cpg) * p.h * p.w_in;
  const float* w_rows = p.w + oc0 * kdim;
  float* out_rows = p.out + (n * p.o + oc0) * positions + q0;
  const float* bias_rows = p.bias != nullptr ? p.bias + oc0 : nullptr;
  const int64_t kc_max = kdim < cpu_detail::kConvKc ? kdim : cpu_detail::kConvKc;
  const float clamp_bounds[2] = {p.out_min, p.out_max};
  // B rows are ld apart: the panels' columns plus kConvLdPad, so the rows of one panel spread over
  // the L1 sets (a 1 KiB stride would put a 256-row panel in a few sets).
  const bool shared = run.shared_b != nullptr;
  const int64_t ld = shared ? run.shared_ld : panels * nr + cpu_detail::kConvLdPad;
  Im2colRun runs[cpu_detail::kConvNc];
  int64_t run_count = 0;
  if (!shared) {
    for (int64_t kk = 0; kk < kc_max; ++kk) {
      for (int64_t t = cols; t < panels * nr; ++t) buf[kk * ld + t] = 0.0f;  // past the block: zeros
    }
    run_count = Im2colRuns(p, q0, cols, runs);
  }
  for (int64_t k0 = 0; k0 < kdim; k0 += cpu_detail::kConvKc) {
    const int64_t kc = kdim - k0 < cpu_detail::kConvKc ? kdim - k0 : cpu_detail::kConvKc;
    if (shared) {
      buf = run.shared_b + (((n * p.groups + g) * run.col_blocks + cb) * kdim + k0) * ld;
    } else {
      const int64_t taps = p.kh * p.kw;
      int64_t ic = k0 / taps, i = (k0 % taps) / p.kw, j = k0 % p.kw;
      for (int64_t kk = 0; kk < kc; ++kk) {
        Im2colLine(p, in_g + ic * p.h * p.w_in, i, j, runs, run_count, buf + kk * ld);
        if (++j == p.kw) {
          j = 0;
          if (++i == p.kh) i = 0, ++ic;
        }
      }
    }
    const bool first = k0 == 0, last = k0 + kc == kdim;
    const float* clamp = last && p.clamp ? clamp_bounds : nullptr;
    for (int64_t j = 0; j < panels; ++j) {
      const float* bp = buf + j * nr;
      const int64_t ncols = cols - j * nr < nr ? cols - j * nr : nr;
      float* c = out_rows + j * nr;
      const int64_t rows = m1 - m0;
      for (int64_t r = 0; r < rows; r += kConvMr) {
        const int take = static_cast<int>(rows - r < kConvMr ? rows - r : kConvMr);
        const float* bias = last && bias_rows != nullptr ? bias_rows + r : nullptr;
        if (j == 0 && r + kConvMr < rows) {
          // The next row group's block of w, which the first panel meets first: short runs of
          // kConvKc floats in kConvMr rows that the hardware prefetchers barely see before they
          // end (inside a network w streams from memory).
          const int64_t next = rows - r - kConvMr < kConvMr ? rows - r - kConvMr : kConvMr;
          for (int64_t i = 0; i < next; ++i) {
            const float* row = w_rows + (r + kConvMr + i) * kdim + k0;
            for (int64_t k = 0; k < kc; k += 16) hwy::Prefetch(row + k);
          }
        }
        if (ncols > lanes) {
          ConvRows<2>(take, w_rows + r * kdim + k0, kdim, bp, kc, ld, c + r * positions, positions,
                      size_t(ncols), first, bias, clamp);
        } else {
          ConvRows<1>(take, w_rows + r * kdim + k0, kdim, bp, kc, ld, c + r * positions, positions,
                      size_t(ncols), first, bias, clamp);
        }
      }
    }
  }
  if (p.pt | p.pl | p.pb | p.pr) FixNaN(p, n, oc0, m1 - m0, q0, q0 + cols);
}

// Depthwise copy out with the output clamp: dst[t] = clamp(src[t] (+ b)) for t < count. src is a row
// of the outputs over the padded width, whose slack (conv_dw_outq_floats) covers a whole vector
// past the row, so the tail loads a full vector and only the store is partial. (Clamping dst in
// place after the scalar copy read its narrow stores back as vectors: a store-forwarding stall per
// row that cost MobileNetV2's 7x7 and 14x14 depthwise convs more than the clip it replaced.)
template <bool kBias>
HWY_INLINE void CopyRowClamped(const ConvPlan& p, const float* HWY_RESTRICT src, float b,
                               float* HWY_RESTRICT dst, int64_t count) {
  const ConvTag d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V lo = hn::Set(d, p.out_min), hi = hn::Set(d, p.out_max), bv = hn::Set(d, b);
  auto value = [&](int64_t t) {
    const V x = hn::LoadU(d, src + t);
    return ClampKeepNaN(kBias ? hn::Add(x, bv) : x, lo, hi);
  };
  int64_t t = 0;
  for (; t + lanes <= count; t += lanes) hn::StoreU(value(t), d, dst + t);
  if (const size_t tail = size_t(count - t); tail != 0) StoreTail(d, value(t), dst + t, tail);
}

// Depthwise: q in [0, count) of the phase grid, taps (offsets into the phase planes) unrolled when
// kTaps is nonzero.
template <int kTaps>
HWY_INLINE void DepthwiseRows(const float* HWY_RESTRICT plane, const int64_t* tap_off, int64_t taps,
                              const float* HWY_RESTRICT wc, int64_t count, float* HWY_RESTRICT outq) {
  const ConvTag d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t tap_count = kTaps != 0 ? kTaps : taps;
  constexpr int kNv = 4;
  for (int64_t q = 0; q < count; q += kNv * lanes) {
    V acc[kNv];
    for (int v = 0; v < kNv; ++v) acc[v] = hn::Zero(d);
    for (int64_t t = 0; t < tap_count; ++t) {
      const float* src = plane + tap_off[t] + q;
      const V wv = hn::Set(d, wc[t]);
      for (int v = 0; v < kNv; ++v) acc[v] = hn::MulAdd(hn::LoadU(d, src + v * lanes), wv, acc[v]);
    }
    for (int v = 0; v < kNv; ++v) hn::StoreU(acc[v], d, outq + q + v * lanes);
  }
}

// The zero-padded plane's phases (see conv_dw_plane_floats): phase (pi, pj) row a, column b holds
// padded row a s + pi, column b s + pj, i.e. input (a s + pi - pt, b s + pj - pl) or 0 outside.
HWY_INLINE void DepthwisePlanes(const ConvPlan& p, const float* HWY_RESTRICT in_c, int64_t hq, int64_t wq,
                                float* HWY_RESTRICT plane) {
  const int64_t s = p.sh;
  for (int64_t pi = 0; pi < s; ++pi) {
    for (int64_t pj = 0; pj < s; ++pj) {
      float* phase = plane + (pi * s + pj) * hq * wq;
      // Columns b with 0 <= b s + pj - pl < W: [b_lo, b_hi).
      int64_t b_lo = p.pl - pj > 0 ? (p.pl - pj + s - 1) / s : 0;
      int64_t b_hi = p.w_in + p.pl - pj > 0 ? (p.w_in + p.pl - pj + s - 1) / s : 0;
      if (b_hi > wq) b_hi = wq;
      if (b_lo > b_hi) b_lo = b_hi;
      for (int64_t a = 0; a < hq; ++a) {
        float* dst = phase + a * wq;
        const int64_t ih = a * s + pi - p.pt;
        if (ih < 0 || ih >= p.h) {
          std::memset(dst, 0, size_t(wq) * sizeof(float));
          continue;
        }
        const float* row = in_c + ih * p.w_in + pj - p.pl;  // column b reads row[b s]
        for (int64_t b = 0; b < b_lo; ++b) dst[b] = 0.0f;
        if (s == 1) {
          std::memcpy(dst + b_lo, row + b_lo, size_t(b_hi - b_lo) * sizeof(float));
        } else {
          // Stride 2: the even lanes of two loads while both stay inside the input row (whose
          // columns are row[pl - pj .. pl - pj + W)).
          int64_t b = b_lo;
#if HWY_TARGET != HWY_SCALAR
          const ConvTag d;
          const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
          const int64_t row_end = p.w_in + p.pl - pj;  // one past the row's last column, in row[] units
          for (; b + lanes <= b_hi && 2 * (b + lanes) <= row_end; b += lanes) {
            hn::StoreU(EvenLanes(d, row + 2 * b), d, dst + b);
          }
#endif
          for (; b < b_hi; ++b) dst[b] = row[b * s];
        }
        for (int64_t b = b_hi; b < wq; ++b) dst[b] = 0.0f;
      }
    }
  }
}

void ConvDepthwiseUnit(const ConvRun& run, size_t u, float* HWY_RESTRICT buf) {
  const ConvPlan& p = run.p;
  const int64_t n = static_cast<int64_t>(u) / p.c, ch = static_cast<int64_t>(u) % p.c;
  const int64_t wq = cpu_detail::conv_dw_wq(p), hq = cpu_detail::conv_dw_hq(p), s = p.sh;
  float* plane = buf;
  const int64_t plane_floats = cpu_detail::conv_dw_plane_floats(p);
  float* outq = buf + plane_floats;
  const float* in_c = p.in + (n * p.c + ch) * p.h * p.w_in;
  DepthwisePlanes(p, in_c, hq, wq, plane);
  std::memset(plane + s * s * hq * wq, 0, size_t(plane_floats - s * s * hq * wq) * sizeof(float));
  // Tap (i, j): phase (i % s, j % s) at (i / s) Wq + j / s; stride 1: i dh Wq + j dw.
  int64_t tap_off[cpu_detail::kMaxDepthwiseTaps];
  const int64_t taps = p.kh * p.kw;
  for (int64_t i = 0; i < p.kh; ++i) {
    for (int64_t j = 0; j < p.kw; ++j) {
      tap_off[i * p.kw + j] = s == 1 ? i * p.dh * wq + j * p.dw
                                     : ((i % s) * s + j % s) * hq * wq + (i / s) * wq + j / s;
    }
  }
  const float* wc = p.w + ch * taps;
  const int64_t count = p.oh * wq;
  if (taps == 9) {
    DepthwiseRows<9>(plane, tap_off, taps, wc, count, outq);
  } else if (taps == 25) {
    DepthwiseRows<25>(plane, tap_off, taps, wc, count, outq);
  } else {
    DepthwiseRows<0>(plane, tap_off, taps, wc, count, outq);
  }
  float* out = p.out + (n * p.c + ch) * p.oh * p.ow;
  const float b = p.bias != nullptr ? p.bias[ch] : 0.0f;
  for (int64_t oh = 0; oh < p.oh; ++oh) {
    const float* src = outq + oh * wq;
    float* dst = out + oh * p.ow;
    if (p.clamp) {
      if (p.bias != nullptr) {
        CopyRowClamped<true>(p, src, b, dst, p.ow);
      } else {
        CopyRowClamped<false>(p, src, b, dst, p.ow);
      }
    } else if (p.bias != nullptr) {
      for (int64_t t = 0; t < p.ow; ++t) dst[t] = src[t] + b;
    } else {
      std::memcpy(dst, src, size_t(p.ow) * sizeof(float));
    }
  }
  if (p.pt | p.pl | p.pb | p.pr) FixNaN(p, n, ch, 1, 0, p.oh * p.ow);
}

// ---------------------------------------------------------------- depthwise, channels in lanes

#if EMBER_HAS_FEW_TRANSPOSE
// Channels [c0, c0 + kFewL) of image n (conv_plan.h, conv_dw_lanes): t = the zero-padded input block
// [Hp][Wp][kFewL], o = the outputs [positions][kFewL].
void ConvDwLanesGroup(const ConvPlan& p, int64_t n, int64_t c0, float* HWY_RESTRICT t, float* HWY_RESTRICT o) {
  constexpr int64_t L = kFewL;
  const int64_t hp = cpu_detail::conv_dw_lanes_hp(p), wp = cpu_detail::conv_dw_lanes_wp(p);
  const int64_t positions = p.oh * p.ow, taps = p.kh * p.kw;
  const int64_t live = p.c - c0 < L ? p.c - c0 : L;  // channels of the group that exist
  const float* in = p.in + (n * p.c + c0) * p.h * p.w_in;
  std::memset(t, 0, size_t(hp * wp * L) * sizeof(float));
  // Input rows ih = r - pt, columns iw = x - pl inside both the input and the block.
  const int64_t r_lo = p.pt, r_hi = p.h + p.pt < hp ? p.h + p.pt : hp;
  const int64_t iw_hi = wp - p.pl < p.w_in ? wp - p.pl : p.w_in;
  FewV rows[L], cols[L];
  for (int64_t r = r_lo; r < r_hi; ++r) {
    const float* src = in + (r - p.pt) * p.w_in;
    for (int64_t iw = 0; iw < iw_hi; iw += L) {
      const int64_t count = iw_hi - iw < L ? iw_hi - iw : L;
      for (int64_t ch = 0; ch < L; ++ch) {
        if (ch >= live) {
          rows[ch] = FewZero();
        } else if (count == L) {
          rows[ch] = FewLoad(src + ch * p.h * p.w_in + iw);
        } else {
          rows[ch] = FewLoadN(src + ch * p.h * p.w_in + iw, count);
        }
      }
      FewTranspose(rows, cols);
      for (int64_t j = 0; j < count; ++j) FewStore(t + (r * wp + iw + j + p.pl) * L, cols[j]);
    }
  }
  // The taps' weights per channel, then each output: one FMA chain over the taps in order.
  FewV wv[cpu_detail::kMaxDepthwiseTaps];
  int64_t off[cpu_detail::kMaxDepthwiseTaps];
  if (taps <= L) {  // channel ch's taps are a row of w: one transpose
    for (int64_t ch = 0; ch < L; ++ch) rows[ch] = ch < live ? FewLoadN(p.w + (c0 + ch) * taps, taps) : FewZero();
    FewTranspose(rows, cols);
    for (int64_t k = 0; k < taps; ++k) wv[k] = cols[k];
  } else {
    for (int64_t k = 0; k < taps; ++k) {
      HWY_ALIGN float lane[L] = {};
      for (int64_t ch = 0; ch < live; ++ch) lane[ch] = p.w[(c0 + ch) * taps + k];
      wv[k] = FewLoad(lane);
    }
  }
  for (int64_t k = 0; k < taps; ++k) off[k] = ((k / p.kw) * p.dh * wp + (k % p.kw) * p.dw) * L;
  FewV bias = FewZero(), lo = FewSet(p.out_min), hi = FewSet(p.out_max);
  if (p.bias != nullptr) {
    HWY_ALIGN float lane[L] = {};
    for (int64_t ch = 0; ch < live; ++ch) lane[ch] = p.bias[c0 + ch];
    bias = FewLoad(lane);
  }
  // Positions in groups of 4 (independent FMA chains: one chain per position waited on its 4-cycle
  // FMA latency at every tap); 3x3 taps unrolled.
  const int64_t step = p.sw * L;
  auto finish = [&](FewV acc, int64_t q) {
    if (p.bias != nullptr) acc = FewAdd(acc, bias);
    if (p.clamp) acc = FewClampKeepNaN(acc, lo, hi);
    FewStore(o + q * L, acc);
  };
  // 4 positions from (oh, ow): 3x3 taps unrolled.
  auto group4 = [&](int64_t oh, int64_t ow) {
    const float* base = t + oh * p.sh * wp * L + ow * step;
    FewV a0 = FewZero(), a1 = FewZero(), a2 = FewZero(), a3 = FewZero();
    auto tap = [&](int64_t k) {
      const float* b = base + off[k];
      a0 = FewFma(FewLoad(b), wv[k], a0);
      a1 = FewFma(FewLoad(b + step), wv[k], a1);
      a2 = FewFma(FewLoad(b + 2 * step), wv[k], a2);
      a3 = FewFma(FewLoad(b + 3 * step), wv[k], a3);
    };
    if (taps == 9) {
#pragma GCC unroll 9
      for (int64_t k = 0; k < 9; ++k) tap(k);
    } else {
      for (int64_t k = 0; k < taps; ++k) tap(k);
    }
    const int64_t q = oh * p.ow + ow;
    finish(a0, q);
    finish(a1, q + 1);
    finish(a2, q + 2);
    finish(a3, q + 3);
  };
  for (int64_t oh = 0; oh < p.oh; ++oh) {
    int64_t ow = 0;
    for (; ow + 4 <= p.ow; ow += 4) group4(oh, ow);
    if (ow < p.ow && p.ow >= 4) {  // the last 4, again: the same chains give the same bits
      group4(oh, p.ow - 4);
      ow = p.ow;
    }
    for (; ow < p.ow; ++ow) {
      const float* base = t + oh * p.sh * wp * L + ow * step;
      FewV acc = FewZero();
      for (int64_t k = 0; k < taps; ++k) acc = FewFma(FewLoad(base + off[k]), wv[k], acc);
      finish(acc, oh * p.ow + ow);
    }
  }
  // Back to planes: blocks of L positions x L channels.
  float* out = p.out + (n * p.c + c0) * positions;
  for (int64_t q = 0; q < positions; q += L) {
    const int64_t count = positions - q < L ? positions - q : L;
    for (int64_t j = 0; j < L; ++j) rows[j] = j < count ? FewLoad(o + (q + j) * L) : FewZero();
    FewTranspose(rows, cols);
    for (int64_t ch = 0; ch < live; ++ch) {
      if (count == L) {
        FewStore(out + ch * positions + q, cols[ch]);
      } else {
        FewStoreN(out + ch * positions + q, cols[ch], count);
      }
    }
  }
  if (p.pt | p.pl | p.pb | p.pr) FixNaN(p, n, c0, live, 0, positions);
}
#endif

// Unit u: image u / groups, channels [(u % groups) kDwLanesGroup, + kDwLanesGroup).
void ConvDwLanesUnit(const ConvRun& run, size_t u, float* HWY_RESTRICT buf) {
#if EMBER_HAS_FEW_TRANSPOSE
  const ConvPlan& p = run.p;
  const int64_t groups = (p.c + cpu_detail::kDwLanesGroup - 1) / cpu_detail::kDwLanesGroup;
  const int64_t n = int64_t(u) / groups, g = int64_t(u) % groups;
  float* t = buf;
  float* o = buf + cpu_detail::conv_round_up(cpu_detail::conv_dw_lanes_hp(p) * cpu_detail::conv_dw_lanes_wp(p), 4) *
                       cpu_detail::kDwLanesGroup;
  for (int64_t c0 = g * cpu_detail::kDwLanesGroup; c0 < (g + 1) * cpu_detail::kDwLanesGroup && c0 < p.c;
       c0 += kFewL) {
    ConvDwLanesGroup(p, n, c0, t, o);
  }
#else
  (void)run, (void)u, (void)buf;
#endif
}

bool ConvDwLanesAvailable() { return EMBER_HAS_FEW_TRANSPOSE != 0; }

void ConvPackedTask(const ConvRun& run, size_t t) {
  float* buf = reinterpret_cast<float*>(run.base + t * run.slot);
  const size_t begin = run.units * t / run.tasks, end = run.units * (t + 1) / run.tasks;
  for (size_t u = begin; u < end; ++u) {
    if (run.p.path == cpu_detail::ConvPath::Gemm) {
      ConvGemmUnit(run, u, buf);
    } else if (run.dw_lanes) {
      ConvDwLanesUnit(run, u, buf);

    } else {
      ConvDepthwiseUnit(run, u, buf);
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(ConvPackedTask);
EMBER_HWY_EXPORT(ConvGemmPackShared);
EMBER_HWY_EXPORT(ConvDwLanesAvailable);

namespace cpu_detail {
namespace {
void conv_packed_task(void* arg, size_t t) {
  EMBER_HWY_DISPATCH(ConvPackedTask)(*static_cast<const ConvRun*>(arg), t);
}
void conv_gemm_pack_task(void* arg, size_t t) {
  EMBER_HWY_DISPATCH(ConvGemmPackShared)(*static_cast<const ConvRun*>(arg), t);
}
}  // namespace

bool conv2d_packed(KernelContext& ctx, const ConvPlan& p) {
  if (p.path == ConvPath::Direct) return false;
  uint8_t* base = ctx.scratch.data();
  if (base == nullptr) return false;
  const size_t pad = (kConvAlign - reinterpret_cast<uintptr_t>(base) % kConvAlign) % kConvAlign;
  const size_t avail = ctx.scratch.size() < pad ? 0 : ctx.scratch.size() - pad;
  ConvRun run{};
  run.p = p;
  const double flops = 2.0 * double(p.n * p.o * p.oh * p.ow) * double(p.cpg * p.kh * p.kw);
  if (p.path == ConvPath::Winograd) {
    const size_t shared = size_t(conv_wino_shared_floats(p)) * sizeof(float);
    const size_t wslot = conv_slot_bytes(p);
    if (avail >= shared + wslot) {
      conv2d_winograd(flops < double(1 << 18) ? nullptr : ctx.pool, p, base + pad, (avail - shared) / wslot);
      return true;
    }
    run.p.path = ConvPath::Gemm;  // less scratch than the shape's (a smaller bound at load): the GEMM
  }
  const size_t slot = conv_slot_bytes(run.p);
  if (slot == 0) return false;
  const size_t slots = avail / slot;
  if (slots == 0) return false;  // called without conv2d_scratch's bytes: the direct path
  run.base = base + pad;
  run.slot = slot;
  size_t threads = ctx.pool != nullptr ? ctx.pool->thread_count() : 1;
  if (flops < double(1 << 18)) threads = 1;
  if (threads > slots) threads = slots;
  if (run.p.path == ConvPath::Gemm) {
    const ConvGemmSplit split = conv_gemm_split(p, int64_t(threads));
    run.nc = split.nc;
    run.col_blocks = split.col_blocks;
    run.m_chunk = split.m_chunk;
    run.m_chunks = split.m_chunks;
    run.units = size_t(p.n * p.groups * run.col_blocks * run.m_chunks);
    const size_t shared = size_t(split.shared_floats) * sizeof(float);
    if (shared != 0 && avail >= shared + threads * slot) {
      run.shared_b = reinterpret_cast<float*>(base + pad + threads * slot);
      run.shared_ld = split.shared_ld;
      run.b_tasks = threads;
      parallel_for(threads > 1 ? ctx.pool : nullptr, run.b_tasks, conv_gemm_pack_task, &run);
    }
  } else {
    run.dw_lanes = conv_dw_lanes(p) && EMBER_HWY_DISPATCH(ConvDwLanesAvailable)();
    run.units = run.dw_lanes ? size_t(p.n * ((p.c + kDwLanesGroup - 1) / kDwLanesGroup)) : size_t(p.n * p.c);
  }
  run.tasks = threads < run.units ? threads : run.units;
  parallel_for(ctx.pool, run.tasks, conv_packed_task, &run);
  return true;
}

}  // namespace cpu_detail

namespace cpu {

size_t conv2d_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t, const TensorView* outputs, size_t,
                      size_t threads) {
  cpu_detail::ConvPlan p{};
  cpu_detail::conv_fill_plan(attrs, inputs[0], inputs[1], outputs[0], &p);
  const size_t t = threads < 1 ? 1 : threads;
  size_t bytes = 0;
  if (p.path == cpu_detail::ConvPath::Winograd) {
    bytes = size_t(cpu_detail::conv_wino_shared_floats(p)) * sizeof(float) + t * cpu_detail::conv_slot_bytes(p);
    p.path = cpu_detail::ConvPath::Gemm;  // and at least the GEMM's (the fallback above)
  }
  const size_t slot = cpu_detail::conv_slot_bytes(p);
  size_t gemm = t * slot;
  if (p.path == cpu_detail::ConvPath::Gemm && slot != 0) {
    gemm += size_t(cpu_detail::conv_gemm_split(p, int64_t(t)).shared_floats) * sizeof(float);
  }
  if (gemm > bytes) bytes = gemm;
  return bytes == 0 ? 0 : bytes + cpu_detail::kConvAlign;
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
