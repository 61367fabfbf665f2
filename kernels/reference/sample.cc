// sample: repetition penalty, greedy or temperature + top-k + top-p + a Philox draw, per row
// (semantics in ops.h). The row's processed logits and an index array live in ctx.scratch
// (sample_scratch); the top-p order is a full std::sort of the kept ids, the plainest correct way.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/reference/internal.h"
#include "kernels/reference/ops.h"
#include "runtime/core/philox.h"
#include "runtime/core/sample_draw.h"

namespace ember::kernels::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr size_t kAlign = 64;

struct Row {
  const float* logits;
  int64_t vocab;
  float temperature;
  int32_t top_k;
  float top_p;
  float penalty;
  uint32_t seed;
  uint32_t position;
  const int32_t* history;
  int32_t history_len;
};

// Writes the chosen id and its log-probability. z and idx hold `vocab` elements each.
void sample_row(const Row& row, float* z, int32_t* idx, int32_t* out_id, float* out_logprob) {
  const int64_t v = row.vocab;
  for (int64_t i = 0; i < v; ++i) z[i] = row.logits[i];
  for (int32_t j = 0; j < row.history_len; ++j) {  // from the original logit: duplicates apply once
    const int32_t id = row.history[j];
    if (id < 0 || id >= v) continue;
    const float l = row.logits[id];
    z[id] = l < 0.0f ? l * row.penalty : l / row.penalty;
  }
  if (row.temperature == 0.0f) {
    int64_t best = -1;
    for (int64_t i = 0; i < v; ++i) {
      if (!std::isnan(z[i]) && (best < 0 || z[i] > z[best])) best = i;
    }
    if (best < 0) {  // every logit NaN: id 0, logprob NaN (the tempered path's answer too)
      *out_id = 0;
      *out_logprob = NAN;
      return;
    }
    const double m = z[best];
    if (m == INFINITY) {  // the first +inf wins; logprob 0, as the tempered path
      *out_id = static_cast<int32_t>(best);
      *out_logprob = 0.0f;
      return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < v; ++i) {
      if (!std::isnan(z[i])) sum += std::exp(static_cast<double>(z[i]) - m);
    }
    *out_id = static_cast<int32_t>(best);
    *out_logprob = static_cast<float>(-std::log(sum));
    return;
  }
  // Temperature; NaN never wins (treated as -inf).
  for (int64_t i = 0; i < v; ++i) {
    const float t = z[i] / row.temperature;
    z[i] = std::isnan(t) ? -INFINITY : t;
  }
  // Top-k: keep every value >= the k-th largest.
  if (row.top_k > 0 && row.top_k < v) {
    for (int64_t i = 0; i < v; ++i) idx[i] = static_cast<int32_t>(i);
    std::nth_element(idx, idx + row.top_k - 1, idx + v, [z](int32_t a, int32_t b) { return z[a] > z[b]; });
    const float kth = z[idx[row.top_k - 1]];
    for (int64_t i = 0; i < v; ++i) {
      if (z[i] < kth) z[i] = -INFINITY;
    }
  }
  double m = kNegInf;
  for (int64_t i = 0; i < v; ++i) m = std::max(m, static_cast<double>(z[i]));
  if (m == kNegInf || std::isinf(m)) {  // nothing finite to sample from, or an infinite logit
    int64_t first = 0;
    while (first + 1 < v && z[first] != static_cast<float>(m)) ++first;
    *out_id = static_cast<int32_t>(first);
    *out_logprob = m == kNegInf ? NAN : 0.0f;
    return;
  }
  // Top-p: the shortest prefix of (z descending, id ascending) with probability >= top_p.
  if (row.top_p < 1.0f) {
    int64_t n = 0;
    double total = 0.0;
    for (int64_t i = 0; i < v; ++i) {
      if (z[i] == -INFINITY) continue;
      idx[n++] = static_cast<int32_t>(i);
      total += std::exp(static_cast<double>(z[i]) - m);
    }
    std::sort(idx, idx + n, [z](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    double cum = 0.0;
    int64_t keep = n;
    for (int64_t j = 0; j < n; ++j) {
      cum += std::exp(static_cast<double>(z[idx[j]]) - m) / total;
      if (cum >= static_cast<double>(row.top_p)) {
        keep = j + 1;
        break;
      }
    }
    for (int64_t j = keep; j < n; ++j) z[idx[j]] = -INFINITY;
  }
  // The draw: ascending ids, first running sum above u * sum.
  sample_inverse_cdf(z, v, m, sample_uniform(row.seed, row.position), out_id, out_logprob);
}

size_t row_bytes(int64_t vocab) { return static_cast<size_t>(vocab) * (sizeof(float) + sizeof(int32_t)); }

}  // namespace

size_t sample_scratch(const OpAttrs&, const TensorView* inputs, size_t, const TensorView*, size_t, size_t) {
  return row_bytes(inputs[0].dims[1]) + kAlign;
}

void sample(KernelContext& ctx, const OpAttrs&, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const int64_t rows = inputs[0].dims[0], vocab = inputs[0].dims[1], hmax = inputs[7].dims[1];
  int32_t* ids = outputs[0].data_as<int32_t>();
  float* logprobs = outputs[1].data_as<float>();
  uint8_t* base = ctx.scratch.data();
  const size_t pad = base == nullptr ? 0 : (kAlign - reinterpret_cast<uintptr_t>(base) % kAlign) % kAlign;
  if (base == nullptr || ctx.scratch.size() < pad + row_bytes(vocab)) {
    // Unreachable after load (the scratch is sized by sample_scratch); never leave stale ids.
    for (int64_t r = 0; r < rows; ++r) ids[r] = -1, logprobs[r] = NAN;
    return;
  }
  float* z = reinterpret_cast<float*>(base + pad);
  int32_t* idx = reinterpret_cast<int32_t*>(z + vocab);
  for (int64_t r = 0; r < rows; ++r) {
    Row row;
    row.logits = inputs[0].data_as<const float>() + r * vocab;
    row.vocab = vocab;
    row.temperature = inputs[1].data_as<const float>()[r];
    row.top_k = inputs[2].data_as<const int32_t>()[r];
    row.top_p = inputs[3].data_as<const float>()[r];
    row.penalty = inputs[4].data_as<const float>()[r];
    row.seed = static_cast<uint32_t>(inputs[5].data_as<const int32_t>()[r]);
    row.position = static_cast<uint32_t>(inputs[6].data_as<const int32_t>()[r]);
    row.history = inputs[7].data_as<const int32_t>() + r * hmax;
    row.history_len = std::min<int32_t>(std::max<int32_t>(inputs[8].data_as<const int32_t>()[r], 0),
                                        static_cast<int32_t>(hmax));
    sample_row(row, z, idx, ids + r, logprobs + r);
  }
}

}  // namespace ember::kernels::reference
