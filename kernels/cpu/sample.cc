// sample (semantics: kernels/reference/ops.h). Rows are split over ctx.pool; each task owns one
// slot of ctx.scratch (the row's processed logits and an index array, sample_scratch bytes per
// thread). The linear passes (copy, temperature and NaN masking, maxima) are Highway vectors; the
// order-dependent parts (exp sums in double, the k-th value by nth_element, the top-p order by a
// sort on (z descending, id ascending)) are the reference's scalar code, and the ascending-id draw
// is the reference's own function (runtime/core/sample_draw.h), so a row's id and logprob equal the
// reference's bit for bit, whatever the thread count or batch.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/sample.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_SAMPLE_PLAN_
#define EMBER_KERNELS_CPU_SAMPLE_PLAN_
#include "kernels/cpu/ops.h"
#include "runtime/core/philox.h"
#include "runtime/core/sample_draw.h"
#include "runtime/core/thread_pool.h"
namespace ember::kernels::cpu_detail {
constexpr size_t kSampleAlign = 64;
inline size_t sample_row_bytes(int64_t vocab) {
  const size_t bytes = static_cast<size_t>(vocab) * (sizeof(float) + sizeof(int32_t));
  return (bytes + kSampleAlign - 1) / kSampleAlign * kSampleAlign;
}
}  // namespace ember::kernels::cpu_detail
#endif  // EMBER_KERNELS_CPU_SAMPLE_PLAN_

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// z[i] = in[i] / t, NaN -> -inf; returns max(z) (-inf for n == 0).
float temper_f32_impl(const float* in, float* z, size_t n, float t) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto vt = hn::Set(d, t), ninf = hn::Set(d, -INFINITY);
  auto m = ninf;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto v = hn::Div(hn::LoadU(d, in + i), vt);
    v = hn::IfThenElse(hn::IsNaN(v), ninf, v);
    m = hn::Max(m, v);
    hn::StoreU(v, d, z + i);
  }
  if (i < n) {
    auto v = hn::Div(LoadTail(d, in + i, n - i, -INFINITY), vt);
    v = hn::IfThenElse(hn::IsNaN(v), ninf, v);
    m = hn::Max(m, v);
    StoreTail(d, v, z + i, n - i);
  }
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// max over the non-NaN z[0, n) (-inf when there is none).
float max_f32_impl(const float* z, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto ninf = hn::Set(d, -INFINITY);
  auto m = ninf;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, z + i);
    m = hn::Max(m, hn::IfThenElse(hn::IsNaN(v), ninf, v));
  }
  if (i < n) {
    const auto v = LoadTail(d, z + i, n - i, -INFINITY);
    m = hn::Max(m, hn::IfThenElse(hn::IsNaN(v), ninf, v));
  }
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(temper_f32_impl);
EMBER_HWY_EXPORT(max_f32_impl);

