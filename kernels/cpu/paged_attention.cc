// Paged attention (paged_attention.h has the contract and the operation sequence).
//
// Layout of the work: one unit = (token t, kv head), run by AttendUnits. The unit finds its
// sequence by a binary search over query_start (no per-call table, so no scratch), then for each
// group of up to kGroup query heads of that kv head walks positions 0..p in tiles of kTile:
//   1. the tile's K and V rows are located through the block table and, unless the cache is f32
//      with D a multiple of the vector length (then the rows are read in place), decoded into
//      zero-padded f32 stack buffers: once per group, shared by its query heads;
//   2. per head: kTile scores (4 rows at a time for FMA latency; every score is the same lane-wise
//      FMA chain and lane sum whichever way it is grouped), the running max / sum update and the
//      weights w = Exp(s - m') as vectors (lanes past the tile's end hold -inf, whose Exp is 0);
//   3. per head: acc = acc · c + Σ_j w_j V_j, 4 vectors of d at a time, j in increasing order.
// Nothing here depends on T, on other sequences or on the unit's task, hence batch and thread
// invariance. Everything lives on the stack (about 48 KB for kMaxHeadDim = 256).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/paged_attention.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/contrib/math/math-inl.h"
#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_PAGED_ATTENTION_PLAN_
#define EMBER_KERNELS_CPU_PAGED_ATTENTION_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/parallel.h"
#include "runtime/core/float_codecs.h"
#include "runtime/kernel/paged_attention_args.h"

