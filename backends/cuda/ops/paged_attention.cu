// Paged attention on the device (kernels/reference/paged_attention.h is the spec).
//
// Three launches on the op's stream, so each sees the one before:
//  1. write_kernel: one CTA per token copies its K/V rows into the cache slot slot_mapping[t]
//     (encoded like the reference: identity, bf16 / f16 round to nearest even, e4m3fn(x / kv_scale)
//     saturating). A later token that maps to the same slot wins (the reference writes in token
//     order). A slot outside the pool is skipped and reported (SlotOutOfRange).
//  2. attend_kernel: grid (query token, kv head x group chunk, KV split). Each CTA finds its
//     sequence from query_start on the device, computes its causal range [0, pos], clips it to its
//     split and exits when that is empty. It stages TP positions of K and V (decoded to f32) in
//     shared memory once for the up to kMaxGroup query heads of its chunk (GQA), scores them, and
//     keeps an online softmax (max, sum, acc[D]) in f32. With one split the CTA writes the output;
//     otherwise its partial (max, sum, acc) goes to scratch.
//  3. combine_kernel (only with more than one split): grid (token, query head); merges the
//     non-empty splits of the token and writes out; padding tokens and tokens of a sequence with
//     an error get zeros.
// Launch parameters (grid, split count and length, shared memory) depend on the dims only, never
// on device data, so a step can be captured into a CUDA graph.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {
namespace {

constexpr int kThreads = 128;      // attend / combine CTA size (4 warps)
constexpr int kTile = 32;          // positions per shared-memory tile (one per lane in the softmax step)
constexpr int kStageUnroll = 8;    // K/V elements each thread loads per staging round
constexpr int kMaxGroup = 8;       // query heads per CTA (a larger GQA group is split in chunks)
constexpr int kMaxHeadDim = 256;
constexpr int kMinSplit = 256;     // positions: a split is never shorter (unless the context is)
constexpr int64_t kTargetCtas = 1024;  // splits are added until the grid has about this many CTAs
constexpr int kMaxSplits = 1024;       // make_plan never exceeds it (splits <= kTargetCtas)

enum CacheKind : int { kF32 = 0, kBF16 = 1, kF16 = 2, kF8 = 3 };

struct Params {
  const float* q;
  const float* k;
  const float* v;
  void* k_cache;
  void* v_cache;
  const int32_t* slots;
  const int32_t* tables;
  const int32_t* lens;
  const int32_t* starts;
  float* out;
  float2* part_ml;   // [T, Hq, splits] (max, sum)
  float* part_acc;   // [T, Hq, splits, D]
  uint32_t* error_word;
  int T, S, hq, hkv, dim, group, group_chunk, chunks, block_count, block_size, max_blocks;
  int max_ctx, splits, split_len;
  float scale, kv_scale;
};

// ---- codecs (bit-exact twins of runtime/core/float_codecs.h) ---------------------------------------

__device__ __forceinline__ uint16_t enc_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ uint16_t enc_f16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (abs < 0x38800000u) {
    const float v = __fadd_rn(__uint_as_float(abs), 0.5f);
    return static_cast<uint16_t>(sign | (__float_as_uint(v) - 0x3F000000u));
  }
  const uint32_t odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xFFFu + odd - (112u << 23);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

__device__ __forceinline__ uint8_t enc_e4m3(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  if (abs >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);
  // codec_round_magnitude<3, 7>
  const uint32_t exp_field = abs >> 23;
  const int e = exp_field == 0 ? 1 : static_cast<int>(exp_field);
  const uint32_t sig = exp_field == 0 ? abs : ((abs & 0x7FFFFFu) | 0x800000u);
  const int unbiased = e - 127;
  const bool normal = unbiased >= 1 - 7;
  const int unit_exp = (normal ? unbiased : 1 - 7) - 3;
  const int shift = unit_exp - (e - 150);
  if (shift > 24) return sign;
  uint32_t q = sig >> shift;
  const uint32_t rest = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u) != 0)) ++q;
  const uint32_t base = normal ? static_cast<uint32_t>(unbiased + 7 - 1) << 3 : 0u;
  return static_cast<uint8_t>(sign | (base + q));
}