namespace cpu_detail {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct SamplePlan {
  const TensorView* inputs;
  int32_t* ids;
  float* logprobs;
  uint8_t* scratch;  // kSampleAlign-aligned, one sample_row_bytes(vocab) slot per task
  size_t rows;
  size_t tasks;
};

void sample_row(const SamplePlan& p, size_t r, float* z, int32_t* idx) {
  const TensorView* in = p.inputs;
  const int64_t v = in[0].dims[1], hmax = in[7].dims[1];
  const float* logits = in[0].data_as<const float>() + static_cast<int64_t>(r) * v;
  const float temperature = in[1].data_as<const float>()[r];
  const int32_t top_k = in[2].data_as<const int32_t>()[r];
  const float top_p = in[3].data_as<const float>()[r];
  const float penalty = in[4].data_as<const float>()[r];
  const uint32_t seed = static_cast<uint32_t>(in[5].data_as<const int32_t>()[r]);
  const uint32_t position = static_cast<uint32_t>(in[6].data_as<const int32_t>()[r]);
  const int32_t* history = in[7].data_as<const int32_t>() + static_cast<int64_t>(r) * hmax;
  const int32_t history_len =
      std::min<int32_t>(std::max<int32_t>(in[8].data_as<const int32_t>()[r], 0), static_cast<int32_t>(hmax));
  const size_t n = static_cast<size_t>(v);

  const float* src = logits;
  if (history_len > 0) {  // penalized copy (from the original logit: duplicates apply once)
    std::copy(logits, logits + n, z);
    for (int32_t j = 0; j < history_len; ++j) {
      const int32_t id = history[j];
      if (id < 0 || id >= v) continue;
      const float l = logits[id];
      z[id] = l < 0.0f ? l * penalty : l / penalty;
    }
    src = z;
  }
  if (temperature == 0.0f) {
    const float m = EMBER_HWY_DISPATCH(max_f32_impl)(src, n);
    int64_t best = 0;
    while (best + 1 < v && !(src[best] == m)) ++best;  // first index of the maximum
    if (m == -INFINITY) {  // all NaN / -inf: the first non-NaN, else 0 (as the reference)
      best = 0;
      while (best < v && std::isnan(src[best])) ++best;
      if (best == v) best = 0;
    }
    if (std::isnan(src[best]) || src[best] == INFINITY) {  // every logit NaN, or a +inf: as the reference
      p.ids[r] = static_cast<int32_t>(best);
      p.logprobs[r] = std::isnan(src[best]) ? NAN : 0.0f;
      return;
    }
    double sum = 0.0;
    const double md = src[best];
    for (size_t i = 0; i < n; ++i) {
      if (!std::isnan(src[i])) sum += std::exp(static_cast<double>(src[i]) - md);
    }
    p.ids[r] = static_cast<int32_t>(best);
    p.logprobs[r] = static_cast<float>(-std::log(sum));
    return;
  }
  float mf = EMBER_HWY_DISPATCH(temper_f32_impl)(src, z, n, temperature);
  if (top_k > 0 && top_k < v) {
    for (int64_t i = 0; i < v; ++i) idx[i] = static_cast<int32_t>(i);
    std::nth_element(idx, idx + top_k - 1, idx + v, [z](int32_t a, int32_t b) { return z[a] > z[b]; });
    const float kth = z[idx[top_k - 1]];
    for (size_t i = 0; i < n; ++i) {
      if (z[i] < kth) z[i] = -INFINITY;
    }
    mf = EMBER_HWY_DISPATCH(max_f32_impl)(z, n);
  }
  const double m = mf;
  if (std::isinf(m)) {  // nothing finite to sample from, or an infinite logit
    int64_t first = 0;
    while (first + 1 < v && z[first] != mf) ++first;
    p.ids[r] = static_cast<int32_t>(first);
    p.logprobs[r] = m == kNegInf ? NAN : 0.0f;
    return;
  }
  if (top_p < 1.0f) {
    int64_t count = 0;
    double total = 0.0;
    for (int64_t i = 0; i < v; ++i) {
      if (z[i] == -INFINITY) continue;
      idx[count++] = static_cast<int32_t>(i);
      total += std::exp(static_cast<double>(z[i]) - m);
    }
    const auto before = [z](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
    // The nucleus is a prefix of the order (z descending, id ascending). Try the prefix of tokens
    // with z >= m - 16 first (at most a quarter of them): every token above a threshold, ties
    // included, is exactly the first tokens of the full order, so if the cumulative sum reaches
    // top_p inside it, sorting only it gives the reference's result bit for bit; otherwise sort all.
    int64_t sorted = count;
    const float threshold = static_cast<float>(m - 16.0);
    int64_t head = 0;
    for (int64_t j = 0; j < count; ++j) head += z[idx[j]] >= threshold ? 1 : 0;
    if (head < count && head <= count / 4) {
      std::partition(idx, idx + count, [z, threshold](int32_t a) { return z[a] >= threshold; });
      sorted = head;
    }
    int64_t keep = -1;
    for (int pass = 0; pass < 2 && keep < 0; ++pass) {
      std::sort(idx, idx + sorted, before);
      double cum = 0.0;
      for (int64_t j = 0; j < sorted; ++j) {
        cum += std::exp(static_cast<double>(z[idx[j]]) - m) / total;
        if (cum >= static_cast<double>(top_p)) {
          keep = j + 1;
          break;
        }
      }
      if (keep < 0 && sorted == count) keep = count;
      sorted = count;  // the head did not reach top_p: the full order
    }
    for (int64_t j = keep; j < count; ++j) z[idx[j]] = -INFINITY;
  }
  sample_inverse_cdf(z, v, m, sample_uniform(seed, position), p.ids + r, p.logprobs + r);
}

void sample_task(void* arg, size_t t) {
  const SamplePlan& p = *static_cast<const SamplePlan*>(arg);
  const size_t begin = p.rows * t / p.tasks, end = p.rows * (t + 1) / p.tasks;
  const int64_t vocab = p.inputs[0].dims[1];
  float* z = reinterpret_cast<float*>(p.scratch + t * sample_row_bytes(vocab));
  int32_t* idx = reinterpret_cast<int32_t*>(z + vocab);
  for (size_t r = begin; r < end; ++r) sample_row(p, r, z, idx);
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

size_t sample_scratch(const OpAttrs&, const TensorView* inputs, size_t, const TensorView*, size_t, size_t threads) {
  const size_t slots = threads < 1 ? 1 : threads;
  return slots * cpu_detail::sample_row_bytes(inputs[0].dims[1]) + cpu_detail::kSampleAlign;
}

void sample(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  using cpu_detail::kSampleAlign;
  cpu_detail::SamplePlan p{};
  p.inputs = inputs;
  p.ids = outputs[0].data_as<int32_t>();
  p.logprobs = outputs[1].data_as<float>();
  p.rows = static_cast<size_t>(inputs[0].dims[0]);
  if (p.rows == 0) return;
  uint8_t* base = ctx.scratch.data();
  const size_t pad = base == nullptr ? 0 : (kSampleAlign - reinterpret_cast<uintptr_t>(base) % kSampleAlign) % kSampleAlign;
  const size_t slot = cpu_detail::sample_row_bytes(inputs[0].dims[1]);
  const size_t slots = base == nullptr || ctx.scratch.size() < pad ? 0 : (ctx.scratch.size() - pad) / slot;
  if (slots == 0) {
    // Unreachable after load (the scratch is sized by sample_scratch); never leave stale ids.
    for (size_t r = 0; r < p.rows; ++r) p.ids[r] = -1, p.logprobs[r] = NAN;
    return;
  }
  p.scratch = base + pad;
  const size_t threads = ctx.pool != nullptr ? ctx.pool->thread_count() : 1;
  p.tasks = std::min(std::min(p.rows, slots), threads);
  parallel_for(ctx.pool, p.tasks, cpu_detail::sample_task, &p);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
