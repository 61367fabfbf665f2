// The elementwise and row kernels of an LLM step (ops/cuda_ops.h): embedding, rms_norm, rope,
// silu_mul, add, reshape, logits_gather. Semantics and roundings are kernels/reference/llm.cc's and
// elementwise.cc's step by step: every f32 operation the reference rounds is an explicit _rn
// intrinsic here (no FMA contraction), the reference's double math is double here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/ops/cuda_ops.h"
#include "backends/cuda/ops/fp8.cuh"

namespace ember::backends::cuda {
namespace {

constexpr int kMaxGrid = 65535 * 8;  // grid-stride loops beyond this

inline int grid_for(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxGrid ? kMaxGrid : blocks));
}

inline int64_t numel_of(const TensorView& t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

// Sum over the block (any blockDim that is a multiple of 32, up to 1024); every thread gets it.
// The tree is fixed, so the result is deterministic.
__device__ double block_sum(double v, double* shared /* [32] */) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- embedding ---------------------------------------------------------------------------------

template <typename T>
__device__ inline float to_f32(T v);
template <>
__device__ inline float to_f32<float>(float v) { return v; }
template <>
__device__ inline float to_f32<uint16_t>(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }  // bf16
struct F16Bits {
  uint16_t bits;
};
template <>
__device__ inline float to_f32<F16Bits>(F16Bits v) { return __half2float(__ushort_as_half(v.bits)); }

// One block per token (grid-stride over tokens), threads over H.
template <typename T>
__global__ void embedding_kernel(const T* __restrict__ weight, const int32_t* __restrict__ ids,
                                 float* __restrict__ out, int64_t vocab, int64_t h, int64_t tokens, uint32_t* error_word) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t id = ids[t];
    float* row = out + t * h;
    if (id < 0 || id >= vocab) {
      for (int64_t i = threadIdx.x; i < h; i += blockDim.x) row[i] = 0.0f;
      if (threadIdx.x == 0) device_report(error_word, OpCode::Embedding, DeviceError::IdOutOfRange);
      continue;
    }
    const T* src = weight + id * h;
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) row[i] = to_f32<T>(src[i]);
  }
}

// f32 rows with H % 4 == 0: float4 copies.
__global__ void embedding_f32x4_kernel(const float4* __restrict__ weight, const int32_t* __restrict__ ids,
                                       float4* __restrict__ out, int64_t vocab, int64_t h4, int64_t tokens,
                                       uint32_t* error_word) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t id = ids[t];
    float4* row = out + t * h4;
    if (id < 0 || id >= vocab) {
      for (int64_t i = threadIdx.x; i < h4; i += blockDim.x) row[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (threadIdx.x == 0) device_report(error_word, OpCode::Embedding, DeviceError::IdOutOfRange);
      continue;
    }
    const float4* src = weight + id * h4;
    for (int64_t i = threadIdx.x; i < h4; i += blockDim.x) row[i] = src[i];
  }
}

// ---- rms_norm ----------------------------------------------------------------------------------

// One block per row: sum of squares in double (exact products), variance rounded to f32,
// rstd = f32(1 / sqrt(double(variance + eps))), y = w * (x * rstd) in f32.
// With `qdata` set (W8A8 fused into the producer, cuda_ops.h FusedQuant): each row is then also
// quantized per token into qsx[r] and row r of qdata (quantize_row's `kind`).
__global__ void __launch_bounds__(1024) rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                                int64_t rows, int64_t h, float eps, float* qsx, uint8_t* qdata, int kind, int width) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = x + r * h;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
      const double v = row[i];
      sum += v * v;
    }
    sum = block_sum(sum, shared);
    const float variance = static_cast<float>(sum / static_cast<double>(h));
    const float rstd = static_cast<float>(1.0 / sqrt(static_cast<double>(__fadd_rn(variance, eps))));
    float* o = out + r * h;
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) o[i] = __fmul_rn(w[i], __fmul_rn(row[i], rstd));
    if (qdata != nullptr) quantize_row(o, h, qsx + r, qdata + r * h * width, kind);
  }
}

// ---- rope --------------------------------------------------------------------------------------