__device__ __forceinline__ float dec_e4m3(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t mag = code & 0x7Fu;
  if (mag == 0x7Fu) return __uint_as_float(sign | 0x7FC00000u);
  const uint32_t exp_field = mag >> 3, man = mag & 7u;
  if (exp_field == 0) return __uint_as_float(__float_as_uint(static_cast<float>(man) * 0.001953125f) | sign);
  return __uint_as_float(sign | ((exp_field + 120u) << 23) | (man << 20));
}

template <int kKind>
__device__ __forceinline__ void store_code(void* cache, int64_t i, float x, float kv_scale) {
  if constexpr (kKind == kF32) {
    static_cast<float*>(cache)[i] = x;
  } else if constexpr (kKind == kBF16) {
    static_cast<uint16_t*>(cache)[i] = enc_bf16(x);
  } else if constexpr (kKind == kF16) {
    static_cast<uint16_t*>(cache)[i] = enc_f16(x);
  } else {
    static_cast<uint8_t*>(cache)[i] = enc_e4m3(__fdiv_rn(x, kv_scale));
  }
}

template <int kKind>
__device__ __forceinline__ float load_code(const void* cache, int64_t i, float kv_scale) {
  if constexpr (kKind == kF32) {
    return static_cast<const float*>(cache)[i];
  } else if constexpr (kKind == kBF16) {
    return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(cache)[i]) << 16);
  } else if constexpr (kKind == kF16) {
    return __half2float(__ushort_as_half(static_cast<const uint16_t*>(cache)[i]));
  } else {
    return dec_e4m3(static_cast<const uint8_t*>(cache)[i]) * kv_scale;
  }
}

// ---- 1. write --------------------------------------------------------------------------------------

template <int kKind>
__global__ void write_kernel(Params p) {
  const int t = blockIdx.x;
  const int32_t slot = p.slots[t];
  if (slot < 0) return;
  if (static_cast<int64_t>(slot) >= static_cast<int64_t>(p.block_count) * p.block_size) {
    if (threadIdx.x == 0) device_report(p.error_word, OpCode::PagedAttention, DeviceError::SlotOutOfRange);
    return;
  }
  // The reference writes in token order: a later token with the same slot wins, so this one skips.
  bool later = false;
  for (int u = t + 1 + threadIdx.x; u < p.T; u += blockDim.x) later |= p.slots[u] == slot;
  if (__syncthreads_or(later)) return;
  const int64_t row = static_cast<int64_t>(p.hkv) * p.dim;
  const float* k = p.k + t * row;
  const float* v = p.v + t * row;
  const int64_t base = static_cast<int64_t>(slot) * row;
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    store_code<kKind>(p.k_cache, base + i, k[i], p.kv_scale);
    store_code<kKind>(p.v_cache, base + i, v[i], p.kv_scale);
  }
}

// ---- sequence lookup -------------------------------------------------------------------------------

enum TokenState : int { kPadding = 0, kLive = 1, kBad = 2 };

// Finds token t's sequence and position. Reports (when `report`) BadQueryStart / ContextTooLong.
__device__ int find_token(const Params& p, int t, bool report, int& s_out, int& pos_out) {
  if (p.S == 0) return kPadding;
  const int owned = p.starts[p.S];
  if (p.starts[0] != 0 || owned > p.T || owned < 0) {
    if (report) device_report(p.error_word, OpCode::PagedAttention, DeviceError::BadQueryStart);
    if (owned > p.T || owned < 0) return kBad;
  }
  if (t >= owned) return kPadding;
  int lo = 0, hi = p.S - 1;  // the last s with starts[s] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (p.starts[mid] <= t) lo = mid; else hi = mid - 1;
  }
  const int begin = p.starts[lo], end = p.starts[lo + 1];
  if (!(begin <= t && t < end)) {
    if (report) device_report(p.error_word, OpCode::PagedAttention, DeviceError::BadQueryStart);
    return kBad;
  }
  const int q_len = end - begin;
  const int ctx = p.lens[lo];
  if (ctx < q_len || ctx > p.max_ctx) {
    if (report) device_report(p.error_word, OpCode::PagedAttention, DeviceError::ContextTooLong);
    return kBad;
  }
  s_out = lo;
  pos_out = ctx - q_len + (t - begin);
  return kLive;
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
  return x;
}

