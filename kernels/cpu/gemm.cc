// f32 GEMMs: matmul (A [M, K] x B [K, N], batched with broadcasting) and linear (x [M, K] times
// w [N, K] transposed, plus an optional bias). matmul given matmul_scratch's bytes copies B's column
// panels into per-task slots (the same bits as reading B in place); linear given linear_scratch's
// bytes runs linear_packed.cc's packed GEMM instead, the tiles here serving direct calls without.
//
// matmul: register-blocked outer products. A micro-tile of kMr rows x 2 vectors of columns keeps
// 2*kMr accumulators; each k broadcasts A[i, k] and loads two vectors of row k of B.
// linear: w rows are K-contiguous, so a micro-tile of 4 x rows by 4 w rows keeps 16 vector dot
// products along K (8 loads per 16 FMAs), reduced across lanes at the end.
//
// Batch invariance: every output element is computed by one fixed sequence (matmul: an FMA chain
// over k = 0..K-1; linear: lane-wise FMA chains over K in vector steps, a zero-filled last step, one
// lane reduction, then + bias), whichever micro-kernel (full or edge) or task computes it. Work is
// split over rows and columns of the output, never over K.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemm.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/hwy_util-inl.h"
#include "kernels/cpu/linear_tile-inl.h"

#ifndef EMBER_KERNELS_CPU_GEMM_PLAN_
#define EMBER_KERNELS_CPU_GEMM_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

