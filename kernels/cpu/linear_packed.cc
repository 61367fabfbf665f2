// f32 linear (C = x w^T + bias, x [M, K], w [N, K]) as a packed GEMM in ctx.scratch
// (linear_scratch bytes); linear without them runs gemm.cc's unpacked dot-product tiles.
//
// Computed transposed, C^T = w x^T, so that w is read in place: the micro-kernel keeps kMr rows of
// w (output features) x 2 vectors of tokens in registers, broadcasting kMr weights per k (rows of w
// are K-contiguous) against 2 loads of a packed panel of x^T. x is packed per call, up to kMc rows
// at a time, into panels of 2 vectors of tokens x K (a transposing copy, zero-filled past M); its
// cost is spread over all N output features. K runs in blocks of kLinearKc (a panel's block, 256 x 2
// vectors, stays in L1 while the block of w rows passes over it), the partial sums of a block of w
// rows waiting in a per-task tile; the last block stores the tile transposed (each token's kMr
// consecutive features).
//
// Every output element is one FMA chain over k = 0..K-1 from 0, then + bias, whatever tile, panel,
// chunk or thread computes it (and whatever M is: batch invariance). Threads split N, never K: the
// pack is one parallel pass, then the blocks of w rows.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear_packed.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cstddef>
#include <cstdint>

#include "hwy/cache_control.h"
#include "kernels/cpu/hwy_util-inl.h"
#include "kernels/cpu/transpose-inl.h"

#ifndef EMBER_KERNELS_CPU_LINEAR_PACKED_RUN_
#define EMBER_KERNELS_CPU_LINEAR_PACKED_RUN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

// The same on every target, so the scratch size is a function of the shapes alone: x is packed
// kLinearMc rows at a time, rounded up to whole panels of kLinearMaxNr tokens (AVX-512's 2 vectors;
// narrower targets' panels divide it).
constexpr int64_t kLinearMc = 256;
constexpr int64_t kLinearMaxNr = 32;
constexpr int64_t kLinearKc = 256;  // reduction rows per block of a panel (32 KiB at 2 x 16 lanes)
constexpr size_t kLinearAlign = 64;

struct LinearRun {
  const float* x;
  const float* w;
  const float* bias;  // may be null
  float* c;
  float* packed;      // kLinearAlign-aligned panels
  int64_t n, k;
  int64_t m0, rows;   // the chunk of x being packed / multiplied
  int64_t panels;     // panels in the chunk (target's width)
  int64_t n_block;    // w rows per compute unit
};

inline int64_t linear_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::LinearRun;

using LinearTag = hn::CappedTag<float, 16>;

#if HWY_TARGET <= HWY_AVX3
constexpr int kLinearMr = 8;
#else
constexpr int kLinearMr = 6;
#endif

size_t LinearPanelWidth() { return 2 * hn::Lanes(LinearTag()); }

// Panels [p_begin, p_end) of the chunk: panel p holds rows m0 + p nr + j (j < nr) of x as
// packed[p][k][j], zeros past M. Blocked over k so the panel lines being filled stay in L1.
void LinearPack(const LinearRun& run, size_t p_begin, size_t p_end) {
  const int64_t nr = static_cast<int64_t>(LinearPanelWidth());
  constexpr int64_t kBlock = 64;
  for (size_t p = p_begin; p < p_end; ++p) {
    float* panel = run.packed + static_cast<int64_t>(p) * run.k * nr;
    const int64_t r0 = run.m0 + static_cast<int64_t>(p) * nr;
    for (int64_t k0 = 0; k0 < run.k; k0 += kBlock) {
      const int64_t k1 = k0 + kBlock < run.k ? k0 + kBlock : run.k;
      for (int64_t j = 0; j < nr; ++j) {
        float* dst = panel + j;
        if (r0 + j < run.m0 + run.rows) {
          const float* src = run.x + (r0 + j) * run.k;
          for (int64_t k = k0; k < k1; ++k) dst[k * nr] = src[k];
        } else {
          for (int64_t k = k0; k < k1; ++k) dst[k * nr] = 0.0f;
        }
      }
    }
  }
}