namespace ember::kernels::cpu_detail {

constexpr int64_t kPagedTile = 16;      // positions per online-softmax step
constexpr int64_t kPagedGroup = 8;      // query heads sharing one pass over K/V
constexpr int64_t kPagedMaxLanes = 64;  // f32 lanes of the widest vector any target may have

struct PagedPlan {
  const float* q;
  float* out;
  const void* k_cache;
  const void* v_cache;
  ScalarType dtype;
  float cache_scale;
  float scale;
  float softcap;   // > 0: scores soft-capped
  int64_t window;  // > 0: sliding window
  const int32_t* tables;
  const int32_t* lens;
  const int32_t* starts;
  int64_t seq_count, owned, q_heads, kv_heads, dim, block_size, max_blocks;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::PagedPlan;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr int64_t kTile = cpu_detail::kPagedTile;
constexpr int64_t kGroup = cpu_detail::kPagedGroup;
constexpr int64_t kMaxDim = cpu::kPagedAttentionMaxHeadDim;
static_assert(HWY_MAX_BYTES / 4 <= cpu_detail::kPagedMaxLanes, "vector wider than kPagedMaxLanes");
static_assert(kMaxDim % cpu_detail::kPagedMaxLanes == 0, "padded rows must fit kMaxDim");

// Row of D cache elements starting at element `elem`, as f32 padded with zeros to dp elements:
// the cache itself (f32, D == dp) or `buf`.
HWY_INLINE const float* LoadRow(const PagedPlan& p, const void* cache, int64_t elem, int64_t dp,
                                float* HWY_RESTRICT buf) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t lanes = int64_t(hn::Lanes(df)), dim = p.dim;
  int64_t d = 0;
  switch (p.dtype) {
    case ScalarType::F32: {
      const float* src = static_cast<const float*>(cache) + elem;
      if (dim == dp) return src;
      std::memcpy(buf, src, size_t(dim) * sizeof(float));
      d = dim;
      break;
    }
    case ScalarType::BF16: {  // bf16 is the top half of an f32
      const uint16_t* src = static_cast<const uint16_t*>(cache) + elem;
      for (; d + lanes <= dim; d += lanes) {
        const auto u = hn::PromoteTo(du, hn::LoadU(d16, src + d));
        hn::Store(hn::BitCast(df, hn::ShiftLeft<16>(u)), df, buf + d);
      }
      for (; d < dim; ++d) buf[d] = bf16_to_f32(src[d]);
      break;
    }
    case ScalarType::F16: {
      // (h & 0x7FFF) << 13 is the f16 magnitude as an f32 with exponent bias 15 instead of 127:
      // times 2^112 it is exact for normals and subnormals alike (default FP environment, no
      // DAZ). Inf / NaN (exponent 0x1F) get the f32 exponent 0xFF and keep their mantissa.
      const uint16_t* src = static_cast<const uint16_t*>(cache) + elem;
      const auto sign_mask = hn::Set(du, 0x8000u), mag_mask = hn::Set(du, 0x7FFFu);
      const auto exp_all = hn::Set(du, 0x7F800000u);
      const auto max_finite = hn::Set(di, 0x7BFF);
      const VF rebias = hn::Set(df, 0x1p112f);
      for (; d + lanes <= dim; d += lanes) {
        const auto h = hn::PromoteTo(du, hn::LoadU(d16, src + d));
        const auto mag = hn::And(h, mag_mask);
        const auto bits = hn::ShiftLeft<13>(mag);
        const VF finite = hn::Mul(hn::BitCast(df, bits), rebias);
        const VF special = hn::BitCast(df, hn::Or(bits, exp_all));
        const auto is_special = hn::RebindMask(df, hn::Gt(hn::BitCast(di, mag), max_finite));
        const auto value = hn::BitCast(du, hn::IfThenElse(is_special, special, finite));
        hn::Store(hn::BitCast(df, hn::Or(value, hn::ShiftLeft<16>(hn::And(h, sign_mask)))), df,
                  buf + d);
      }
      for (; d < dim; ++d) buf[d] = f16_to_f32(src[d]);
      break;
    }
    default: {  // F8E4M3FN, scalar (the stretch format): e4m3 value times the tensor scale in f32
      const uint8_t* src = static_cast<const uint8_t*>(cache) + elem;
      for (; d < dim; ++d) buf[d] = e4m3fn_to_f32(src[d]) * p.cache_scale;
      break;
    }
  }
  for (; d < dp; ++d) buf[d] = 0.0f;
  return buf;
}

// out[i] = q · rows[i] for 4 rows: four independent FMA chains, then a lane sum each.
HWY_INLINE void Dot4(const float* HWY_RESTRICT q, const float* const* rows, int64_t dp,
                     float* HWY_RESTRICT out) {
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(df));
  VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  for (int64_t d = 0; d < dp; d += lanes) {
    const VF qv = hn::Load(df, q + d);
    a0 = hn::MulAdd(qv, hn::LoadU(df, rows[0] + d), a0);
    a1 = hn::MulAdd(qv, hn::LoadU(df, rows[1] + d), a1);
    a2 = hn::MulAdd(qv, hn::LoadU(df, rows[2] + d), a2);
    a3 = hn::MulAdd(qv, hn::LoadU(df, rows[3] + d), a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(df, a0));
  out[1] = hn::GetLane(hn::SumOfLanes(df, a1));
  out[2] = hn::GetLane(hn::SumOfLanes(df, a2));
  out[3] = hn::GetLane(hn::SumOfLanes(df, a3));
}

// The same chain as one lane of Dot4.
HWY_INLINE float Dot1(const float* HWY_RESTRICT q, const float* row, int64_t dp) {
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(df));
  VF a = hn::Zero(df);
  for (int64_t d = 0; d < dp; d += lanes) a = hn::MulAdd(hn::Load(df, q + d), hn::LoadU(df, row + d), a);
  return hn::GetLane(hn::SumOfLanes(df, a));
}

// acc = acc · c + Σ_{j < n} w[j] · rows[j], per element in increasing j (blocking over d does not
// change any element's sequence).
HWY_INLINE void AccumulateV(float* HWY_RESTRICT acc, float c, const float* HWY_RESTRICT w,
                            const float* const* rows, int64_t n, int64_t dp) {
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(df));
  const VF cv = hn::Set(df, c);
  int64_t d = 0;
  for (; d + 4 * lanes <= dp; d += 4 * lanes) {
    VF a0 = hn::Mul(hn::Load(df, acc + d), cv);
    VF a1 = hn::Mul(hn::Load(df, acc + d + lanes), cv);
    VF a2 = hn::Mul(hn::Load(df, acc + d + 2 * lanes), cv);
    VF a3 = hn::Mul(hn::Load(df, acc + d + 3 * lanes), cv);
    for (int64_t j = 0; j < n; ++j) {
      const VF wv = hn::Set(df, w[j]);
      const float* r = rows[j] + d;
      a0 = hn::MulAdd(wv, hn::LoadU(df, r), a0);
      a1 = hn::MulAdd(wv, hn::LoadU(df, r + lanes), a1);
      a2 = hn::MulAdd(wv, hn::LoadU(df, r + 2 * lanes), a2);
      a3 = hn::MulAdd(wv, hn::LoadU(df, r + 3 * lanes), a3);
    }
    hn::Store(a0, df, acc + d);
    hn::Store(a1, df, acc + d + lanes);
    hn::Store(a2, df, acc + d + 2 * lanes);
    hn::Store(a3, df, acc + d + 3 * lanes);
  }
  for (; d < dp; d += lanes) {
    VF a = hn::Mul(hn::Load(df, acc + d), cv);
    for (int64_t j = 0; j < n; ++j) a = hn::MulAdd(hn::Set(df, w[j]), hn::LoadU(df, rows[j] + d), a);
    hn::Store(a, df, acc + d);
  }
}