// ---- 2. attend -------------------------------------------------------------------------------------

// Dynamic shared memory of attend_kernel, in bytes (layout in the kernel).
size_t attend_smem_bytes(int group_chunk, int dim) {
  return sizeof(int64_t) * kTile +
         sizeof(float) * (2 * static_cast<size_t>(group_chunk) * dim + static_cast<size_t>(kTile) * (dim + 1) +
                          static_cast<size_t>(kTile) * dim + static_cast<size_t>(group_chunk) * kTile +
                          3 * static_cast<size_t>(group_chunk));
}

template <int kKind>
__global__ void __launch_bounds__(kThreads) attend_kernel(Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int D = p.dim, GC = p.group_chunk;
  int64_t* s_base = reinterpret_cast<int64_t*>(smem_raw);      // [kTile] cache row of each position, -1 = zeros
  float* s_q = reinterpret_cast<float*>(s_base + kTile);       // [GC, D]
  float* s_acc = s_q + GC * D;                                 // [GC, D]
  float* s_k = s_acc + GC * D;                                 // [kTile, D + 1]
  float* s_v = s_k + kTile * (D + 1);                          // [kTile, D]
  float* s_p = s_v + kTile * D;                                // [GC, kTile] scores, then weights
  float* s_m = s_p + GC * kTile;                               // [GC]
  float* s_l = s_m + GC;                                       // [GC]
  float* s_alpha = s_l + GC;                                   // [GC]

  const int t = blockIdx.x;
  const int kvh = blockIdx.y / p.chunks;
  const int g0 = (blockIdx.y % p.chunks) * GC;
  const int ng = min(GC, p.group - g0);
  const int split = blockIdx.z;
  const int h0 = kvh * p.group + g0;
  const int tid = threadIdx.x;
  if (ng <= 0) return;

  int s = 0, pos = 0;
  const int state = find_token(p, t, tid == 0 && split == 0 && blockIdx.y == 0, s, pos);
  if (state != kLive) {
    if (p.splits == 1) {  // no combine pass: this CTA writes the zeros of its heads
      float* out = p.out + (static_cast<int64_t>(t) * p.hq + h0) * D;
      for (int i = tid; i < ng * D; i += blockDim.x) out[i] = 0.0f;
    }
    return;
  }
  const int begin = split * p.split_len;
  const int end = min(begin + p.split_len, pos + 1);
  if (begin >= end) return;  // nothing of this split is visible to the token (combine skips it)

  const float* q = p.q + (static_cast<int64_t>(t) * p.hq + h0) * D;
  for (int i = tid; i < ng * D; i += blockDim.x) {
    s_q[i] = q[i];
    s_acc[i] = 0.0f;
  }
  if (tid < ng) {
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.0f;
  }
  const int32_t* table = p.tables + static_cast<int64_t>(s) * p.max_blocks;
  const int warp = tid >> 5, lane = tid & 31, warps = blockDim.x >> 5;

  for (int start = begin; start < end; start += kTile) {
    const int n = min(kTile, end - start);
    if (tid < kTile) {
      int64_t base = -1;
      if (tid < n) {
        const int j = start + tid;
        const int32_t block = table[j / p.block_size];
        if (block < 0 || block >= p.block_count) {
          device_report(p.error_word, OpCode::PagedAttention, DeviceError::BlockOutOfRange);
        } else {
          base = ((static_cast<int64_t>(block) * p.block_size + j % p.block_size) * p.hkv + kvh) * D;
        }
      }
      s_base[tid] = base;
    }
    __syncthreads();
    // Coalesced (consecutive threads, consecutive d); kStageUnroll loads in flight per thread
    // before the first shared-memory store.
    for (int i0 = 0; i0 < n * D; i0 += kThreads * kStageUnroll) {
      float kx[kStageUnroll], vx[kStageUnroll];
#pragma unroll
      for (int u = 0; u < kStageUnroll; ++u) {
        const int i = i0 + u * kThreads + tid;
        kx[u] = 0.0f;
        vx[u] = 0.0f;
        if (i < n * D) {
          const int j = i / D;
          const int64_t base = s_base[j];
          if (base >= 0) {
            kx[u] = load_code<kKind>(p.k_cache, base + (i - j * D), p.kv_scale);
            vx[u] = load_code<kKind>(p.v_cache, base + (i - j * D), p.kv_scale);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kStageUnroll; ++u) {
        const int i = i0 + u * kThreads + tid;
        if (i < n * D) {
          const int j = i / D, d = i - j * D;
          s_k[j * (D + 1) + d] = kx[u];
          s_v[j * D + d] = vx[u];
        }
      }
    }
    __syncthreads();
    // Scores: one (head, position) pair per thread; a warp shares the head (q broadcast).
    for (int i = tid; i < ng * kTile; i += blockDim.x) {
      const int g = i / kTile, j = i - g * kTile;
      float score = -INFINITY;
      if (j < n) {
        const float* qg = s_q + g * D;
        const float* kj = s_k + j * (D + 1);
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot = fmaf(qg[d], kj[d], dot);
        score = p.scale * dot;
      }
      s_p[i] = score;
    }
    __syncthreads();
    // Online softmax, one warp per head: lane j owns position j of the tile.
    for (int g = warp; g < ng; g += warps) {
      const float score = s_p[g * kTile + lane];
      const float m_old = s_m[g];
      const float m_new = fmaxf(m_old, warp_max(score));
      float alpha = 1.0f, w = 0.0f;
      if (m_new != -INFINITY) {
        alpha = expf(m_old - m_new);  // 0 for the first tile
        w = expf(score - m_new);      // 0 for masked positions; NaN scores stay NaN
      }
      const float sum = warp_sum(w);
      const float l_old = s_l[g];
      s_p[g * kTile + lane] = w;  // this lane's own element
      __syncwarp();               // every lane has read s_m[g] / s_l[g] before lane 0 replaces them
      if (lane == 0) {
        s_m[g] = m_new;
        s_l[g] = l_old * alpha + sum;
        s_alpha[g] = alpha;
      }
    }
    __syncthreads();
    for (int i = tid; i < ng * D; i += blockDim.x) {
      const int g = i / D, d = i - g * D;
      const float* wg = s_p + g * kTile;
      float a = s_acc[i] * s_alpha[g];
      for (int j = 0; j < n; ++j) a = fmaf(wg[j], s_v[j * D + d], a);
      s_acc[i] = a;
    }
    __syncthreads();
  }

  if (p.splits == 1) {
    float* out = p.out + (static_cast<int64_t>(t) * p.hq + h0) * D;
    for (int i = tid; i < ng * D; i += blockDim.x) out[i] = s_acc[i] / s_l[i / D];
    return;
  }
  for (int i = tid; i < ng * D; i += blockDim.x) {
    const int g = i / D, d = i - g * D;
    const int64_t row = (static_cast<int64_t>(t) * p.hq + h0 + g) * p.splits + split;
    p.part_acc[row * D + d] = s_acc[i];
  }
  if (tid < ng) {
    const int64_t row = (static_cast<int64_t>(t) * p.hq + h0 + tid) * p.splits + split;
    p.part_ml[row] = make_float2(s_m[tid], s_l[tid]);
  }
}

// ---- 3. combine ------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads) combine_kernel(Params p) {
  // The weight of each split. Static and padded: ptxas may merge the remainder loop's loads into
  // one wider load past `used`, which must stay inside the array (compute-sanitizer memcheck).
  __shared__ float s_w[kMaxSplits + 4];
  __shared__ float s_part[kThreads / 32];
  const int t = blockIdx.x, h = blockIdx.y, D = p.dim;
  float* out = p.out + (static_cast<int64_t>(t) * p.hq + h) * D;
  int s = 0, pos = 0;
  if (find_token(p, t, false, s, pos) != kLive) {
    for (int d = threadIdx.x; d < D; d += blockDim.x) out[d] = 0.0f;
    return;
  }
  const int used = (pos + p.split_len) / p.split_len;  // splits holding a position <= pos
  const int64_t row = (static_cast<int64_t>(t) * p.hq + h) * p.splits;
  const float2* ml = p.part_ml + row;
  float m = -INFINITY;
  for (int i = 0; i < used; ++i) m = fmaxf(m, ml[i].x);
  float part = 0.0f;
  for (int i = threadIdx.x; i < used; i += blockDim.x) {
    const float2 x = ml[i];
    const float w = expf(x.x - m);
    s_w[i] = w;
    part += w * x.y;
  }
  part = warp_sum(part);
  if ((threadIdx.x & 31) == 0) s_part[threadIdx.x >> 5] = part;
  __syncthreads();
  float total = 0.0f;  // in warp order: deterministic
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += s_part[w];
  const float* acc = p.part_acc + row * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float x = 0.0f;
    for (int i = 0; i < used; ++i) x = fmaf(s_w[i], acc[static_cast<int64_t>(i) * D + d], x);
    out[d] = x / total;
  }
}

