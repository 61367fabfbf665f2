// Reference lstm and gru: the ONNX equations (tests/kernels/reference/rnn_numpy.py writes them out)
// one batch row and one step at a time, every dot product and gate in double; the state is
// rounded to f32 after each step (it lives in the f32 outputs). Semantics follow onnxruntime 1.22
// where the ONNX text leaves room: a row of length 0 ends with Y_h (Y_c) = 0, not its initial state.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/reference/ops.h"

namespace ember::kernels::reference {
namespace {

double activate(RnnActivation kind, double alpha, double beta, double x) {
  switch (kind) {
    case RnnActivation::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case RnnActivation::Tanh: return std::tanh(x);
    case RnnActivation::Relu: return x > 0.0 ? x : (x == x ? 0.0 : x);
    case RnnActivation::HardSigmoid: {
      const double v = alpha * x + beta;
      return v != v ? v : std::min(1.0, std::max(0.0, v));
    }
    case RnnActivation::LeakyRelu: return x >= 0.0 ? x : alpha * x;
    case RnnActivation::ThresholdedRelu: return x > alpha ? x : (x == x ? 0.0 : x);
    case RnnActivation::ScaledTanh: return alpha * std::tanh(beta * x);
    case RnnActivation::Affine: return alpha * x + beta;
    case RnnActivation::Elu: return x >= 0.0 ? x : alpha * std::expm1(x);
    case RnnActivation::Softsign: return x / (1.0 + std::fabs(x));
    case RnnActivation::Softplus: return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    default: return x;
  }
}

struct Act {
  RnnActivation kind;
  double alpha, beta;
  double operator()(double x) const { return activate(kind, alpha, beta, x); }
};

double dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(a[k]) * static_cast<double>(b[k]);
  return s;
}

double dot(const float* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(a[k]) * b[k];
  return s;
}

void run_rnn(KernelContext& ctx, bool lstm, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
             TensorView* outputs) {
  const int gates = lstm ? 4 : 3, per = lstm ? 3 : 2;
  const int64_t t_count = inputs[0].dims[0], b_count = inputs[0].dims[1], in = inputs[0].dims[2];
  const int64_t h = attrs.hidden_size, gh = gates * h;
  const int64_t dirs = attrs.rnn_direction == RnnDirection::Bidirectional ? 2 : 1;
  auto opt = [&](size_t i) -> const void* { return i < input_count ? inputs[i].data : nullptr; };
  const float* x = inputs[0].data_as<const float>();
  const float* w = inputs[1].data_as<const float>();
  const float* r = inputs[2].data_as<const float>();
  const float* bias = static_cast<const float*>(opt(3));
  const int32_t* lens = static_cast<const int32_t*>(opt(4));
  const float* h0 = static_cast<const float*>(opt(5));
  const float* c0 = lstm ? static_cast<const float*>(opt(6)) : nullptr;
  const float* peep = lstm ? static_cast<const float*>(opt(7)) : nullptr;
  float* y = outputs[0].data_as<float>();
  float* y_h = outputs[1].data_as<float>();
  float* y_c = lstm ? outputs[2].data_as<float>() : nullptr;
  // Per row and step: the gates' pre-activations, then (gru) r * H (rnn_scratch bytes).
  uint8_t* base = ctx.scratch.data();
  const size_t pad = base == nullptr ? 0 : (8 - reinterpret_cast<uintptr_t>(base) % 8) % 8;
  if (base == nullptr || ctx.scratch.size() < pad + static_cast<size_t>(gh + h) * sizeof(double)) {
    // Unreachable after load (the scratch is sized by rnn_scratch): NaN rather than stale data.
    for (size_t o = 0; o < (lstm ? 3u : 2u); ++o) {
      float* out = outputs[o].data_as<float>();
      std::fill(out, out + outputs[o].numel(), std::numeric_limits<float>::quiet_NaN());
    }
    return;
  }
  double* pre = reinterpret_cast<double*>(base + pad);
  double* rh = pre + gh;
  const double clip = attrs.rnn_clip > 0.0f ? attrs.rnn_clip : 0.0;
  auto clamp = [clip](double v) { return clip > 0.0 ? std::min(clip, std::max(-clip, v)) : v; };

  std::fill(y, y + outputs[0].numel(), 0.0f);
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = attrs.rnn_direction == RnnDirection::Reverse || d == 1;
    Act f{attrs.rnn_act[d * per], attrs.rnn_alpha[d * per], attrs.rnn_beta[d * per]};
    Act g{attrs.rnn_act[d * per + 1], attrs.rnn_alpha[d * per + 1], attrs.rnn_beta[d * per + 1]};
    Act hact = lstm ? Act{attrs.rnn_act[d * per + 2], attrs.rnn_alpha[d * per + 2], attrs.rnn_beta[d * per + 2]} : g;
    const float* wd = w + d * gh * in;
    const float* rd = r + d * gh * h;
    const float* wb = bias != nullptr ? bias + d * 2 * gh : nullptr;
    const float* rb = wb != nullptr ? wb + gh : nullptr;
    const float* pd = peep != nullptr ? peep + d * 3 * h : nullptr;
    for (int64_t row = 0; row < b_count; ++row) {
      float* hs = y_h + (d * b_count + row) * h;  // the running state
      float* cs = lstm ? y_c + (d * b_count + row) * h : nullptr;
      for (int64_t j = 0; j < h; ++j) {
        hs[j] = h0 != nullptr ? h0[(d * b_count + row) * h + j] : 0.0f;
        if (lstm) cs[j] = c0 != nullptr ? c0[(d * b_count + row) * h + j] : 0.0f;
      }
      const int64_t len = lens != nullptr ? lens[row] : t_count;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        const float* xt = x + (t * b_count + row) * in;
        float* yt = y + ((t * dirs + d) * b_count + row) * h;  // the new state, then copied to hs
        for (int64_t n = 0; n < gh; ++n) {
          pre[n] = dot(wd + n * in, xt, in) + (wb != nullptr ? static_cast<double>(wb[n]) : 0.0);
          const bool gru_candidate = !lstm && n >= 2 * h;  // its R term depends on r (below)
          if (!gru_candidate) pre[n] += dot(rd + n * h, hs, h) + (rb != nullptr ? static_cast<double>(rb[n]) : 0.0);
        }
        if (lstm) {
          for (int64_t j = 0; j < h; ++j) {
            const double c_old = cs[j];
            const double i_gate = f(clamp(pre[j] + (pd != nullptr ? pd[j] * c_old : 0.0)));
            const double f_gate =
                attrs.input_forget ? 1.0 - i_gate : f(clamp(pre[2 * h + j] + (pd != nullptr ? pd[2 * h + j] * c_old : 0.0)));
            const double c_new = f_gate * c_old + i_gate * g(clamp(pre[3 * h + j]));
            const double o_gate = f(clamp(pre[h + j] + (pd != nullptr ? pd[h + j] * c_new : 0.0)));
            cs[j] = static_cast<float>(c_new);
            yt[j] = static_cast<float>(o_gate * hact(c_new));
          }
        } else {
          for (int64_t j = 0; j < h; ++j) rh[j] = f(clamp(pre[h + j]));  // r
          const float* rz = rd + 2 * h * h;                            // R's candidate rows
          const float* rbh = rb != nullptr ? rb + 2 * h : nullptr;
          if (!attrs.linear_before_reset) {
            for (int64_t j = 0; j < h; ++j) rh[j] *= hs[j];
            for (int64_t j = 0; j < h; ++j) {
              pre[2 * h + j] += dot(rz + j * h, rh, h) + (rbh != nullptr ? static_cast<double>(rbh[j]) : 0.0);
            }
          } else {
            for (int64_t j = 0; j < h; ++j) {
              pre[2 * h + j] += rh[j] * (dot(rz + j * h, hs, h) + (rbh != nullptr ? static_cast<double>(rbh[j]) : 0.0));
            }
          }
          for (int64_t j = 0; j < h; ++j) {
            const double z = f(clamp(pre[j]));
            const double cand = g(clamp(pre[2 * h + j]));
            yt[j] = static_cast<float>((1.0 - z) * cand + z * static_cast<double>(hs[j]));
          }
        }
        std::memcpy(hs, yt, static_cast<size_t>(h) * sizeof(float));
      }
      if (len == 0) {  // onnxruntime: the final state of an empty row is 0
        std::fill(hs, hs + h, 0.0f);
        if (lstm) std::fill(cs, cs + h, 0.0f);
      }
    }
  }
}

}  // namespace

void lstm(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
          size_t) {
  run_rnn(ctx, true, attrs, inputs, input_count, outputs);
}

void gru(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
         size_t) {
  run_rnn(ctx, false, attrs, inputs, input_count, outputs);
}

size_t rnn_scratch(const OpAttrs& attrs, const TensorView*, size_t, const TensorView*, size_t, size_t) {
  // Up to 4 gates x H pre-activations + H (gru's r * H), doubles, plus alignment.
  return static_cast<size_t>(5 * static_cast<int64_t>(attrs.hidden_size)) * sizeof(double) + 8;
}

}  // namespace ember::kernels::reference