// Query heads [h0, h0 + nh) of token t (sequence s, position pos) over kv head kvh.
void AttendGroup(const PagedPlan& p, int64_t t, int64_t s, int64_t pos, int64_t kvh, int64_t h0,
                 int64_t nh) {
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(df)), dim = p.dim;
  const int64_t dp = (dim + lanes - 1) / lanes * lanes;
  HWY_ALIGN float qs[kGroup][kMaxDim];
  HWY_ALIGN float acc[kGroup][kMaxDim];
  HWY_ALIGN float kbuf[kTile][kMaxDim];
  HWY_ALIGN float vbuf[kTile][kMaxDim];
  HWY_ALIGN float w[kTile + cpu_detail::kPagedMaxLanes];
  float m[kGroup], l[kGroup];
  for (int64_t i = 0; i < nh; ++i) {
    const float* qh = p.q + (t * p.q_heads + h0 + i) * dim;
    for (int64_t d = 0; d < dim; ++d) qs[i][d] = qh[d] * p.scale;
    for (int64_t d = dim; d < dp; ++d) qs[i][d] = 0.0f;
    for (int64_t d = 0; d < dp; ++d) acc[i][d] = 0.0f;
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  const int32_t* table = p.tables + s * p.max_blocks;
  const float* krow[kTile];
  const float* vrow[kTile];
  const int64_t first = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
  for (int64_t j0 = first; j0 <= pos; j0 += kTile) {
    const int64_t n = pos + 1 - j0 < kTile ? pos + 1 - j0 : kTile;
    for (int64_t jj = 0; jj < n; ++jj) {
      const int64_t j = j0 + jj;
      const int64_t slot = int64_t(table[j / p.block_size]) * p.block_size + j % p.block_size;
      const int64_t elem = (slot * p.kv_heads + kvh) * dim;
      krow[jj] = LoadRow(p, p.k_cache, elem, dp, kbuf[jj]);
      vrow[jj] = LoadRow(p, p.v_cache, elem, dp, vbuf[jj]);
    }
    const int64_t npad = (n + lanes - 1) / lanes * lanes;
    for (int64_t i = 0; i < nh; ++i) {
      int64_t jj = 0;
      for (; jj + 4 <= n; jj += 4) Dot4(qs[i], krow + jj, dp, w + jj);
      for (; jj < n; ++jj) w[jj] = Dot1(qs[i], krow[jj], dp);
      if (p.softcap > 0.0f) {
        const VF cap = hn::Set(df, p.softcap), inv = hn::Set(df, 1.0f / p.softcap);
        for (jj = 0; jj < n; jj += lanes) {
          hn::Store(hn::Mul(cap, hn::Tanh(df, hn::Mul(hn::Load(df, w + jj), inv))), df, w + jj);
        }
      }
      for (jj = n; jj < npad; ++jj) w[jj] = -INFINITY;
      float mt = m[i];
      for (jj = 0; jj < n; ++jj) mt = w[jj] > mt ? w[jj] : mt;
      const float c = std::exp(m[i] - mt);  // exp(-inf) = 0 on the first tile
      m[i] = mt;
      const VF mv = hn::Set(df, mt);
      VF sum = hn::Zero(df);
      for (jj = 0; jj < npad; jj += lanes) {
        // A NaN score (or inf - inf under an infinite max) keeps its NaN weight, which makes l and
        // acc, hence the output, NaN as in the reference (hwy's Exp gives 0 for NaN: the position
        // was dropped). ExpArg keeps Exp defined on SCALAR (the -inf padding gives 0).
        const VF x = hn::Sub(hn::Load(df, w + jj), mv);
        const VF e = hn::IfThenElse(hn::IsNaN(x), x, hn::Exp(df, ExpArg(df, x)));
        hn::Store(e, df, w + jj);
        sum = hn::Add(sum, e);
      }
      l[i] = l[i] * c + hn::GetLane(hn::SumOfLanes(df, sum));
      AccumulateV(acc[i], c, w, vrow, n, dp);
    }
  }
  for (int64_t i = 0; i < nh; ++i) {
    float* o = p.out + (t * p.q_heads + h0 + i) * dim;
    const VF inv = hn::Set(df, l[i]);
    int64_t d = 0;
    for (; d + lanes <= dim; d += lanes) hn::StoreU(hn::Div(hn::Load(df, acc[i] + d), inv), df, o + d);
    if (d < dim) StoreTail(df, hn::Div(hn::Load(df, acc[i] + d), inv), o + d, size_t(dim - d));
  }
}