// ---- host plan -------------------------------------------------------------------------------------

struct Plan {
  int group_chunk = 1, chunks = 1, splits = 1, split_len = kTile;
};

Plan make_plan(int64_t T, int64_t hq, int64_t hkv, int64_t max_ctx) {
  Plan plan;
  const int64_t group = hq / hkv;
  plan.chunks = static_cast<int>((group + kMaxGroup - 1) / kMaxGroup);
  plan.group_chunk = static_cast<int>((group + plan.chunks - 1) / plan.chunks);
  const int64_t ctas = T * hkv * plan.chunks;
  const int64_t max_splits = max_ctx > kMinSplit ? (max_ctx + kMinSplit - 1) / kMinSplit : 1;
  int64_t splits = ctas >= kTargetCtas ? 1 : (kTargetCtas + ctas - 1) / ctas;
  if (splits > max_splits) splits = max_splits;
  if (splits > kMaxSplits) splits = kMaxSplits;
  int64_t len = (max_ctx + splits - 1) / splits;
  len = (len + kTile - 1) / kTile * kTile;
  if (len < kTile) len = kTile;
  plan.split_len = static_cast<int>(len);
  splits = (max_ctx + len - 1) / len;
  plan.splits = static_cast<int>(splits < 1 ? 1 : splits);
  return plan;
}