// Features [n0, n0 + kRows) x the panel's tokens (<= kNv * lanes) over reduction rows [k0, k0 + kc):
// from 0 when `first`, else from the partial sums in `part` (row r at part + r * kLinearMaxNr);
// then back into `part`, or when `last` + bias and stored transposed into C (token t's kRows
// consecutive features at c + t * ldc).
template <int kRows, int kNv>
HWY_NOINLINE void LinearPackedMicro(const float* HWY_RESTRICT w, int64_t ldw, int64_t kc,
                                    const float* HWY_RESTRICT bp, int64_t nr, float* HWY_RESTRICT part,
                                    bool first, bool last, const float* bias, float* HWY_RESTRICT c,
                                    int64_t ldc, size_t tokens) {
  const LinearTag d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  V acc[kRows][kNv];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kNv; ++v) {
      acc[r][v] = first ? hn::Zero(d) : hn::Load(d, part + r * cpu_detail::kLinearMaxNr + v * lanes);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    V b[kNv];
    for (int v = 0; v < kNv; ++v) b[v] = hn::LoadU(d, bp + k * nr + v * lanes);
    for (int r = 0; r < kRows; ++r) {
      const V av = hn::Set(d, w[r * ldw + k]);
      for (int v = 0; v < kNv; ++v) acc[r][v] = hn::MulAdd(av, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kNv; ++v) hn::Store(acc[r][v], d, part + r * cpu_detail::kLinearMaxNr + v * lanes);
  if (!last) return;
  for (size_t t = 0; t < tokens; ++t) {
    float* dst = c + static_cast<int64_t>(t) * ldc;
    if (bias != nullptr) {
      for (int r = 0; r < kRows; ++r) dst[r] = part[r * cpu_detail::kLinearMaxNr + t] + bias[r];
    } else {
      for (int r = 0; r < kRows; ++r) dst[r] = part[r * cpu_detail::kLinearMaxNr + t];
    }
  }
}

template <int kNv>
HWY_INLINE void LinearPackedRows(int rows, const float* w, int64_t ldw, int64_t kc, const float* bp,
                                 int64_t nr, float* part, bool first, bool last, const float* bias,
                                 float* c, int64_t ldc, size_t tokens) {
  switch (rows) {
#define EMBER_LINEAR_ROWS_CASE(R)                                                              \
  case R:                                                                                      \
    if constexpr (R <= kLinearMr) {                                                            \
      LinearPackedMicro<R, kNv>(w, ldw, kc, bp, nr, part, first, last, bias, c, ldc, tokens);  \
    }                                                                                          \
    break;
    EMBER_LINEAR_ROWS_CASE(1)
    EMBER_LINEAR_ROWS_CASE(2)
    EMBER_LINEAR_ROWS_CASE(3)
    EMBER_LINEAR_ROWS_CASE(4)
    EMBER_LINEAR_ROWS_CASE(5)
    EMBER_LINEAR_ROWS_CASE(6)
    EMBER_LINEAR_ROWS_CASE(7)
    EMBER_LINEAR_ROWS_CASE(8)
#undef EMBER_LINEAR_ROWS_CASE
    default: break;
  }
}

// ---------------------------------------------------------------- few tokens
// A panel of at most kFewTokens tokens would waste most lanes of the panel micro-kernel, and its
// kMr broadcasts per k bound it to about one weight per cycle. Here vectors run along the output
// features instead: a block of L rows x L columns of w (L = lanes) is transposed in registers, so
// vector j holds w[n0 + r, k0 + j] in lane r, and each token's accumulator takes
// MulAdd(column j, x[t, k0 + j]) for j in order: the same FMA chain over k per element as the panel
// micro-kernel, so the two give the same bits and either may compute any panel. x is read in
// place. AVX-512 and AVX2 only (raw intrinsics); other targets, rows past the last whole group of
// L and tails of K take the panel micro-kernel or the per-column fallback below.
constexpr int64_t kFewTokens = 4;

#if EMBER_HAS_FEW_TRANSPOSE

// Rows [n0, n0 + kGroups L) of w against tokens [0, kT) of x (rows ldx apart).
template <int kGroups, int kT>
HWY_NOINLINE void FewTokensRows(const float* HWY_RESTRICT w, int64_t k_count, const float* HWY_RESTRICT x,
                                int64_t ldx, const float* bias, float* HWY_RESTRICT c, int64_t ldc) {
  FewV acc[kGroups][kT];
  for (int g = 0; g < kGroups; ++g)
    for (int t = 0; t < kT; ++t) acc[g][t] = FewZero();
  int64_t k0 = 0;
  for (; k0 + kFewL <= k_count; k0 += kFewL) {
#pragma GCC unroll 2
    for (int g = 0; g < kGroups; ++g) {
      FewV rows[kFewL], col[kFewL];
      const float* src = w + g * kFewL * k_count + k0;
      // kFewL rows stream at once, more than the hardware prefetchers follow: each row's line
      // 1 KiB ahead is prefetched every 64 bytes (the loads at a line start). Measured (1 AVX-512
      // core, M = 1): 4096 x 4096 from DRAM 10.4 -> 12.2 GFLOP/s (2 threads 22.9 -> 27.9), in cache
      // (1024 x 1024) 23.2 -> 20.0: weights of a GEMV usually come from DRAM.
      if ((k0 * 4) % 64 == 0) {
#pragma GCC unroll 16
        for (int r = 0; r < kFewL; ++r) hwy::Prefetch(src + r * k_count + 256);
      }
#pragma GCC unroll 16
      for (int r = 0; r < kFewL; ++r, src += k_count) rows[r] = FewLoad(src);
      FewTranspose(rows, col);
#pragma GCC unroll 16
      for (int j = 0; j < kFewL; ++j) {
#pragma GCC unroll 4
        for (int t = 0; t < kT; ++t) acc[g][t] = FewFma(col[j], FewSet(x[t * ldx + k0 + j]), acc[g][t]);
      }
    }
  }
  for (; k0 < k_count; ++k0) {  // K tail: one column at a time
    for (int g = 0; g < kGroups; ++g) {
      HWY_ALIGN float column[kFewL];
      for (int r = 0; r < kFewL; ++r) column[r] = w[(g * kFewL + r) * k_count + k0];
      const FewV colv = FewLoad(column);
      for (int t = 0; t < kT; ++t) acc[g][t] = FewFma(colv, FewSet(x[t * ldx + k0]), acc[g][t]);
    }
  }
  for (int g = 0; g < kGroups; ++g) {
    for (int t = 0; t < kT; ++t) {
      FewV v = acc[g][t];
      if (bias != nullptr) v = FewAdd(v, FewLoad(bias + g * kFewL));
      FewStore(c + t * ldc + g * kFewL, v);
    }
  }
}

template <int kGroups>
HWY_INLINE void FewTokensDispatch(int64_t tokens, const float* w, int64_t k, const float* x, int64_t ldx,
                                  const float* bias, float* c, int64_t ldc) {
  switch (tokens) {
    case 1: FewTokensRows<kGroups, 1>(w, k, x, ldx, bias, c, ldc); break;
    case 2: FewTokensRows<kGroups, 2>(w, k, x, ldx, bias, c, ldc); break;
    case 3: FewTokensRows<kGroups, 3>(w, k, x, ldx, bias, c, ldc); break;
    default: FewTokensRows<kGroups, 4>(w, k, x, ldx, bias, c, ldc); break;
  }
}

// Rows [n_begin, n_end) for tokens (<= kFewTokens) rows of x; returns the first row not computed
// (the rows past the last whole group of L).
HWY_INLINE int64_t FewTokens(const float* w, int64_t k, const float* x, int64_t tokens, const float* bias,
                             float* c, int64_t ldc, int64_t n_begin, int64_t n_end) {
  int64_t n0 = n_begin;
  for (; n0 + kFewL <= n_end; n0 += kFewL) {
    FewTokensDispatch<1>(tokens, w + n0 * k, k, x, k, bias != nullptr ? bias + n0 : nullptr, c + n0, ldc);
  }
  return n0;
}
#else
HWY_INLINE int64_t FewTokens(const float*, int64_t, const float*, int64_t, const float*, float*, int64_t,
                             int64_t n_begin, int64_t) {
  return n_begin;
}
#endif

// Blocks [b_begin, b_end) of run.n_block w rows against every panel of the chunk.
void LinearCompute(const LinearRun& run, size_t b_begin, size_t b_end) {
  const LinearTag d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t nr = 2 * lanes;
  for (size_t b = b_begin; b < b_end; ++b) {
    const int64_t n_begin = static_cast<int64_t>(b) * run.n_block;
    const int64_t n_end = n_begin + run.n_block < run.n ? n_begin + run.n_block : run.n;
    // Panels of few tokens (all of M, or the chunk's last) by FewTokens where it applies.
    int64_t few_end = n_begin;  // rows [n_begin, few_end) of the few-token panel are done
    const int64_t last_tokens = run.rows - (run.panels - 1) * nr;
    const bool last_few = last_tokens <= kFewTokens;
    if (last_few) {
      const int64_t t0 = (run.panels - 1) * nr;
      few_end = FewTokens(run.w, run.k, run.x + (run.m0 + t0) * run.k, last_tokens, run.bias,
                          run.c + (run.m0 + t0) * run.n, run.n, n_begin, n_end);
    }
    // Panel by panel, reduction block by block, so a panel's block (kLinearKc x 2 vectors) stays
    // in L1 while the block of w rows passes over it; partial sums wait in `part`.
    HWY_ALIGN float part[8 * kLinearMr * cpu_detail::kLinearMaxNr];
    // w is read from memory once per call, by the block's first panel; the next block's rows are
    // prefetched a few lines per micro-kernel call meanwhile, so that burst does not stall on DRAM.
    const char* pf = nullptr;
    const char* pf_end = nullptr;
    int64_t pf_step = 0;
    if (b + 1 < b_end) {
      const int64_t next_end = n_end + run.n_block < run.n ? n_end + run.n_block : run.n;
      pf = reinterpret_cast<const char*>(run.w + n_end * run.k);
      pf_end = reinterpret_cast<const char*>(run.w + next_end * run.k);
      const int64_t calls = run.panels * ((run.k + cpu_detail::kLinearKc - 1) / cpu_detail::kLinearKc) *
                            ((n_end - n_begin + kLinearMr - 1) / kLinearMr);
      pf_step = ((pf_end - pf) / 64 + calls - 1) / calls;
    }
    for (int64_t p = 0; p < run.panels; ++p) {
      const int64_t t0 = p * nr;
      const int64_t tokens = run.rows - t0 < nr ? run.rows - t0 : nr;
      const int64_t n_first = last_few && p == run.panels - 1 ? few_end : n_begin;
      if (n_first >= n_end) continue;
      float* c = run.c + (run.m0 + t0) * run.n;
      for (int64_t k0 = 0; k0 < run.k; k0 += cpu_detail::kLinearKc) {
        const int64_t kc = run.k - k0 < cpu_detail::kLinearKc ? run.k - k0 : cpu_detail::kLinearKc;
        const bool first = k0 == 0, last = k0 + kc == run.k;
        const float* bp = run.packed + p * run.k * nr + k0 * nr;
        for (int64_t n0 = n_first; n0 < n_end; n0 += kLinearMr) {
          const int rows = static_cast<int>(n_end - n0 < kLinearMr ? n_end - n0 : kLinearMr);
          const float* w = run.w + n0 * run.k + k0;
          const float* bias = run.bias != nullptr ? run.bias + n0 : nullptr;
          float* pt = part + (n0 - n_first) * cpu_detail::kLinearMaxNr;
          for (int64_t i = 0; i < pf_step && pf < pf_end; ++i, pf += 64) hwy::Prefetch(pf);
          if (tokens > lanes) {
            LinearPackedRows<2>(rows, w, run.k, kc, bp, nr, pt, first, last, bias, c + n0, run.n, size_t(tokens));
          } else {
            LinearPackedRows<1>(rows, w, run.k, kc, bp, nr, pt, first, last, bias, c + n0, run.n, size_t(tokens));
          }
        }
      }
    }
  }
}

int64_t LinearRowsPerBlock() { return 8 * kLinearMr; }

// Block sizes are multiples of this: whole micro-kernel tiles and whole few-token groups.
int64_t LinearRowsGranule() {
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
  return kLinearMr % kFewL == 0 ? kLinearMr : (kFewL % kLinearMr == 0 ? kFewL : kLinearMr * kFewL / 2);
#else
  return kLinearMr;
#endif
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(LinearPanelWidth);
EMBER_HWY_EXPORT(LinearPack);
EMBER_HWY_EXPORT(LinearCompute);
EMBER_HWY_EXPORT(LinearRowsPerBlock);
EMBER_HWY_EXPORT(LinearRowsGranule);

namespace cpu_detail {
namespace {

constexpr double kMinParallelFlops = 1 << 18;

void pack_units(const void* run, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(LinearPack)(*static_cast<const LinearRun*>(run), begin, end);
}
void compute_units(const void* run, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(LinearCompute)(*static_cast<const LinearRun*>(run), begin, end);
}

int64_t packed_rows(int64_t m) { return linear_round_up(m < kLinearMc ? m : kLinearMc, kLinearMaxNr); }

}  // namespace

bool linear_packed(KernelContext& ctx, const float* x, const float* w, const float* bias, float* c,
                   int64_t m, int64_t n, int64_t k) {
  uint8_t* base = ctx.scratch.data();
  if (base == nullptr || m <= 0 || n <= 0 || k <= 0) return false;  // (linear handles the empty cases)
  const size_t pad = (kLinearAlign - reinterpret_cast<uintptr_t>(base) % kLinearAlign) % kLinearAlign;
  const size_t need = static_cast<size_t>(packed_rows(m) * k) * sizeof(float);
  if (ctx.scratch.size() < pad + need) return false;  // called without linear_scratch's bytes
  LinearRun run{};
  run.x = x;
  run.w = w;
  run.bias = bias;
  run.c = c;
  run.packed = reinterpret_cast<float*>(base + pad);
  run.n = n;
  run.k = k;
  const int64_t nr = static_cast<int64_t>(EMBER_HWY_DISPATCH(LinearPanelWidth)());
  // Blocks of 64 / 48 w rows, smaller (down to one granule) when that leaves fewer than 4 blocks per
  // thread (BERT's N = 768 on 16 threads: 48 blocks of 16 rows rather than 12 of 64).
  run.n_block = EMBER_HWY_DISPATCH(LinearRowsPerBlock)();
  const int64_t granule = EMBER_HWY_DISPATCH(LinearRowsGranule)();
  const int64_t threads = ctx.pool != nullptr ? static_cast<int64_t>(ctx.pool->thread_count()) : 1;
  const int64_t want = linear_round_up((n + 4 * threads - 1) / (4 * threads), granule);
  if (want < run.n_block) run.n_block = want > granule ? want : granule;
  const size_t blocks = static_cast<size_t>((n + run.n_block - 1) / run.n_block);
  for (int64_t m0 = 0; m0 < m; m0 += kLinearMc) {
    run.m0 = m0;
    run.rows = m - m0 < kLinearMc ? m - m0 : kLinearMc;
    run.panels = (run.rows + nr - 1) / nr;
    const double flops = 2.0 * double(run.rows) * double(n) * double(k);
    run_units(ctx.pool, static_cast<size_t>(run.panels), flops, kMinParallelFlops, &run, pack_units);
    run_units(ctx.pool, blocks, flops, kMinParallelFlops, &run, compute_units);
  }
  return true;
}

}  // namespace cpu_detail

namespace cpu {

size_t linear_scratch(const OpAttrs&, const TensorView* inputs, size_t, const TensorView*, size_t, size_t) {
  const TensorView& x = inputs[0];
  const int64_t k = x.rank == 0 ? 0 : x.dim(-1);
  if (k == 0) return 0;
  const int64_t m = static_cast<int64_t>(x.numel() / static_cast<uint64_t>(k));
  if (m == 0) return 0;
  return static_cast<size_t>(cpu_detail::packed_rows(m) * k) * sizeof(float) + cpu_detail::kLinearAlign;
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
