// conv2d 3x3, stride 1, by Winograd's minimal filtering F(m x m, 3 x 3), m = 2 or 4 (Lavin & Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2016): with alpha = m + 2,
//   Y = A^T [ (G g G^T) . (B^T d B) ] A
// for an alpha x alpha input tile d and a 3 x 3 filter g; summed over input channels, the product is
// alpha^2 independent GEMMs M[xi] = U[xi] (O x C) * V[xi] (C x tiles), computed by conv_gemm's
// micro-kernel (conv_micro-inl.h). m = 4 needs 36 multiplies per 16 outputs per input channel where
// the direct conv needs 144.
//
// Phases (conv2d_winograd): the weights' transform U = G g G^T into the shared scratch (vectors over
// input channels, parallel over output channels); then task units of kWinoCols consecutive tiles x
// a chunk of output channels: the block's input rows copied zero-padded, their transform B^T d B
// (vectors over a tile row's tiles, deinterleaved by LoadInterleaved2 / 4) into V, the GEMMs (K in
// blocks of kConvKc, the exact store / reload of conv_gemm), then A^T M A (+ bias, the output clamp)
// staged per tile row and copied into the output.
//
// Numerics: every output is the same sequence of operations whatever the thread count, the task or
// the batch (units split tiles and output channels, never input channels), so results are bitwise
// thread- and batch-invariant; but they are not the reference's FMA chain: the transforms round
// (G has 1/6, 1/12, 1/24 for m = 4), and the error of a tile grows with its inputs' magnitude. Over
// random data the relative L2 error against a double-precision conv is ~2e-7 (m = 2) and ~1.5e-6
// (m = 4); the direct f32 chain's is ~1e-7. An input inf or NaN spreads over the whole tile (inf - inf),
// so every non-finite output is recomputed by conv_point (the reference's semantics: padded taps
// skipped); finite outputs are left as they are.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/conv_winograd.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/cache_control.h"
#include "kernels/cpu/hwy_util-inl.h"
#include "kernels/cpu/conv_micro-inl.h"