size_t partial_bytes(const Plan& plan, int64_t T, int64_t hq, int64_t dim) {
  if (plan.splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(T) * static_cast<size_t>(hq) * static_cast<size_t>(plan.splits);
  const size_t ml = (rows * sizeof(float2) + 255) / 256 * 256;
  return ml + rows * static_cast<size_t>(dim) * sizeof(float);
}

int cache_kind(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::F32: return kF32;
    case ScalarType::BF16: return kBF16;
    case ScalarType::F16: return kF16;
    case ScalarType::F8E4M3FN: return kF8;
    default: return -1;
  }
}

template <int kKind>
void launch_all(LaunchContext& lc, const Params& p, const Plan& plan) {
  write_kernel<kKind><<<p.T, 256, 0, lc.stream>>>(p);
  if (!check_launch(lc, "paged_attention write")) return;
  const size_t smem = attend_smem_bytes(plan.group_chunk, p.dim);
  if (smem > 48 * 1024 &&
      !check_cuda(lc, cudaFuncSetAttribute(attend_kernel<kKind>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)),
                  "paged_attention smem")) {
    return;
  }
  const dim3 grid(p.T, p.hkv * plan.chunks, plan.splits);
  attend_kernel<kKind><<<grid, kThreads, smem, lc.stream>>>(p);
  if (!check_launch(lc, "paged_attention attend")) return;
  if (plan.splits > 1) {
    combine_kernel<<<dim3(p.T, p.hq), kThreads, 0, lc.stream>>>(p);
    check_launch(lc, "paged_attention combine");
  }
}

}  // namespace