// One block per token: cos / sin of the f32 angle (double functions rounded to f32) into shared
// memory, then every (head, i) pair. Each thread reads both halves of its pair before writing, so
// the output may alias x. A negative position gives a NaN token (as the reference).
__global__ void rope_kernel(const float* __restrict__ x, const int32_t* __restrict__ positions,
                            const float* __restrict__ inv_freq, float* out, int64_t tokens, int64_t heads,
                            int64_t half) {
  extern __shared__ float cs[];  // [half] cos then [half] sin
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int32_t pos = positions[t];
    const float p = pos < 0 ? __int_as_float(0x7fc00000) : static_cast<float>(pos);
    __syncthreads();  // the previous token's readers are done
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const double angle = __fmul_rn(p, inv_freq[i]);
      cs[i] = static_cast<float>(cos(angle));
      cs[half + i] = static_cast<float>(sin(angle));
    }
    __syncthreads();
    const int64_t d = 2 * half, pairs = heads * half;
    for (int64_t j = threadIdx.x; j < pairs; j += blockDim.x) {
      const int64_t hd = j / half, i = j - hd * half;
      const int64_t base = (t * heads + hd) * d;
      const float c = cs[i], s = cs[half + i];
      const float x1 = x[base + i], x2 = x[base + half + i];
      const float a1 = __fmul_rn(x1, c), b1 = __fmul_rn(-x2, s);
      const float a2 = __fmul_rn(x2, c), b2 = __fmul_rn(x1, s);
      out[base + i] = __fadd_rn(a1, b1);
      out[base + half + i] = __fadd_rn(a2, b2);
    }
  }
}

// ---- silu_mul ----------------------------------------------------------------------------------

__device__ inline float silu_mul_one(float g, float u) {
  const double x = g;
  const float silu = static_cast<float>(x / (1.0 + exp(-x)));
  return __fmul_rn(silu, u);
}

__global__ void silu_mul_x4_kernel(const float4* __restrict__ g, const float4* __restrict__ u, float4* out, int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 a = g[i], b = u[i];
    out[i] = make_float4(silu_mul_one(a.x, b.x), silu_mul_one(a.y, b.y), silu_mul_one(a.z, b.z), silu_mul_one(a.w, b.w));
  }
}

// One block per row, then the row quantized per token (W8A8 fused into the producer).
__global__ void silu_mul_quant_kernel(const float* __restrict__ g, const float* __restrict__ u, float* out, int64_t rows,
                                      int64_t k, float* qsx, uint8_t* qdata, int kind, int width) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * k;
    for (int64_t p = threadIdx.x; p < k; p += blockDim.x) out[base + p] = silu_mul_one(g[base + p], u[base + p]);
    quantize_row(out + base, k, qsx + r, qdata + base * width, kind);
  }
}

__global__ void silu_mul_kernel(const float* __restrict__ g, const float* __restrict__ u, float* out, int64_t begin,
                                int64_t n) {
  for (int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = silu_mul_one(g[i], u[i]);
  }
}

// ---- add ---------------------------------------------------------------------------------------

// f32 a + b is the correctly rounded sum (the reference's double sum rounded once).
__global__ void add_x4_kernel(const float4* a, const float4* b, float4* out, int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 x = a[i], y = b[i];
    out[i] = make_float4(__fadd_rn(x.x, y.x), __fadd_rn(x.y, y.y), __fadd_rn(x.z, y.z), __fadd_rn(x.w, y.w));
  }
}

__global__ void add_same_kernel(const float* a, const float* b, float* out, int64_t begin, int64_t n) {
  for (int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __fadd_rn(a[i], b[i]);
  }
}

struct BroadcastShape {
  int rank;
  int64_t dims[kMaxRank];
  int64_t sa[kMaxRank];  // element strides, 0 along broadcast dims
  int64_t sb[kMaxRank];
};

__global__ void add_broadcast_kernel(const float* a, const float* b, float* out, int64_t n, BroadcastShape s) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t q = rest / s.dims[d], k = rest - q * s.dims[d];
      oa += k * s.sa[d];
      ob += k * s.sb[d];
      rest = q;
    }
    out[i] = __fadd_rn(a[oa], b[ob]);
  }
}

// kernels/reference/internal.h's broadcast_strides.
void broadcast_strides(const int64_t* dims, int rank, int out_rank, int64_t* strides) {
  int64_t stride = 1;
  for (int i = out_rank - 1; i >= 0; --i) {
    const int src = i - (out_rank - rank);
    strides[i] = (src < 0 || dims[src] == 1) ? 0 : stride;
    if (src >= 0) stride *= dims[src];
  }
}

// ---- logits_gather -----------------------------------------------------------------------------