// One GEMM problem over `batch` independent matrices; operand offsets per batch index come from
// broadcast strides over up to kMaxRank - 2 batch dims.
struct GemmPlan {
  const float* a;  // matmul: A; linear: x
  const float* b;  // matmul: B [K, N] (ldb); linear: w [N, K]
  const float* bias;  // linear only, may be null
  float* c;
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
  int batch_rank;
  int64_t batch_dims[kMaxRank];
  int64_t a_batch_strides[kMaxRank];
  int64_t b_batch_strides[kMaxRank];
  int64_t c_batch_strides[kMaxRank];
  int64_t m_tiles, n_tiles;  // task tiles per matrix
  int64_t tile_m, tile_n;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------- matmul: C = A B

constexpr int kMr = 6;

// Rows [0, kRows) x columns [0, ncols) of C, ncols <= 2 * Lanes. kFull: ncols == 2 * Lanes.
template <int kRows, bool kFull>
HWY_INLINE void MatmulMicro(const float* HWY_RESTRICT a, int64_t lda, const float* HWY_RESTRICT b,
                            int64_t ldb, float* HWY_RESTRICT c, int64_t ldc, int64_t k_count,
                            size_t ncols) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  V acc0[kRows], acc1[kRows];
  for (int r = 0; r < kRows; ++r) acc0[r] = acc1[r] = hn::Zero(d);
  const size_t n0 = ncols < lanes ? ncols : lanes;  // columns in the first vector
  const size_t n1 = ncols - n0;                     // columns in the second vector
  for (int64_t k = 0; k < k_count; ++k) {
    const float* brow = b + k * ldb;
    V b0, b1;
    if constexpr (kFull) {
      b0 = hn::LoadU(d, brow);
      b1 = hn::LoadU(d, brow + lanes);
    } else {
      b0 = n0 == lanes ? hn::LoadU(d, brow) : LoadTail(d, brow, n0);
      b1 = n1 == lanes ? hn::LoadU(d, brow + lanes)
                       : (n1 == 0 ? hn::Zero(d) : LoadTail(d, brow + lanes, n1));
    }
    for (int r = 0; r < kRows; ++r) {
      const V av = hn::Set(d, a[r * lda + k]);
      acc0[r] = hn::MulAdd(av, b0, acc0[r]);
      acc1[r] = hn::MulAdd(av, b1, acc1[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    float* crow = c + r * ldc;
    if constexpr (kFull) {
      hn::StoreU(acc0[r], d, crow);
      hn::StoreU(acc1[r], d, crow + lanes);
    } else {
      if (n0 == lanes) hn::StoreU(acc0[r], d, crow); else StoreTail(d, acc0[r], crow, n0);
      if (n1 == lanes) hn::StoreU(acc1[r], d, crow + lanes);
      else if (n1 != 0) StoreTail(d, acc1[r], crow + lanes, n1);
    }
  }
}

template <int kRows>
HWY_INLINE void MatmulRows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                           int64_t ldc, int64_t k_count, int64_t n_begin, int64_t n_end) {
  const hn::ScalableTag<float> d;
  const int64_t nr = static_cast<int64_t>(2 * hn::Lanes(d));
  int64_t j = n_begin;
  for (; j + nr <= n_end; j += nr) {
    MatmulMicro<kRows, true>(a, lda, b + j, ldb, c + j, ldc, k_count, static_cast<size_t>(nr));
  }
  if (j < n_end) {
    MatmulMicro<kRows, false>(a, lda, b + j, ldb, c + j, ldc, k_count,
                              static_cast<size_t>(n_end - j));
  }
}

// C[m_begin..m_end, n_begin..n_end) of one matrix. Column micro-panels outermost so a K x 2V
// panel of B stays in cache while the rows of the tile pass over it. With `slot` (K x 2V floats of
// scratch) the panel is first copied there, contiguous: B's rows ldb apart put a K-row panel in a
// few cache sets when ldb is a multiple of 1 KiB (64 x 1024 x 1024: 120 GFLOP/s in place).
void MatmulTile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                int64_t k_count, int64_t m_begin, int64_t m_end, int64_t n_begin, int64_t n_end,
                float* slot) {
  const hn::ScalableTag<float> d;
  const int64_t nr = static_cast<int64_t>(2 * hn::Lanes(d));
  for (int64_t j = n_begin; j < n_end; j += nr) {
    const int64_t je = j + nr < n_end ? j + nr : n_end;
    const float* bp = b;
    int64_t ldp = ldb, j0 = j, j1 = je;
    if (slot != nullptr && nr <= 32) {  // slots hold 32 columns (wider SVE vectors: in place)
      for (int64_t k = 0; k < k_count; ++k) {
        std::memcpy(slot + k * nr, b + k * ldb + j, static_cast<size_t>(je - j) * sizeof(float));
      }
      bp = slot;
      ldp = nr;
      j0 = 0;
      j1 = je - j;
    }
    float* cj = c + (j - j0);
    int64_t i = m_begin;
    for (; i + kMr <= m_end; i += kMr) {
      MatmulRows<kMr>(a + i * lda, lda, bp, ldp, cj + i * ldc, ldc, k_count, j0, j1);
    }
    const float* ai = a + i * lda;
    float* ci = cj + i * ldc;
    switch (m_end - i) {
      case 1: MatmulRows<1>(ai, lda, bp, ldp, ci, ldc, k_count, j0, j1); break;
      case 2: MatmulRows<2>(ai, lda, bp, ldp, ci, ldc, k_count, j0, j1); break;
      case 3: MatmulRows<3>(ai, lda, bp, ldp, ci, ldc, k_count, j0, j1); break;
      case 4: MatmulRows<4>(ai, lda, bp, ldp, ci, ldc, k_count, j0, j1); break;
      case 5: MatmulRows<5>(ai, lda, bp, ldp, ci, ldc, k_count, j0, j1); break;
      default: break;
    }
  }
}

// ---------------------------------------------------------------- linear: C = x w^T + bias
// LinearMicro / LinearTile: linear_tile-inl.h (shared with quantized_linear.cc).


// ---------------------------------------------------------------- units

template <bool kLinear>
void GemmUnits(const cpu_detail::GemmPlan& p, size_t begin, size_t end, float* slot = nullptr) {
  const size_t per_matrix = static_cast<size_t>(p.m_tiles * p.n_tiles);
  for (size_t u = begin; u < end; ++u) {
    size_t bi = u / per_matrix;
    const size_t t = u % per_matrix;
    // n tiles vary fastest, so consecutive units of one task share the rows of x / A.
    const int64_t mt = static_cast<int64_t>(t) / p.n_tiles, nt = static_cast<int64_t>(t) % p.n_tiles;
    int64_t a_off = 0, b_off = 0, c_off = 0;
    for (int i = p.batch_rank - 1; i >= 0; --i) {
      const int64_t idx = static_cast<int64_t>(bi % static_cast<size_t>(p.batch_dims[i]));
      bi /= static_cast<size_t>(p.batch_dims[i]);
      a_off += idx * p.a_batch_strides[i];
      b_off += idx * p.b_batch_strides[i];
      c_off += idx * p.c_batch_strides[i];
    }
    const int64_t m0 = mt * p.tile_m, m1 = m0 + p.tile_m < p.m ? m0 + p.tile_m : p.m;
    const int64_t n0 = nt * p.tile_n, n1 = n0 + p.tile_n < p.n ? n0 + p.tile_n : p.n;
    if constexpr (kLinear) {
      LinearTile(p.a + a_off, p.lda, p.b + b_off, p.ldb, p.bias, p.c + c_off, p.ldc, p.k, m0, m1,
                 n0, n1);
    } else {
      MatmulTile(p.a + a_off, p.lda, p.b + b_off, p.ldb, p.c + c_off, p.ldc, p.k, m0, m1, n0, n1, slot);
    }
  }
}

void matmul_f32_impl(const cpu_detail::GemmPlan& p, size_t begin, size_t end, float* slot) {
  GemmUnits<false>(p, begin, end, slot);
}
void linear_f32_impl(const cpu_detail::GemmPlan& p, size_t begin, size_t end) {
  GemmUnits<true>(p, begin, end);
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(matmul_f32_impl);
EMBER_HWY_EXPORT(linear_f32_impl);

namespace cpu_detail {
namespace {

constexpr double kMinParallelFlops = 1 << 18;

}  // namespace

// linear_packed.cc: the packed path, given linear_scratch's bytes in ctx.scratch (false: too few).
bool linear_packed(KernelContext& ctx, const float* x, const float* w, const float* bias, float* c,
                   int64_t m, int64_t n, int64_t k);

namespace {

void matmul_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(matmul_f32_impl)(*static_cast<const GemmPlan*>(plan), begin, end, nullptr);
}

// matmul with scratch: task t takes a contiguous range of units and slot t (one B panel).
struct MatmulRun {
  const GemmPlan* p;
  float* base;
  size_t slot_floats;
  size_t units, tasks;
};

void matmul_task(void* arg, size_t t) {
  const MatmulRun& run = *static_cast<const MatmulRun*>(arg);
  const size_t begin = run.units * t / run.tasks, end = run.units * (t + 1) / run.tasks;
  if (begin < end) EMBER_HWY_DISPATCH(matmul_f32_impl)(*run.p, begin, end, run.base + t * run.slot_floats);
}

constexpr size_t kMatmulAlign = 64;
size_t matmul_slot_floats(int64_t k) { return static_cast<size_t>((k * 32 + 15) / 16 * 16); }
void linear_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(linear_f32_impl)(*static_cast<const GemmPlan*>(plan), begin, end);
}

void zero_fill(float* c, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) c[i] = 0.0f;
}

// Tiles sized for cache reuse; they do not change any result, only which task computes what.
void set_tiles(GemmPlan& p, int64_t tile_m, int64_t tile_n) {
  p.tile_m = tile_m;
  p.tile_n = tile_n;
  p.m_tiles = (p.m + tile_m - 1) / tile_m;
  p.n_tiles = (p.n + tile_n - 1) / tile_n;
}

void run_gemm(KernelContext& ctx, GemmPlan& p, size_t batch, UnitFn fn) {
  const double flops = 2.0 * double(batch) * double(p.m) * double(p.n) * double(p.k);
  run_units(ctx.pool, batch * static_cast<size_t>(p.m_tiles * p.n_tiles), flops,
            kMinParallelFlops, &p, fn);
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

void matmul(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t,
            TensorView* outputs, size_t) {
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  TensorView& out = outputs[0];
  cpu_detail::GemmPlan p{};
  const bool a_vec = a.rank == 1, b_vec = b.rank == 1;
  p.m = a_vec ? 1 : a.dim(-2);
  p.k = a.dim(-1);
  p.n = b_vec ? 1 : b.dim(-1);
  p.lda = p.k;
  p.ldb = p.n;
  p.ldc = p.n;
  p.a = a.data_as<const float>();
  p.b = b.data_as<const float>();
  p.c = out.data_as<float>();
  const int a_batch_rank = a_vec ? 0 : a.rank - 2;
  const int b_batch_rank = b_vec ? 0 : b.rank - 2;
  const int out_batch_rank = a_batch_rank > b_batch_rank ? a_batch_rank : b_batch_rank;
  // Batch dims, right-aligned; strides 0 where an operand broadcasts.
  int64_t sa = p.m * p.k, sb = p.k * p.n, sc = p.m * p.n;
  size_t batch = 1;
  p.batch_rank = out_batch_rank;
  for (int i = out_batch_rank - 1; i >= 0; --i) {
    const int ia = i - (out_batch_rank - a_batch_rank), ib = i - (out_batch_rank - b_batch_rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    const int64_t dc = da > db ? da : (db > da ? db : da);
    p.batch_dims[i] = dc;
    p.a_batch_strides[i] = da == 1 ? 0 : sa;
    p.b_batch_strides[i] = db == 1 ? 0 : sb;
    p.c_batch_strides[i] = sc;
    sa *= da;
    sb *= db;
    sc *= dc;
    batch *= static_cast<size_t>(dc);
  }
  if (batch == 0 || p.m == 0 || p.n == 0) return;
  if (p.k == 0) return cpu_detail::zero_fill(p.c, out.numel());
  cpu_detail::set_tiles(p, 48, 256);
  const size_t units = batch * static_cast<size_t>(p.m_tiles * p.n_tiles);
  const size_t slot = cpu_detail::matmul_slot_floats(p.k);
  uint8_t* base = ctx.scratch.data();
  const size_t pad = base == nullptr ? 0 : (cpu_detail::kMatmulAlign - reinterpret_cast<uintptr_t>(base) %
                                            cpu_detail::kMatmulAlign) % cpu_detail::kMatmulAlign;
  const size_t slots = base == nullptr || ctx.scratch.size() < pad ? 0 : (ctx.scratch.size() - pad) / (slot * 4);
  if (slots == 0) return cpu_detail::run_gemm(ctx, p, batch, cpu_detail::matmul_units);  // no scratch: in place
  size_t tasks = ctx.pool != nullptr ? ctx.pool->thread_count() : 1;
  const double flops = 2.0 * double(batch) * double(p.m) * double(p.n) * double(p.k);
  if (flops < cpu_detail::kMinParallelFlops) tasks = 1;
  if (tasks > slots) tasks = slots;
  if (tasks > units) tasks = units;
  cpu_detail::MatmulRun run{&p, reinterpret_cast<float*>(base + pad), slot, units, tasks};
  parallel_for(ctx.pool, tasks, cpu_detail::matmul_task, &run);
}

size_t matmul_scratch(const OpAttrs&, const TensorView* inputs, size_t, const TensorView*, size_t, size_t threads) {
  const int64_t k = inputs[0].rank == 0 ? 0 : inputs[0].dim(-1);
  if (k <= 0) return 0;
  return (threads < 1 ? 1 : threads) * cpu_detail::matmul_slot_floats(k) * sizeof(float) + cpu_detail::kMatmulAlign;
}

void linear(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t input_count,
            TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  TensorView& out = outputs[0];
  cpu_detail::GemmPlan p{};
  p.k = x.dim(-1);
  p.n = w.dims[0];
  p.m = p.k == 0 ? static_cast<int64_t>(out.numel() / (p.n == 0 ? 1 : p.n))
                 : static_cast<int64_t>(x.numel() / static_cast<uint64_t>(p.k));
  p.lda = p.k;
  p.ldb = p.k;
  p.ldc = p.n;
  p.a = x.data_as<const float>();
  p.b = w.data_as<const float>();
  p.bias = input_count > 2 && inputs[2].is_present() ? inputs[2].data_as<const float>() : nullptr;
  p.c = out.data_as<float>();
  p.batch_rank = 0;
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0) {  // x w^T is all zeros: out = bias or 0
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) p.c[i * p.n + j] = p.bias != nullptr ? p.bias[j] : 0.0f;
    return;
  }
  if (cpu_detail::linear_packed(ctx, p.a, p.b, p.bias, p.c, p.m, p.n, p.k)) return;
  cpu_detail::set_tiles(p, 64, 64);
  cpu_detail::run_gemm(ctx, p, 1, cpu_detail::linear_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