EMBER_CUDA_KERNEL(paged_attention) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  if (input_count < 9 || output_count < 1) {
    record_failure(lc, "paged_attention", "expects 9 inputs and 1 output");
    return;
  }
  const TensorView &q = inputs[0], &kc = inputs[3];
  const int64_t T = q.dims[0], hq = q.dims[1], D = q.dims[2], hkv = inputs[1].dims[1];
  const int64_t S = inputs[6].dims[0], max_blocks = inputs[6].dims[1];
  const int64_t block_count = kc.dims[0], block_size = kc.dims[1];
  const int kind = cache_kind(kc.dtype);
  if (kind < 0 || inputs[4].dtype != kc.dtype) {
    record_failure(lc, "paged_attention", "cache dtype must be f32, bf16, f16 or f8_e4m3fn");
    return;
  }
  if (hq < 1 || hkv < 1 || hq % hkv != 0 || D < 1 || D > kMaxHeadDim || block_size < 1) {
    record_failure(lc, "paged_attention", "unsupported heads / head_dim (<= 256) / block_size");
    return;
  }
  const int64_t max_ctx = max_blocks * block_size;
  if (T > 0x7FFFFFFF || S > 0x7FFFFFFF || max_ctx > 0x7FFFFFFF || block_count > 0x7FFFFFFF || T * hkv > 0x7FFFFFFF ||
      hq > 65535) {
    record_failure(lc, "paged_attention", "sizes beyond the kernel's 32-bit indexing");
    return;
  }
  if (attrs.attn_window != 0 || attrs.attn_softcap != 0.0f) {
    // Issue 17 added them to the op; this kernel does not implement them yet: an error, never plain
    // attention in their place.
    record_failure(lc, "paged_attention", "sliding_window / softcap are not implemented in the CUDA kernel yet");
    return;
  }
  if (T == 0) return;
  const Plan plan = make_plan(T, hq, hkv, max_ctx);
  const size_t need = partial_bytes(plan, T, hq, D);
  if (need > ctx.scratch.size()) {
    record_failure(lc, "paged_attention", "scratch smaller than paged_attention_scratch asked for");
    return;
  }
  Params p{};
  p.q = inputs[0].data_as<const float>();
  p.k = inputs[1].data_as<const float>();
  p.v = inputs[2].data_as<const float>();
  p.k_cache = kc.data;
  p.v_cache = inputs[4].data;
  p.slots = inputs[5].data_as<const int32_t>();
  p.tables = inputs[6].data_as<const int32_t>();
  p.lens = inputs[7].data_as<const int32_t>();
  p.starts = inputs[8].data_as<const int32_t>();
  p.out = outputs[0].data_as<float>();
  if (need > 0) {
    const size_t rows = static_cast<size_t>(T) * static_cast<size_t>(hq) * static_cast<size_t>(plan.splits);
    p.part_ml = reinterpret_cast<float2*>(ctx.scratch.data());
    p.part_acc = reinterpret_cast<float*>(ctx.scratch.data() + (rows * sizeof(float2) + 255) / 256 * 256);
  }
  p.error_word = lc.error_word;
  p.T = static_cast<int>(T);
  p.S = static_cast<int>(S);
  p.hq = static_cast<int>(hq);
  p.hkv = static_cast<int>(hkv);
  p.dim = static_cast<int>(D);
  p.group = static_cast<int>(hq / hkv);
  p.group_chunk = plan.group_chunk;
  p.chunks = plan.chunks;
  p.block_count = static_cast<int>(block_count);
  p.block_size = static_cast<int>(block_size);
  p.max_blocks = static_cast<int>(max_blocks);
  p.max_ctx = static_cast<int>(max_ctx);
  p.splits = plan.splits;
  p.split_len = plan.split_len;
  p.scale = attrs.attn_scale;
  p.kv_scale = attrs.kv_scale;
  switch (kind) {
    case kF32: launch_all<kF32>(lc, p, plan); break;
    case kBF16: launch_all<kBF16>(lc, p, plan); break;
    case kF16: launch_all<kF16>(lc, p, plan); break;
    default: launch_all<kF8>(lc, p, plan); break;
  }
}

// The partials at the largest split count any token count up to the bound's can take (fewer tokens
// give more splits, so the bytes are not monotonic in T).
EMBER_CUDA_SCRATCH(paged_attention_scratch) {
  if (input_count < 9) return 0;
  const int64_t T = inputs[0].dims[0], hq = inputs[0].dims[1], D = inputs[0].dims[2], hkv = inputs[1].dims[1];
  const int64_t max_ctx = inputs[6].dims[1] * inputs[3].dims[1];
  if (T < 1 || hq < 1 || hkv < 1 || hq % hkv != 0 || D < 1) return 0;
  size_t best = 0;
  for (int64_t t = 1; t <= T && t <= kTargetCtas; ++t) {
    const size_t bytes = partial_bytes(make_plan(t, hq, hkv, max_ctx), t, hq, D);
    if (bytes > best) best = bytes;
  }
  return best;
}

}  // namespace ember::backends::cuda
