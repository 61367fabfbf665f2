// The `sample` op's inverse CDF (kernels/reference/ops.h, sample step 5): how a uniform draw u in
// [0, 1) becomes a token of the processed row. Shared by kernels/reference and kernels/cpu so that
// the two libraries draw the same token with the same logprob by construction, not by copy.
// Header-only, no state, no heap; pure, so thread-safe.
#pragma once

#include <cmath>
#include <cstdint>

namespace ember {

// z[0, vocab): the row after temperature, top-k and top-p, with -inf for every filtered-out id and
// at least one kept id; m = max(z), finite (the caller answers an infinite or all -inf row without
// a draw). With w_i = exp(z_i - m) in double over the kept ids, walked in ascending id order, writes
// the first id whose running sum of w exceeds u * sum(w) (the last kept id if rounding leaves none)
// to *out_id, and log(w_id / sum(w)) = (z_id - m) - log(sum(w)) to *out_logprob. z is borrowed.
inline void sample_inverse_cdf(const float* z, int64_t vocab, double m, double u, int32_t* out_id,
                               float* out_logprob) {
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (z[i] != -INFINITY) sum += std::exp(static_cast<double>(z[i]) - m);
  }
  const double target = u * sum;
  double cum = 0.0;
  int64_t chosen = -1, last = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (z[i] == -INFINITY) continue;
    cum += std::exp(static_cast<double>(z[i]) - m);
    last = i;
    if (cum > target) {
      chosen = i;
      break;
    }
  }
  if (chosen < 0) chosen = last;
  *out_id = static_cast<int32_t>(chosen);
  *out_logprob = static_cast<float>((static_cast<double>(z[chosen]) - m) - std::log(sum));
}

}  // namespace ember
