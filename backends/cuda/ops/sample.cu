// sample (ops/cuda_ops.h): kernels/reference/sample.cc's semantics (kernels/reference/ops.h) with one
// CTA per row and no sort of the vocabulary:
//  - the penalized (and tempered) row is written once to scratch (S * V f32);
//  - greedy: a block argmax (NaN never wins, ties to the first index), logprob from a double sum;
//  - top-k: the k-th largest value by a radix select over order-preserving float keys (4 passes of
//    8 bits, shared-memory histograms of counts); every value >= it is kept (ties kept);
//  - top-p: the boundary value tau of the (z desc, id asc) order by a radix select whose histograms
//    weigh each kept value by exp(z - max) (double), then how many of the ids tied at tau the prefix
//    needs, and the last of them by a block prefix count in id order;
//  - the draw: u = sample_uniform(seed, position) (a device twin of runtime/core/philox.h), the
//    kept weights walked in ascending id order as a block-wide prefix sum over chunks (each thread
//    sums kItems consecutive ids sequentially), the first id whose running sum exceeds u * sum.
// Sums are in double; their order differs from the reference's sequential one, so an id can differ
// only where u * sum (or top_p) lies within rounding (~1e-15 relative) of a cumulative boundary.
#include <cstdint>

#include "backends/cuda/ops/cuda_ops.h"