// One block per selected row: a byte-exact copy of row indices[s] (-1: zeros; any other index
// outside [0, T): zeros and IndexOutOfRange).
template <typename V>
__global__ void logits_gather_kernel(const V* __restrict__ hidden, const int32_t* __restrict__ idx, V* __restrict__ out,
                                     int64_t rows, int64_t h, int64_t count, uint32_t* error_word) {
  for (int64_t s = blockIdx.x; s < count; s += gridDim.x) {
    const int64_t r = idx[s];
    V* o = out + s * h;
    if (r < 0 || r >= rows) {
      const V zero{};
      for (int64_t i = threadIdx.x; i < h; i += blockDim.x) o[i] = zero;
      if (r != -1 && threadIdx.x == 0) device_report(error_word, OpCode::LogitsGather, DeviceError::IndexOutOfRange);
      continue;
    }
    const V* src = hidden + r * h;
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) o[i] = src[i];
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

inline int row_threads(int64_t work) {
  if (work >= 2048) return 512;
  if (work >= 512) return 256;
  return 128;
}

// Where a fused producer quantizes its [rows, k] output (FusedQuant), or data null: not fused here.
struct FusedTarget {
  float* sx = nullptr;
  uint8_t* data = nullptr;
  int kind = kQuantF32;
  int width = 4;  // bytes per element of `data`
};
FusedTarget fused_target(const KernelContext& ctx, int64_t rows, int64_t k) {
  FusedTarget t;
  const FusedQuant* f = fused_quant(ctx, FusedRole::Produce);
  if (f == nullptr) return t;
  switch (quant_form(rows, k)) {
    case QuantForm::F32: t.kind = kQuantF32; t.width = 4; break;
    case QuantForm::Codes: t.kind = kQuantCodes; t.width = 1; break;
    case QuantForm::None: return t;  // the linears quantize x themselves
  }
  t.sx = f->sx;
  t.data = static_cast<uint8_t*>(f->data);
  return t;
}

}  // namespace

EMBER_CUDA_KERNEL(embedding) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const TensorView& w = inputs[0];
  const int64_t vocab = w.dims[0], h = w.dims[1], tokens = inputs[1].dims[0];
  if (tokens == 0 || h == 0) return;
  const int32_t* ids = inputs[1].data_as<const int32_t>();
  float* out = outputs[0].data_as<float>();
  const int grid = static_cast<int>(tokens < kMaxGrid ? tokens : kMaxGrid);
  if (w.dtype == ScalarType::F32 && h % 4 == 0 && aligned16(w.data) && aligned16(out)) {
    const int threads = row_threads(h / 4);
    embedding_f32x4_kernel<<<grid, threads, 0, lc.stream>>>(w.data_as<const float4>(), ids,
                                                            reinterpret_cast<float4*>(out), vocab, h / 4, tokens,
                                                            lc.error_word);
  } else if (w.dtype == ScalarType::F32) {
    embedding_kernel<float><<<grid, row_threads(h), 0, lc.stream>>>(w.data_as<const float>(), ids, out, vocab, h,
                                                                     tokens, lc.error_word);
  } else if (w.dtype == ScalarType::BF16) {
    embedding_kernel<uint16_t><<<grid, row_threads(h), 0, lc.stream>>>(w.data_as<const uint16_t>(), ids, out, vocab,
                                                                        h, tokens, lc.error_word);
  } else if (w.dtype == ScalarType::F16) {
    embedding_kernel<F16Bits><<<grid, row_threads(h), 0, lc.stream>>>(w.data_as<const F16Bits>(), ids, out, vocab, h,
                                                                       tokens, lc.error_word);
  } else {
    record_failure(lc, "embedding", "unsupported weight dtype");
    return;
  }
  check_launch(lc, "embedding");
}

EMBER_CUDA_KERNEL(rms_norm) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const TensorView& x = inputs[0];
  const int64_t h = x.dims[x.rank - 1];
  if (h == 0) return;
  const int64_t rows = numel_of(x) / h;
  if (rows == 0) return;
  const int threads = h >= 4096 ? 1024 : row_threads(h);
  const int grid = static_cast<int>(rows < kMaxGrid ? rows : kMaxGrid);
  FusedTarget q = fused_target(ctx, rows, h);
  rms_norm_kernel<<<grid, threads, 0, lc.stream>>>(x.data_as<const float>(), inputs[1].data_as<const float>(),
                                                   outputs[0].data_as<float>(), rows, h, attrs.epsilon, q.sx, q.data,
                                                   q.kind, q.width);
  check_launch(lc, "rms_norm");
}

EMBER_CUDA_KERNEL(rope) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const TensorView& x = inputs[0];
  const int64_t tokens = x.dims[0], heads = x.dims[1], half = x.dims[2] / 2;
  if (tokens == 0 || heads == 0 || half == 0) return;
  const size_t shared = static_cast<size_t>(2 * half) * sizeof(float);
  if (shared > 48 * 1024) {
    record_failure(lc, "rope", "head dim too large");
    return;
  }
  const int grid = static_cast<int>(tokens < kMaxGrid ? tokens : kMaxGrid);
  rope_kernel<<<grid, row_threads(heads * half), shared, lc.stream>>>(
      x.data_as<const float>(), inputs[1].data_as<const int32_t>(), inputs[2].data_as<const float>(),
      outputs[0].data_as<float>(), tokens, heads, half);
  check_launch(lc, "rope");
}