#ifndef EMBER_KERNELS_CPU_CONV_WINOGRAD_RUN_
#define EMBER_KERNELS_CPU_CONV_WINOGRAD_RUN_
#include "kernels/cpu/conv_plan.h"
#include "runtime/core/thread_pool.h"
namespace ember::kernels::cpu_detail {

struct WinoRun {
  ConvPlan p;
  WinoGeometry g;
  float* u;        // shared: [a2][O][C]
  uint8_t* slots;  // task t: [t * slot, (t + 1) * slot)
  size_t slot;
  size_t units, tasks;
  int64_t col_blocks, m_chunks, m_chunk;  // units: (n, m chunk, column block)
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::ConvPlan;
using cpu_detail::WinoGeometry;
using cpu_detail::WinoRun;
using WinoV = hn::Vec<ConvTag>;

// ------------------------------------------------------------------ 1-D transforms (any type T with
// + - * : float or a vector; `k` turns a float constant into T).

// t = B^T d (alpha values from alpha).
template <int kM, class T, class K>
HWY_INLINE void InputT(const T* d, T* t, K k) {
  if constexpr (kM == 2) {
    t[0] = d[0] - d[2];
    t[1] = d[1] + d[2];
    t[2] = d[2] - d[1];
    t[3] = d[1] - d[3];
  } else {
    const T four = k(4.0f), two = k(2.0f), five = k(5.0f);
    t[0] = four * d[0] - five * d[2] + d[4];
    t[1] = (d[3] + d[4]) - four * (d[1] + d[2]);
    t[2] = (d[4] - d[3]) + four * (d[1] - d[2]);
    t[3] = (d[4] - d[2]) + two * (d[3] - d[1]);
    t[4] = (d[4] - d[2]) - two * (d[3] - d[1]);
    t[5] = four * d[1] - five * d[3] + d[5];
  }
}

// u = G g (alpha values from 3).
template <int kM, class T, class K>
HWY_INLINE void KernelT(const T* g, T* u, K k) {
  if constexpr (kM == 2) {
    const T half = k(0.5f);
    u[0] = g[0];
    u[1] = (g[0] + g[1] + g[2]) * half;
    u[2] = (g[0] - g[1] + g[2]) * half;
    u[3] = g[2];
  } else {
    const T sixth = k(1.0f / 6.0f);
    const T s0 = g[0] * k(1.0f / 24.0f), s1 = g[1] * k(1.0f / 12.0f), s2 = g[2] * sixth;
    u[0] = g[0] * k(0.25f);
    u[1] = (g[0] + g[1] + g[2]) * k(-1.0f / 6.0f);
    u[2] = (g[0] - g[1] + g[2]) * k(-1.0f / 6.0f);
    u[3] = s0 + s1 + s2;
    u[4] = s0 - s1 + s2;
    u[5] = g[2];
  }
}

// y = A^T t (m values from alpha).
template <int kM, class T, class K>
HWY_INLINE void OutputT(const T* t, T* y, K k) {
  if constexpr (kM == 2) {
    y[0] = t[0] + t[1] + t[2];
    y[1] = t[1] - t[2] - t[3];
  } else {
    const T p12 = t[1] + t[2], m12 = t[1] - t[2], p34 = t[3] + t[4], m34 = t[3] - t[4];
    y[0] = t[0] + p12 + p34;
    y[1] = m12 + k(2.0f) * m34;
    y[2] = p12 + k(4.0f) * p34;
    y[3] = m12 + k(8.0f) * m34 + t[5];
  }
}

// ------------------------------------------------------------------ weights

// U[xi][oc][ic] = (G g G^T)[xi] for output channels [oc0, oc1), planes u_stride floats apart:
// vectors of input channels, the last partial vector in scalars (the same operations).
template <int kM>
HWY_INLINE void WeightRows(const ConvPlan& p, int64_t oc0, int64_t oc1, float* u, int64_t u_stride) {
  constexpr int kA = kM + 2;
  const ConvTag d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto kv = [&](float c) { return hn::Set(d, c); };
  auto ks = [](float c) { return c; };
  for (int64_t oc = oc0; oc < oc1; ++oc) {
    const float* w_oc = p.w + oc * p.c * 9;
    float* u_oc = u + oc * p.c;
    int64_t ic = 0;
#if HWY_TARGET != HWY_SCALAR
    // L input channels at a time, no gathers: their 9 L taps are 3 L rows (ic, kh) of 3 (kw).
    // LoadInterleaved3 splits the rows' kw; the transform along kw gives, per j, 3 vectors over
    // the rows, which a second LoadInterleaved3 (through 3 L floats of stack) splits by kh.
    HWY_ALIGN float rows3[3 * 16];
    for (; ic + lanes <= p.c; ic += lanes) {
      const float* src = w_oc + ic * 9;
      // Inside a network the weights come from memory: 4 vectors ahead (the hardware prefetcher
      // alone left this loop waiting on them, ~8 GB/s).
      for (int64_t l = 0; l < 9 * lanes; l += 16) hwy::Prefetch(src + 4 * 9 * lanes + l);
      WinoV h[kA][3];
      for (int q = 0; q < 3; ++q) {
        WinoV c[3], u[kA];
        hn::LoadInterleaved3(d, src + q * 3 * lanes, c[0], c[1], c[2]);
        KernelT<kM>(c, u, kv);
        for (int j = 0; j < kA; ++j) h[j][q] = u[j];
      }
      for (int j = 0; j < kA; ++j) {
        for (int q = 0; q < 3; ++q) hn::Store(h[j][q], d, rows3 + q * lanes);
        WinoV c[3], u[kA];
        hn::LoadInterleaved3(d, rows3, c[0], c[1], c[2]);
        KernelT<kM>(c, u, kv);
        for (int i = 0; i < kA; ++i) hn::StoreU(u[i], d, u_oc + (i * kA + j) * u_stride + ic);
      }
    }
#else
    (void)lanes;
    (void)kv;
#endif
    for (; ic < p.c; ++ic) {
      const float* g = w_oc + ic * 9;
      float h[3][kA], col[3], u[kA];
      for (int kh = 0; kh < 3; ++kh) KernelT<kM>(g + kh * 3, h[kh], ks);
      for (int j = 0; j < kA; ++j) {
        for (int kh = 0; kh < 3; ++kh) col[kh] = h[kh][j];
        KernelT<kM>(col, u, ks);
        for (int i = 0; i < kA; ++i) u_oc[(i * kA + j) * u_stride + ic] = u[i];
      }
    }
  }
}

void WinoWeightTask(const WinoRun& run, size_t t) {
  const int64_t o = run.p.o;
  const int64_t oc0 = o * int64_t(t) / int64_t(run.tasks), oc1 = o * int64_t(t + 1) / int64_t(run.tasks);
  const ConvPlan& p = run.p;
  if (run.g.m == 2) {
    WeightRows<2>(p, oc0, oc1, run.u, cpu_detail::conv_wino_u_stride(p));
  } else {
    WeightRows<4>(p, oc0, oc1, run.u, cpu_detail::conv_wino_u_stride(p));
  }
}

// ------------------------------------------------------------------ one unit

// A vector of tiles' alpha input columns of padded row `row`, tile starts m floats apart.
template <int kM>
HWY_INLINE void LoadTileRow(const float* row, WinoV* c) {
  const ConvTag d;
  if constexpr (kM == 2) {
    hn::LoadInterleaved2(d, row, c[0], c[1]);
    hn::LoadInterleaved2(d, row + 2, c[2], c[3]);
  } else {
    WinoV x6, x7;
    hn::LoadInterleaved4(d, row, c[0], c[1], c[2], c[3]);
    hn::LoadInterleaved4(d, row + 4, c[4], c[5], x6, x7);
  }
}

template <int kM>
HWY_INLINE void StoreTileRow(const WinoV* y, float* dst) {
  const ConvTag d;
  if constexpr (kM == 2) {
    hn::StoreInterleaved2(y[0], y[1], d, dst);
  } else {
    hn::StoreInterleaved4(y[0], y[1], y[2], y[3], d, dst);
  }
}

// The tile rows a unit's columns [c0, c0 + cols) cross: row r holds tiles [lo, hi) at unit
// column base + (tile - lo).
struct TileSeg {
  int64_t th, lo, hi, col;
};

HWY_INLINE int64_t TileSegments(const WinoGeometry& g, int64_t c0, int64_t cols, TileSeg* segs) {
  int64_t count = 0;
  for (int64_t t = c0; t < c0 + cols;) {
    const int64_t th = t / g.tw, lo = t % g.tw;
    const int64_t hi = g.tw - lo < c0 + cols - t ? g.tw : lo + (c0 + cols - t);
    segs[count++] = TileSeg{th, lo, hi, t - c0};
    t += hi - lo;
  }
  return count;
}

template <int kM>
void WinoUnit(const WinoRun& run, size_t u, float* HWY_RESTRICT buf) {
  constexpr int kA = kM + 2, kA2 = kA * kA;
  const ConvPlan& p = run.p;
  const WinoGeometry& g = run.g;
  const ConvTag d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t nr = 2 * lanes;
  auto kv = [&](float c) { return hn::Set(d, c); };
  int64_t rest = static_cast<int64_t>(u);
  const int64_t cb = rest % run.col_blocks;
  rest /= run.col_blocks;
  const int64_t mb = rest % run.m_chunks, n = rest / run.m_chunks;
  const int64_t c0 = cb * cpu_detail::kWinoCols;
  const int64_t cols = g.tiles - c0 < cpu_detail::kWinoCols ? g.tiles - c0 : cpu_detail::kWinoCols;
  const int64_t oc0 = mb * run.m_chunk;
  const int64_t rows = p.o - oc0 < run.m_chunk ? p.o - oc0 : run.m_chunk;
  if (rows <= 0) return;
  constexpr int64_t kCols = cpu_detail::kWinoCols;
  float* v = buf;
  float* mres = v + cpu_detail::conv_round_up(kA2 * g.v_stride, 16);
  float* padded = mres + cpu_detail::conv_round_up(rows * kA2 * kCols + 16, 16);
  float* stage = padded + g.rows_max * g.wp;
  // At most kWinoCols tile rows (one tile per row when tw = 1).
  TileSeg segs[cpu_detail::kWinoCols];
  const int64_t seg_count = TileSegments(g, c0, cols, segs);
  const int64_t th0 = segs[0].th;
  const int64_t in_rows = (segs[seg_count - 1].th - th0) * kM + kA;
  const int64_t ih0 = th0 * kM - p.pt;
  // Input transform, per input channel: rows [ih0, ih0 + in_rows) zero-padded (column x of a
  // padded row is input column x - pl), then B^T d B for each vector of a tile row's tiles. The
  // padding and the rows outside the input are zeroed once: only the input's rows change per channel.
  std::memset(padded, 0, size_t(in_rows * g.wp) * sizeof(float));
  const int64_t r_lo = ih0 < 0 ? -ih0 : 0;
  const int64_t r_hi = p.h - ih0 < in_rows ? p.h - ih0 : in_rows;
  for (int64_t ic = 0; ic < p.c; ++ic) {
    const float* in_c = p.in + (n * p.c + ic) * p.h * p.w_in;
    for (int64_t r = r_lo; r < r_hi; ++r) {
      std::memcpy(padded + r * g.wp + p.pl, in_c + (ih0 + r) * p.w_in, size_t(p.w_in) * sizeof(float));
    }
    float* v_ic = v + ic * kCols;
    for (int64_t s = 0; s < seg_count; ++s) {
      const TileSeg& seg = segs[s];
      const float* rows0 = padded + (seg.th - th0) * kM * g.wp;
      for (int64_t t = seg.lo; t < seg.hi; t += lanes) {
        WinoV h[kA][kA], c[kA], col[kA], out[kA];
        for (int r = 0; r < kA; ++r) {
          LoadTileRow<kM>(rows0 + r * g.wp + t * kM, c);
          InputT<kM>(c, h[r], kv);
        }
        // Column j of the row transforms, transformed down the rows: V[i][j]. Lanes past the
        // segment's end land in later columns (overwritten by later segments or input channels) or
        // in the plane's kWinoVPad floats: the GEMM and the output transform are lane-wise.
        float* dst = v_ic + seg.col + (t - seg.lo);
        for (int j = 0; j < kA; ++j) {
          for (int r = 0; r < kA; ++r) col[r] = h[r][j];
          InputT<kM>(col, out, kv);
          for (int i = 0; i < kA; ++i) hn::StoreU(out[i], d, dst + (i * kA + j) * g.v_stride);
        }
      }
    }
  }
  // M[r][xi][col] = sum_ic U[xi][oc0 + r][ic] V[xi][ic][col]: one FMA chain over ic per element.
  const int64_t panels = (cols + nr - 1) / nr;
  const int64_t ldm = kA2 * kCols;
  const int64_t u_stride = cpu_detail::conv_wino_u_stride(p);
  for (int64_t r = 0; r < rows; r += kConvMr) {
    const int take = static_cast<int>(rows - r < kConvMr ? rows - r : kConvMr);
    for (int64_t k0 = 0; k0 < p.c; k0 += cpu_detail::kConvKc) {
      const int64_t kc = p.c - k0 < cpu_detail::kConvKc ? p.c - k0 : cpu_detail::kConvKc;
      const float* a = run.u + (oc0 + r) * p.c + k0;
      for (int xi = 0; xi < kA2; ++xi) {
        const float* a_xi = a + xi * u_stride;
        const float* v_xi = v + xi * g.v_stride + k0 * kCols;
        float* m_xi = mres + r * ldm + xi * kCols;
        for (int64_t j = 0; j < panels; ++j) {
          const int64_t ncols = cols - j * nr < nr ? cols - j * nr : nr;
          if (ncols > lanes) {
            ConvRows<2>(take, a_xi, p.c, v_xi + j * nr, kc, kCols, m_xi + j * nr, ldm, size_t(ncols), k0 == 0,
                        nullptr, nullptr);
          } else {
            ConvRows<1>(take, a_xi, p.c, v_xi + j * nr, kc, kCols, m_xi + j * nr, ldm, size_t(ncols), k0 == 0,
                        nullptr, nullptr);
          }
        }
      }
    }
  }
  // Output transform per output channel and tile row: A^T M A, + bias, the clamp; staged m rows of
  // the segment's tiles, then copied into the output's valid rows and columns.
  const WinoV lo = hn::Set(d, p.out_min), hi = hn::Set(d, p.out_max);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t oc = oc0 + r;
    const WinoV bias = hn::Set(d, p.bias != nullptr ? p.bias[oc] : 0.0f);
    const float* m_r = mres + r * ldm;
    float* out_c = p.out + (n * p.o + oc) * p.oh * p.ow;
    for (int64_t s = 0; s < seg_count; ++s) {
      const TileSeg& seg = segs[s];
      for (int64_t t = seg.lo; t < seg.hi; t += lanes) {
        const float* src = m_r + seg.col + (t - seg.lo);
        WinoV row[kA], tr[kA][kM], col[kA], y[kM][kM];
        for (int i = 0; i < kA; ++i) {
          for (int j = 0; j < kA; ++j) row[j] = hn::LoadU(d, src + (i * kA + j) * kCols);
          OutputT<kM>(row, tr[i], kv);
        }
        for (int b = 0; b < kM; ++b) {
          WinoV ycol[kM];
          for (int i = 0; i < kA; ++i) col[i] = tr[i][b];
          OutputT<kM>(col, ycol, kv);
          for (int a = 0; a < kM; ++a) y[a][b] = ycol[a];
        }
        for (int a = 0; a < kM; ++a) {
          for (int b = 0; b < kM; ++b) {
            WinoV x = p.bias != nullptr ? hn::Add(y[a][b], bias) : y[a][b];
            y[a][b] = p.clamp ? ClampKeepNaN(x, lo, hi) : x;
          }
          StoreTileRow<kM>(y[a], stage + a * g.ws + (t - seg.lo) * kM);
        }
      }
      const int64_t ow0 = seg.lo * kM;
      const int64_t ow1 = seg.hi * kM < p.ow ? seg.hi * kM : p.ow;
      for (int64_t a = 0; a < kM; ++a) {
        const int64_t oh = seg.th * kM + a;
        if (oh >= p.oh) break;
        float* dst = out_c + oh * p.ow + ow0;
        const float* st = stage + a * g.ws;
        std::memcpy(dst, st, size_t(ow1 - ow0) * sizeof(float));
        // Non-finite outputs: the reference's value (see the top).
        int64_t q = 0;
        bool finite = true;
        for (; q + lanes <= ow1 - ow0; q += lanes) {
          finite = finite && hn::AllTrue(d, hn::IsFinite(hn::LoadU(d, st + q)));
        }
        for (; q < ow1 - ow0; ++q) finite = finite && std::isfinite(st[q]);
        if (finite) continue;
        for (q = 0; q < ow1 - ow0; ++q) {
          if (!std::isfinite(dst[q])) dst[q] = cpu_detail::conv_point(p, n, oc, oh, ow0 + q);
        }
      }
    }
  }
}

void WinoUnitTask(const WinoRun& run, size_t t) {
  float* buf = reinterpret_cast<float*>(run.slots + t * run.slot);
  const size_t begin = run.units * t / run.tasks, end = run.units * (t + 1) / run.tasks;
  for (size_t u = begin; u < end; ++u) {
    if (run.g.m == 2) {
      WinoUnit<2>(run, u, buf);
    } else {
      WinoUnit<4>(run, u, buf);
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(WinoWeightTask);
EMBER_HWY_EXPORT(WinoUnitTask);

namespace cpu_detail {
namespace {
std::atomic<int> g_path_override{-1};

void wino_weight_task(void* arg, size_t t) {
  EMBER_HWY_DISPATCH(WinoWeightTask)(*static_cast<const WinoRun*>(arg), t);
}
void wino_unit_task(void* arg, size_t t) {
  EMBER_HWY_DISPATCH(WinoUnitTask)(*static_cast<const WinoRun*>(arg), t);
}
}  // namespace

int conv_path_override() { return g_path_override.load(std::memory_order_relaxed); }

void conv2d_winograd(ThreadPool* pool, const ConvPlan& p, uint8_t* base, size_t slots) {
  WinoRun run{};
  run.p = p;
  run.g = conv_wino_geometry(p);
  run.u = reinterpret_cast<float*>(base);
  run.slots = base + size_t(conv_wino_shared_floats(p)) * sizeof(float);
  run.slot = conv_slot_bytes(p);
  size_t threads = pool != nullptr ? pool->thread_count() : 1;
  if (threads > slots) threads = slots;
  // The weights' transform: output channels split over the threads.
  run.tasks = threads < size_t(p.o) ? threads : size_t(p.o);
  parallel_for(pool, run.tasks, wino_weight_task, &run);
  // Units (n, output-channel chunk, block of kWinoCols tiles); chunks of at most kWinoMaxRows rows,
  // more of them (>= 16 rows each) while the units leave threads idle.
  run.col_blocks = (run.g.tiles + kWinoCols - 1) / kWinoCols;
  const int64_t t = int64_t(threads);
  int64_t chunks = (p.o + kWinoMaxRows - 1) / kWinoMaxRows;
  while (p.n * run.col_blocks * chunks < 2 * t && (p.o + chunks) / (chunks + 1) >= 16) ++chunks;
  run.m_chunk = conv_round_up((p.o + chunks - 1) / chunks, 8);
  if (run.m_chunk > kWinoMaxRows) run.m_chunk = kWinoMaxRows;
  run.m_chunks = (p.o + run.m_chunk - 1) / run.m_chunk;
  run.units = size_t(p.n * run.col_blocks * run.m_chunks);
  run.tasks = threads < run.units ? threads : run.units;
  parallel_for(pool, run.tasks, wino_unit_task, &run);
}

}  // namespace cpu_detail

namespace cpu {
void conv2d_set_path_for_testing(int mode) {
  cpu_detail::g_path_override.store(mode, std::memory_order_relaxed);
}
}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