namespace ember::backends::cuda {
namespace {

constexpr int kThreads = 512;  // per row (multiple of 32, at most 1024)
constexpr int kItems = 16;     // consecutive ids per thread in the id-ordered walks
constexpr int kChunk = kThreads * kItems;

__device__ inline float pos_inf() { return __int_as_float(0x7f800000); }
__device__ inline float neg_inf() { return __int_as_float(static_cast<int>(0xff800000u)); }
__device__ inline float quiet_nan() { return __int_as_float(0x7fc00000); }

// runtime/core/philox.h, on the device: the same words for the same (counter, key).
__device__ inline double sample_uniform_device(uint32_t seed, uint32_t position) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = position, c1 = 0u, c2 = 0u, c3 = 0u;
  uint32_t k0 = seed, k1 = 0u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kW0, k1 += kW1;
  }
  const uint64_t bits = (static_cast<uint64_t>(c0) << 21) | (c1 >> 11);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// Order-preserving key of a non-NaN float (-0 folded onto +0, so key equality is float equality).
__device__ inline uint32_t order_key(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u << 1) == 0u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ inline float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// ---- block collectives (blockDim.x == kThreads; every thread gets the result) -------------------

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity, T* shared /* [32] */) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kThreads / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < kWarps ? shared[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Min {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// Exclusive prefix sum in thread order; *total = the block's sum.
template <typename T>
__device__ T block_exclusive_scan(T v, T* shared /* [32] */, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kThreads / 32;
  T incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const T t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  T excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = T(0);
  __syncthreads();
  if (lane == 31) shared[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    T w = lane < kWarps ? shared[lane] : T(0);
    for (int o = 1; o < 32; o <<= 1) {
      const T t = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += t;
    }
    if (lane < kWarps) shared[lane] = w;  // inclusive warp totals
  }
  __syncthreads();
  *total = shared[kWarps - 1];
  return (warp == 0 ? T(0) : shared[warp - 1]) + excl;
}

// The first index of the largest non-NaN value (idx -1: none).
struct ArgMax {
  float v;
  int idx;
};
__device__ inline ArgMax better(ArgMax a, ArgMax b) {
  if (a.idx < 0) return b;
  if (b.idx < 0) return a;
  if (a.v > b.v) return a;
  if (b.v > a.v) return b;
  return a.idx < b.idx ? a : b;
}
__device__ ArgMax block_argmax(ArgMax a, float* sv, int* si) {
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b;
    b.v = __shfl_xor_sync(0xffffffffu, a.v, o);
    b.idx = __shfl_xor_sync(0xffffffffu, a.idx, o);
    a = better(a, b);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kThreads / 32;
  __syncthreads();
  if (lane == 0) sv[warp] = a.v, si[warp] = a.idx;
  __syncthreads();
  a.v = sv[lane < kWarps ? lane : 0];
  a.idx = si[lane < kWarps ? lane : 0];
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b;
    b.v = __shfl_xor_sync(0xffffffffu, a.v, o);
    b.idx = __shfl_xor_sync(0xffffffffu, a.idx, o);
    a = better(a, b);
  }
  return a;
}

struct Params {
  const float* logits;
  const float* temperature;
  const int32_t* top_k;
  const float* top_p;
  const float* penalty;
  const int32_t* seed;
  const int32_t* position;
  const int32_t* history;
  const int32_t* history_len;
  int32_t* ids;
  float* logprobs;
  float* z;  // scratch [S, V]
  uint32_t* error_word;
  int vocab;
  int hmax;
};

struct Shared {
  double d[32];
  float f[32];
  int i[32];
  unsigned count[256];
  double mass[256];
  int sel;
  int remaining;
  int found;
  int cut;
  int chosen;
};

__device__ inline float tempered(float l, float temperature) {
  const float t = __fdiv_rn(l, temperature);
  return isnan(t) ? neg_inf() : t;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(Params p) {
  __shared__ Shared sh;
  const int r = blockIdx.x, tid = threadIdx.x;
  const int v = p.vocab;
  const float* logits = p.logits + static_cast<int64_t>(r) * v;
  float* z = p.z + static_cast<int64_t>(r) * v;
  const float temperature = p.temperature[r];
  const bool greedy = temperature == 0.0f;

  // 0. The parameters, as the portable kernel's input check (which the host cannot run on device
  //    memory): a row outside the rules gets id 0 and a NaN logprob, and the step fails.
  {
    const float top_p = p.top_p[r], penalty = p.penalty[r];
    const int hlen = p.history_len[r];
    bool bad = !(temperature >= 0.0f) || isinf(temperature) || !(top_p >= 0.0f && top_p <= 1.0f) ||
               !(penalty > 0.0f) || isinf(penalty) || p.position[r] < 0 || hlen < 0 || hlen > p.hmax;
    if (!bad) {
      const int32_t* history = p.history + static_cast<int64_t>(r) * p.hmax;
      for (int j = tid; j < hlen; j += kThreads) bad = bad || history[j] >= v;
    }
    if (__syncthreads_or(bad)) {
      if (tid == 0) {
        p.ids[r] = 0;
        p.logprobs[r] = quiet_nan();
        device_report(p.error_word, OpCode::Sample, DeviceError::BadSampling);
      }
      return;
    }
  }

  // 1. The penalized (greedy) or penalized and tempered (NaN -> -inf) row. A penalized id takes its
  //    value from the original logit, so duplicates in the history apply once.
  for (int i = tid; i < v; i += kThreads) {
    const float l = logits[i];
    z[i] = greedy ? l : tempered(l, temperature);
  }
  __syncthreads();
  {
    int hlen = p.history_len[r];
    hlen = hlen < 0 ? 0 : (hlen > p.hmax ? p.hmax : hlen);
    const int32_t* history = p.history + static_cast<int64_t>(r) * p.hmax;
    const float penalty = p.penalty[r];
    for (int j = tid; j < hlen; j += kThreads) {
      const int32_t id = history[j];
      if (id < 0 || id >= v) continue;
      const float l = logits[id];
      const float pl = l < 0.0f ? __fmul_rn(l, penalty) : __fdiv_rn(l, penalty);
      z[id] = greedy ? pl : tempered(pl, temperature);
    }
  }
  __syncthreads();

  // 2. Greedy.
  if (greedy) {
    ArgMax best{0.0f, -1};
    for (int i = tid; i < v; i += kThreads) {
      const float x = z[i];
      if (!isnan(x)) best = better(best, ArgMax{x, i});
    }
    best = block_argmax(best, sh.f, sh.i);
    if (best.idx < 0) {
      if (tid == 0) p.ids[r] = 0, p.logprobs[r] = quiet_nan();
      return;
    }
    if (best.v == pos_inf()) {
      if (tid == 0) p.ids[r] = best.idx, p.logprobs[r] = 0.0f;
      return;
    }
    const double m = best.v;
    double sum = 0.0;
    for (int i = tid; i < v; i += kThreads) {
      const float x = z[i];
      if (!isnan(x)) sum += exp(static_cast<double>(x) - m);
    }
    sum = block_reduce(sum, Sum(), 0.0, sh.d);
    if (tid == 0) p.ids[r] = best.idx, p.logprobs[r] = static_cast<float>(-log(sum));
    return;
  }

  // The largest z (no NaN left): the largest kept one too, top-k never drops the maximum.
  float mf = neg_inf();
  for (int i = tid; i < v; i += kThreads) mf = fmaxf(mf, z[i]);
  mf = block_reduce(mf, Max(), neg_inf(), sh.f);

  // 3. Top-k: lo = the k-th largest z (with multiplicity); keep z >= lo.
  float lo = neg_inf();
  const int k = p.top_k[r];
  if (k > 0 && k < v && !isinf(mf)) {
    uint32_t desired = 0u, mask = 0u;
    if (tid == 0) sh.remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = tid; b < 256; b += kThreads) sh.count[b] = 0u;
      __syncthreads();
      for (int i = tid; i < v; i += kThreads) {
        const uint32_t key = order_key(z[i]);
        if ((key & mask) == desired) atomicAdd(&sh.count[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
      if (tid == 0) {
        int remaining = sh.remaining, b = 255;
        for (; b > 0; --b) {
          if (remaining <= static_cast<int>(sh.count[b])) break;
          remaining -= static_cast<int>(sh.count[b]);
        }
        sh.sel = b;
        sh.remaining = remaining;
      }
      __syncthreads();
      desired |= static_cast<uint32_t>(sh.sel) << shift;
      mask |= 255u << shift;
    }
    lo = key_value(desired);
  }

  // Nothing finite to sample from, or an infinite logit: the first index of the maximum.
  if (isinf(mf)) {
    int first = 0x7fffffff;
    for (int i = tid; i < v; i += kThreads) {
      if (z[i] == mf) {
        first = i;
        break;
      }
    }
    first = block_reduce(first, Min(), 0x7fffffff, sh.i);
    if (tid == 0) {
      p.ids[r] = first == 0x7fffffff ? 0 : first;
      p.logprobs[r] = mf == pos_inf() ? 0.0f : quiet_nan();
    }
    return;
  }
  const double m = mf;
  auto kept_k = [lo](float x) { return x != neg_inf() && x >= lo; };

  // 4. Top-p: keep z > tau, and the ids tied at tau up to `cut`.
  float tau = neg_inf();
  int cut = v;
  const float top_p = p.top_p[r];
  if (top_p < 1.0f) {
    double total = 0.0;
    for (int i = tid; i < v; i += kThreads) {
      const float x = z[i];
      if (kept_k(x)) total += exp(static_cast<double>(x) - m);
    }
    total = block_reduce(total, Sum(), 0.0, sh.d);
    const double target = static_cast<double>(top_p) * total;
    // tau = the largest kept value whose mass at or above it reaches target.
    uint32_t desired = 0u, mask = 0u;
    double above = 0.0;  // thread 0's: mass of the values above the selected key prefix
    if (tid == 0) sh.found = 1;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = tid; b < 256; b += kThreads) sh.count[b] = 0u, sh.mass[b] = 0.0;
      __syncthreads();
      for (int i = tid; i < v; i += kThreads) {
        const float x = z[i];
        if (!kept_k(x)) continue;
        const uint32_t key = order_key(x);
        if ((key & mask) != desired) continue;
        const uint32_t b = (key >> shift) & 255u;
        atomicAdd(&sh.count[b], 1u);
        atomicAdd(&sh.mass[b], exp(static_cast<double>(x) - m));
      }
      __syncthreads();
      if (tid == 0) {
        int sel = -1, lowest = -1;
        for (int b = 255; b >= 0; --b) {
          if (sh.count[b] == 0u) continue;
          if (above + sh.mass[b] >= target) {
            sel = b;
            break;
          }
          above += sh.mass[b];
          lowest = b;
        }
        if (sel < 0) {
          if (shift == 24) sh.found = 0;  // the whole kept mass is below target (rounding): keep all
          sel = lowest < 0 ? 0 : lowest;
        }
        sh.sel = sel;
      }
      __syncthreads();
      if (!sh.found) break;
      desired |= static_cast<uint32_t>(sh.sel) << shift;
      mask |= 255u << shift;
    }
    if (sh.found) {
      tau = key_value(desired);
      double mass_above = 0.0, tied = 0.0;
      for (int i = tid; i < v; i += kThreads) {
        const float x = z[i];
        if (!kept_k(x)) continue;
        if (x > tau) mass_above += exp(static_cast<double>(x) - m);
        if (x == tau) tied += 1.0;
      }
      mass_above = block_reduce(mass_above, Sum(), 0.0, sh.d);
      tied = block_reduce(tied, Sum(), 0.0, sh.d);
      const double w_tau = exp(static_cast<double>(tau) - m);
      const double need = target - mass_above;
      double c = 1.0;
      if (need > 0.0) c = w_tau > 0.0 ? ceil(need / w_tau) : tied;
      if (c > tied) c = tied;
      if (c < 1.0) c = 1.0;
      if (c < tied) {  // the id of the c-th tied value in id order
        const int want = static_cast<int>(c);
        int seen = 0;
        if (tid == 0) sh.cut = v;
        for (int base = 0; base < v; base += kChunk) {
          const int start = base + tid * kItems;
          const int end = start + kItems < v ? start + kItems : v;
          int mine = 0;
          for (int i = start; i < end; ++i) mine += (z[i] == tau && kept_k(z[i])) ? 1 : 0;
          int chunk_total = 0;
          const int before = seen + block_exclusive_scan(mine, sh.i, &chunk_total);
          if (before < want && before + mine >= want) {
            int n = before;
            for (int i = start; i < end; ++i) {
              if (z[i] == tau && kept_k(z[i]) && ++n == want) {
                sh.cut = i;
                break;
              }
            }
          }
          seen += chunk_total;
          if (seen >= want) break;
        }
        __syncthreads();
        cut = sh.cut;
      }
    }
  }
  auto kept = [lo, tau, cut](float x, int i) {
    return x != neg_inf() && x >= lo && (x > tau || (x == tau && i <= cut));
  };

  // 5. The draw over the kept weights in ascending id order.
  double sum = 0.0;
  int last = -1;
  for (int i = tid; i < v; i += kThreads) {
    const float x = z[i];
    if (kept(x, i)) sum += exp(static_cast<double>(x) - m), last = i;
  }
  sum = block_reduce(sum, Sum(), 0.0, sh.d);
  last = block_reduce(last, Max(), -1, sh.i);
  const double target = sample_uniform_device(static_cast<uint32_t>(p.seed[r]), static_cast<uint32_t>(p.position[r])) * sum;
  if (tid == 0) sh.chosen = -1;
  double run = 0.0;
  for (int base = 0; base < v; base += kChunk) {
    const int start = base + tid * kItems;
    const int end = start + kItems < v ? start + kItems : v;
    double mine = 0.0;
    for (int i = start; i < end; ++i) {
      const float x = z[i];
      if (kept(x, i)) mine += exp(static_cast<double>(x) - m);
    }
    double chunk_total = 0.0;
    const double before = run + block_exclusive_scan(mine, sh.d, &chunk_total);
    const int crossing = block_reduce((mine > 0.0 && before + mine > target) ? tid : 0x7fffffff, Min(), 0x7fffffff, sh.i);
    if (crossing != 0x7fffffff) {
      if (tid == crossing) {
        double cum = before;
        int chosen = -1;
        for (int i = start; i < end; ++i) {
          const float x = z[i];
          if (!kept(x, i)) continue;
          cum += exp(static_cast<double>(x) - m);
          chosen = i;
          if (cum > target) break;
        }
        sh.chosen = chosen;
      }
      break;
    }
    run += chunk_total;
  }
  __syncthreads();
  if (tid == 0) {
    const int id = sh.chosen >= 0 ? sh.chosen : (last >= 0 ? last : 0);
    p.ids[r] = id;
    p.logprobs[r] = static_cast<float>((static_cast<double>(z[id]) - m) - log(sum));
  }
}

}  // namespace