EMBER_CUDA_KERNEL(silu_mul) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const int64_t n = numel_of(inputs[0]);
  if (n == 0) return;
  const float* g = inputs[0].data_as<const float>();
  const float* u = inputs[1].data_as<const float>();
  float* out = outputs[0].data_as<float>();
  constexpr int kThreads = 256;
  const int64_t k = outputs[0].rank > 0 ? outputs[0].dims[outputs[0].rank - 1] : 1;
  const FusedTarget q = fused_target(ctx, k > 0 ? n / k : 0, k);
  if (q.data != nullptr) {
    const int64_t rows = n / k;
    silu_mul_quant_kernel<<<static_cast<int>(rows < kMaxGrid ? rows : kMaxGrid), k >= 4096 ? 1024 : row_threads(k), 0,
                            lc.stream>>>(g, u, out, rows, k, q.sx, q.data, q.kind, q.width);
    check_launch(lc, "silu_mul (fused W8A8 quantization)");
    return;
  }
  int64_t done = 0;
  if (aligned16(g) && aligned16(u) && aligned16(out) && n >= 4) {
    const int64_t n4 = n / 4;
    silu_mul_x4_kernel<<<grid_for(n4, kThreads), kThreads, 0, lc.stream>>>(
        reinterpret_cast<const float4*>(g), reinterpret_cast<const float4*>(u), reinterpret_cast<float4*>(out), n4);
    if (!check_launch(lc, "silu_mul")) return;
    done = n4 * 4;
  }
  if (done < n) {
    silu_mul_kernel<<<grid_for(n - done, kThreads), kThreads, 0, lc.stream>>>(g, u, out, done, n);
    check_launch(lc, "silu_mul");
  }
}

EMBER_CUDA_KERNEL(add) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  TensorView& out = outputs[0];
  const int64_t n = numel_of(out);
  if (n == 0) return;
  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* po = out.data_as<float>();
  constexpr int kThreads = 256;
  if (numel_of(a) == n && numel_of(b) == n) {  // same element count as the output: no broadcast
    int64_t done = 0;
    if (aligned16(pa) && aligned16(pb) && aligned16(po) && n >= 4) {
      const int64_t n4 = n / 4;
      add_x4_kernel<<<grid_for(n4, kThreads), kThreads, 0, lc.stream>>>(
          reinterpret_cast<const float4*>(pa), reinterpret_cast<const float4*>(pb), reinterpret_cast<float4*>(po), n4);
      if (!check_launch(lc, "add")) return;
      done = n4 * 4;
    }
    if (done < n) {
      add_same_kernel<<<grid_for(n - done, kThreads), kThreads, 0, lc.stream>>>(pa, pb, po, done, n);
      check_launch(lc, "add");
    }
    return;
  }
  BroadcastShape s;
  s.rank = out.rank;
  for (int i = 0; i < out.rank; ++i) s.dims[i] = out.dims[i];
  broadcast_strides(a.dims, a.rank, out.rank, s.sa);
  broadcast_strides(b.dims, b.rank, out.rank, s.sb);
  add_broadcast_kernel<<<grid_for(n, kThreads), kThreads, 0, lc.stream>>>(pa, pb, po, n, s);
  check_launch(lc, "add");
}

EMBER_CUDA_KERNEL(reshape) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const size_t bytes = static_cast<size_t>(outputs[0].nbytes());
  if (bytes == 0 || outputs[0].data == inputs[0].data) return;
  check_cuda(lc, cudaMemcpyAsync(outputs[0].data, inputs[0].data, bytes, cudaMemcpyDeviceToDevice, lc.stream),
             "reshape");
}

EMBER_CUDA_KERNEL(logits_gather) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const int64_t rows = inputs[0].dims[0], h = inputs[0].dims[1], count = inputs[1].dims[0];
  if (count == 0 || h == 0) return;
  const int32_t* idx = inputs[1].data_as<const int32_t>();
  const int grid = static_cast<int>(count < kMaxGrid ? count : kMaxGrid);
  if (h % 4 == 0 && aligned16(inputs[0].data) && aligned16(outputs[0].data)) {
    logits_gather_kernel<uint4><<<grid, row_threads(h / 4), 0, lc.stream>>>(
        inputs[0].data_as<const uint4>(), idx, outputs[0].data_as<uint4>(), rows, h / 4, count, lc.error_word);
  } else {
    logits_gather_kernel<uint32_t><<<grid, row_threads(h), 0, lc.stream>>>(
        inputs[0].data_as<const uint32_t>(), idx, outputs[0].data_as<uint32_t>(), rows, h, count, lc.error_word);
  }
  check_launch(lc, "logits_gather");
}

}  // namespace ember::backends::cuda