void AttendUnits(const PagedPlan& p, size_t begin, size_t end) {
  const int64_t group = p.q_heads / p.kv_heads;
  for (size_t u = begin; u < end; ++u) {
    const int64_t t = int64_t(u) / p.kv_heads, kvh = int64_t(u) % p.kv_heads;
    if (t >= p.owned) {  // padding token: zeros
      std::memset(p.out + (t * p.q_heads + kvh * group) * p.dim, 0,
                  size_t(group * p.dim) * sizeof(float));
      continue;
    }
    // The owning sequence: the last s with starts[s] <= t (empty sequences share its start).
    int64_t lo = 0, hi = p.seq_count - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (p.starts[mid] <= t) lo = mid;
      else hi = mid - 1;
    }
    const int64_t s = lo;
    const int64_t q_len = p.starts[s + 1] - p.starts[s];
    const int64_t pos = p.lens[s] - q_len + (t - p.starts[s]);
    for (int64_t h0 = kvh * group; h0 < (kvh + 1) * group; h0 += kGroup) {
      const int64_t nh = (kvh + 1) * group - h0 < kGroup ? (kvh + 1) * group - h0 : kGroup;
      AttendGroup(p, t, s, pos, kvh, h0, nh);
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(AttendUnits);

namespace cpu_detail {
namespace {

constexpr double kMinParallelWork = 1 << 15;  // multiply-adds

void attend_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(AttendUnits)(*static_cast<const PagedPlan*>(plan), begin, end);
}

long long ll(int64_t v) { return static_cast<long long>(v); }

}  // namespace
}  // namespace cpu_detail

namespace cpu {

Status paged_attention(const KernelContext& context, const float* q, const float* k,
                       const float* v, int64_t token_count, int64_t seq_count, int64_t q_heads,
                       int64_t kv_heads, int64_t head_dim, ScalarType cache_dtype, void* k_cache,
                       void* v_cache, int64_t block_count, int64_t block_size, float cache_scale,
                       const int32_t* slot_mapping, const int32_t* block_tables,
                       int64_t max_blocks, const int32_t* context_lens,
                       const int32_t* query_start, float scale, float* out, ErrorContext* error,
                       AttentionOptions options) {
  using namespace cpu_detail;
  if (options.window < 0 || !(options.softcap >= 0.0f) || !std::isfinite(options.softcap)) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "paged_attention: window %lld must be >= 0 and softcap %g finite and >= 0",
                      ll(options.window), static_cast<double>(options.softcap));
  }
  EMBER_RETURN_IF_ERROR(check_paged_attention_args(q, k, v, token_count, seq_count, q_heads, kv_heads,
                                                   head_dim, cache_dtype, k_cache, v_cache, block_count,
                                                   block_size, cache_scale, slot_mapping, block_tables,
                                                   max_blocks, context_lens, query_start, out, error));
  if (head_dim > kPagedAttentionMaxHeadDim) {
    return EMBER_FAIL(error, Error::NotSupported,
                      "paged_attention: head_dim %lld exceeds the cpu kernel's limit of %lld",
                      ll(head_dim), ll(kPagedAttentionMaxHeadDim));
  }
  // 1. This step's K/V, on the calling thread in token order (as the reference: deterministic
  // even if two tokens share a slot, and small next to the attention).
  const int64_t row = kv_heads * head_dim;
  for (int64_t t = 0; t < token_count; ++t) {
    if (slot_mapping[t] < 0) continue;
    const int64_t at = int64_t(slot_mapping[t]) * row;
    const float* ks = k + t * row;
    const float* vs = v + t * row;
    switch (cache_dtype) {
      case ScalarType::F32:
        std::memcpy(static_cast<float*>(k_cache) + at, ks, size_t(row) * sizeof(float));
        std::memcpy(static_cast<float*>(v_cache) + at, vs, size_t(row) * sizeof(float));
        break;
      case ScalarType::BF16:
        for (int64_t i = 0; i < row; ++i) {
          static_cast<uint16_t*>(k_cache)[at + i] = f32_to_bf16(ks[i]);
          static_cast<uint16_t*>(v_cache)[at + i] = f32_to_bf16(vs[i]);
        }
        break;
      case ScalarType::F16:
        for (int64_t i = 0; i < row; ++i) {
          static_cast<uint16_t*>(k_cache)[at + i] = f32_to_f16(ks[i]);
          static_cast<uint16_t*>(v_cache)[at + i] = f32_to_f16(vs[i]);
        }
        break;
      default:
        for (int64_t i = 0; i < row; ++i) {
          static_cast<uint8_t*>(k_cache)[at + i] = f32_to_e4m3fn(ks[i] / cache_scale);
          static_cast<uint8_t*>(v_cache)[at + i] = f32_to_e4m3fn(vs[i] / cache_scale);
        }
        break;
    }
  }
  // 2. Attention over units (token, kv head).
  PagedPlan plan{};
  plan.q = q;
  plan.out = out;
  plan.k_cache = k_cache;
  plan.v_cache = v_cache;
  plan.dtype = cache_dtype;
  plan.cache_scale = cache_scale;
  plan.scale = scale;
  plan.softcap = options.softcap;
  plan.window = options.window;
  plan.tables = block_tables;
  plan.lens = context_lens;
  plan.starts = query_start;
  plan.seq_count = seq_count;
  plan.owned = seq_count > 0 ? query_start[seq_count] : 0;
  plan.q_heads = q_heads;
  plan.kv_heads = kv_heads;
  plan.dim = head_dim;
  plan.block_size = block_size;
  plan.max_blocks = max_blocks;
  double work = 0.0;  // q·K and w·V multiply-adds
  for (int64_t s = 0; s < seq_count; ++s) {
    work += double(query_start[s + 1] - query_start[s]) * double(context_lens[s]);
  }
  work *= 2.0 * double(q_heads) * double(head_dim);
  run_units(context.pool, size_t(token_count * kv_heads), work, kMinParallelWork, &plan,
            attend_units);
  return Status::ok();
}

void paged_attention_op(KernelContext& ctx, const OpAttrs& attrs, const TensorView* in, size_t,
                        TensorView* outputs, size_t) {
  const TensorView& kc = in[3];
  float* out = outputs[0].data_as<float>();
  const Status status = paged_attention(
      ctx, in[0].data_as<const float>(), in[1].data_as<const float>(), in[2].data_as<const float>(),
      in[0].dims[0], in[6].dims[0], in[0].dims[1], in[1].dims[1], in[0].dims[2], kc.dtype, kc.data, in[4].data,
      kc.dims[0], kc.dims[1], attrs.kv_scale, in[5].data_as<const int32_t>(), in[6].data_as<const int32_t>(),
      in[6].dims[1], in[7].data_as<const int32_t>(), in[8].data_as<const int32_t>(), attrs.attn_scale, out, nullptr,
      AttentionOptions{attrs.attn_window, attrs.attn_softcap});
  // Arguments the op's input check rejected never get here; if they do, nothing was written.
  if (!status.is_ok()) std::memset(out, 0, static_cast<size_t>(outputs[0].nbytes()));
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