EMBER_CUDA_SCRATCH(sample_scratch) {
  return static_cast<size_t>(inputs[0].dims[0]) * static_cast<size_t>(inputs[0].dims[1]) * sizeof(float);
}

EMBER_CUDA_KERNEL(sample) {
  LaunchContext& lc = launch_context(ctx);
  if (lc.failed) return;
  const int64_t rows = inputs[0].dims[0], vocab = inputs[0].dims[1], hmax = inputs[7].dims[1];
  if (rows == 0) return;
  if (vocab > 0x7fffffff / 2 || hmax > 0x7fffffff) {
    record_failure(lc, "sample", "vocabulary too large");
    return;
  }
  if (ctx.scratch.data() == nullptr && vocab > 0) {
    record_failure(lc, "sample", "no scratch");
    return;
  }
  if (ctx.scratch.size() < static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(float)) {
    record_failure(lc, "sample", "scratch smaller than sample_scratch()");
    return;
  }
  Params p;
  p.logits = inputs[0].data_as<const float>();
  p.temperature = inputs[1].data_as<const float>();
  p.top_k = inputs[2].data_as<const int32_t>();
  p.top_p = inputs[3].data_as<const float>();
  p.penalty = inputs[4].data_as<const float>();
  p.seed = inputs[5].data_as<const int32_t>();
  p.position = inputs[6].data_as<const int32_t>();
  p.history = inputs[7].data_as<const int32_t>();
  p.history_len = inputs[8].data_as<const int32_t>();
  p.ids = outputs[0].data_as<int32_t>();
  p.logprobs = outputs[1].data_as<float>();
  p.z = reinterpret_cast<float*>(ctx.scratch.data());
  p.error_word = lc.error_word;
  p.vocab = static_cast<int>(vocab);
  p.hmax = static_cast<int>(hmax);
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, lc.stream>>>(p);
  check_launch(lc, "sample");
}

}  // namespace ember::backends::cuda
