// f32 lstm / gru, fused (the reference's semantics, kernels/reference/rnn.cc; not an unrolled graph).
//
// Per call, in ctx.scratch (rnn_scratch bytes):
//  1. the input projections of every step at once, one packed GEMM per direction (linear_packed.cc):
//     xproj[d] = X [T B, I] . W[d]^T + bias, where bias = Wb + Rb (GRU with linear_before_reset:
//     Wb + Rb except the candidate's Rb, which stays inside r * (.));
//  2. R[d] transposed to [H, G H], so a step's recurrent GEMM h . R^T runs along hidden units;
//  3. per step, one parallel pass over (direction, block of 32 hidden units): for every batch row
//     still inside its sequence, the G gate accumulators of the block start from xproj and take
//     h[b, k] * R^T[k, :] for k = 0..H-1 in order (FMA), then the activations and the state update
//     are applied in registers, writing Y, the next h (ping-pong buffers) and c. GRU without
//     linear_before_reset needs r * h of every unit before its candidate: two passes per step.
// Work splits over directions and hidden units, never over k, and no unit's operations depend on
// the split: results are bitwise identical for any thread count. Not bitwise equal to the
// reference (f32 FMA chains, hwy's Exp / Tanh / Log1p): within the f32 tolerance.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/rnn.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_RNN_RUN_
#define EMBER_KERNELS_CPU_RNN_RUN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
namespace ember::kernels::cpu_detail {

constexpr int64_t kRnnBlock = 32;  // hidden units per work unit
constexpr size_t kRnnAlign = 64;

struct RnnAct {
  RnnActivation kind;
  float alpha, beta;
};

struct RnnRun {
  bool lstm, lbr, input_forget;
  int gates;
  int64_t t_count, b_count, h, dirs, blocks;
  int64_t step;  // the step being computed
  int pass;      // gru without linear_before_reset: 0 = z, r * h; 1 = candidate and update
  float clip;    // <= 0: none
  const int32_t* lens;  // null: every row has T steps
  bool reverse[2];
  const float* xproj_dir[2];  // [T B, G H] per direction
  const float* rt_dir[2];     // [H, G H] per direction (R transposed)
  const float* rb_cand;       // direction 0's [H] candidate Rb (gru linear_before_reset), else null
  int64_t rb_cand_stride;     // floats from direction 0's to direction 1's
  const float* peep;    // [D][3 H] or null
  float* h_cur;         // [D][B, H]
  float* h_next;        // [D][B, H]
  float* c;             // [D][B, H] (lstm)
  float* aux;           // [D][B, 2 H]: gru's z and r * h between the passes
  float* y;             // [T, D, B, H]
  RnnAct act[kMaxRnnActivations];
  int per;
};

}  // namespace ember::kernels::cpu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::RnnAct;
using cpu_detail::RnnRun;

using RnnTag = hn::ScalableTag<float>;
using RnnV = hn::Vec<RnnTag>;

// Not inlined: the switch with its Exp / Tanh / Expm1 / Log1p bodies, inlined at each of the ~10 call
// sites per target, made clang-14 under ASan + UBSan (the fuzz build) take more than 24 GB.
HWY_NOINLINE RnnV RnnActivate(RnnTag d, const RnnAct& a, RnnV x) {
  const RnnV zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  const RnnV alpha = hn::Set(d, a.alpha), beta = hn::Set(d, a.beta);
  const auto nan = hn::IsNaN(x);
  switch (a.kind) {
    case RnnActivation::Sigmoid: {
      const RnnV e = hn::Exp(d, ExpArg(d, hn::Neg(hn::Abs(x))));
      const RnnV r = hn::Div(one, hn::Add(one, e));
      return hn::IfThenElse(nan, x, hn::IfThenElse(hn::Lt(x, zero), hn::Mul(e, r), r));
    }
    case RnnActivation::Tanh: return hn::IfThenElse(nan, x, hn::Tanh(d, TanhArg(d, x)));
    case RnnActivation::Relu: return ReluKeepNaN(d, x);
    case RnnActivation::HardSigmoid: return ClampKeepNaN(hn::MulAdd(alpha, x, beta), zero, one);
    case RnnActivation::LeakyRelu: return hn::IfThenElse(hn::Lt(x, zero), hn::Mul(alpha, x), x);
    case RnnActivation::ThresholdedRelu: return hn::IfThenElse(hn::Gt(x, alpha), x, hn::IfThenElse(nan, x, zero));
    case RnnActivation::ScaledTanh: {
      const RnnV bx = hn::Mul(beta, x);
      return hn::IfThenElse(nan, x, hn::Mul(alpha, hn::Tanh(d, TanhArg(d, bx))));
    }
    case RnnActivation::Affine: return hn::MulAdd(alpha, x, beta);
    case RnnActivation::Elu: {
      const RnnV em1 = hn::Expm1(d, ExpArg(d, hn::Min(x, zero)));
      return hn::IfThenElse(hn::Lt(x, zero), hn::Mul(alpha, em1), x);
    }
    case RnnActivation::Softsign: return hn::Div(x, hn::Add(one, hn::Abs(x)));
    case RnnActivation::Softplus: {
      // max(x, 0) + log1p(exp(-|x|)): no overflow for large x.
      const RnnV l = hn::Log1p(d, hn::Exp(d, ExpArg(d, hn::Neg(hn::Abs(x)))));
      return hn::IfThenElse(nan, x, hn::Add(hn::Max(x, zero), l));
    }
    default: return x;
  }
}

HWY_INLINE RnnV RnnClip(RnnTag d, float clip, RnnV x) {
  return clip > 0.0f ? ClampKeepNaN(x, hn::Set(d, -clip), hn::Set(d, clip)) : x;
}

HWY_INLINE RnnV LoadCount(RnnTag d, const float* p, size_t n, size_t lanes) {
  return n == lanes ? hn::LoadU(d, p) : LoadTail(d, p, n);
}
HWY_INLINE void StoreCount(RnnTag d, RnnV v, float* p, size_t n, size_t lanes) {
  if (n == lanes) {
    hn::StoreU(v, d, p);
  } else {
    StoreTail(d, v, p, n);
  }
}

// acc[g] += sum_k src[k] * rt[k, g H + j .. + n) for the gates g in [g0, g1), k in order.
HWY_INLINE void RnnRecurrent(RnnTag d, const float* rt, int64_t gh, int64_t h, int64_t j, size_t n, size_t lanes,
                             const float* src, int g0, int g1, RnnV* acc) {
  for (int64_t k = 0; k < h; ++k) {
    const RnnV hk = hn::Set(d, src[k]);
    const float* row = rt + k * gh + j;
    for (int g = g0; g < g1; ++g) acc[g] = hn::MulAdd(hk, LoadCount(d, row + g * h, n, lanes), acc[g]);
  }
}

// Units [begin, end) of (direction, block of hidden units) for run.step.
void RnnStep(const RnnRun& run, size_t begin, size_t end) {
  const RnnTag d;
  const size_t lanes = hn::Lanes(d);
  const int64_t h = run.h, gh = run.gates * h, bc = run.b_count;
  const RnnV one = hn::Set(d, 1.0f);
  for (size_t u = begin; u < end; ++u) {
    const int64_t dir = static_cast<int64_t>(u) / run.blocks;
    const int64_t j0 = (static_cast<int64_t>(u) % run.blocks) * cpu_detail::kRnnBlock;
    const int64_t j1 = std::min(h, j0 + cpu_detail::kRnnBlock);
    const bool reverse = run.reverse[dir];
    const RnnAct* act = run.act + dir * run.per;
    const float* xp = run.xproj_dir[dir];
    const float* rt = run.rt_dir[dir];
    const float* peep = run.peep != nullptr ? run.peep + dir * 3 * h : nullptr;
    const float* rbc = run.rb_cand != nullptr ? run.rb_cand + dir * run.rb_cand_stride : nullptr;
    const float* hc = run.h_cur + dir * bc * h;
    float* hnx = run.h_next + dir * bc * h;
    float* cc = run.c != nullptr ? run.c + dir * bc * h : nullptr;
    float* aux = run.aux != nullptr ? run.aux + dir * bc * 2 * h : nullptr;
    for (int64_t b = 0; b < bc; ++b) {
      const int64_t len = run.lens != nullptr ? run.lens[b] : run.t_count;
      const float* hrow = hc + b * h;
      float* hout = hnx + b * h;
      if (run.step >= len) {  // past the row's end: the state stays (Y was zeroed)
        if (run.pass == 0) std::memcpy(hout + j0, hrow + j0, static_cast<size_t>(j1 - j0) * sizeof(float));
        continue;
      }
      const int64_t t = reverse ? len - 1 - run.step : run.step;
      const float* xrow = xp + (t * bc + b) * gh;
      float* yrow = run.y + ((t * run.dirs + dir) * bc + b) * h;
      for (int64_t j = j0; j < j1; j += static_cast<int64_t>(lanes)) {
        const size_t n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(lanes), j1 - j));
        RnnV acc[4];
        if (run.lstm) {
          for (int g = 0; g < 4; ++g) acc[g] = LoadCount(d, xrow + g * h + j, n, lanes);
          RnnRecurrent(d, rt, gh, h, j, n, lanes, hrow, 0, 4, acc);
          float* crow = cc + b * h + j;
          const RnnV c_old = LoadCount(d, crow, n, lanes);
          RnnV pi = acc[0], pf = acc[2];
          if (peep != nullptr) {
            pi = hn::MulAdd(LoadCount(d, peep + j, n, lanes), c_old, pi);
            pf = hn::MulAdd(LoadCount(d, peep + 2 * h + j, n, lanes), c_old, pf);
          }
          const RnnV ig = RnnActivate(d, act[0], RnnClip(d, run.clip, pi));
          const RnnV fg = run.input_forget ? hn::Sub(one, ig) : RnnActivate(d, act[0], RnnClip(d, run.clip, pf));
          const RnnV cand = RnnActivate(d, act[1], RnnClip(d, run.clip, acc[3]));
          const RnnV c_new = hn::MulAdd(fg, c_old, hn::Mul(ig, cand));
          RnnV po = acc[1];
          if (peep != nullptr) po = hn::MulAdd(LoadCount(d, peep + h + j, n, lanes), c_new, po);
          const RnnV og = RnnActivate(d, act[0], RnnClip(d, run.clip, po));
          const RnnV h_new = hn::Mul(og, RnnActivate(d, act[2], c_new));
          StoreCount(d, c_new, crow, n, lanes);
          StoreCount(d, h_new, hout + j, n, lanes);
          StoreCount(d, h_new, yrow + j, n, lanes);
        } else if (run.lbr) {
          for (int g = 0; g < 3; ++g) acc[g] = LoadCount(d, xrow + g * h + j, n, lanes);
          RnnV hr = rbc != nullptr ? LoadCount(d, rbc + j, n, lanes) : hn::Zero(d);
          RnnV rec[4] = {acc[0], acc[1], hr, hr};
          RnnRecurrent(d, rt, gh, h, j, n, lanes, hrow, 0, 3, rec);
          const RnnV z = RnnActivate(d, act[0], RnnClip(d, run.clip, rec[0]));
          const RnnV r = RnnActivate(d, act[0], RnnClip(d, run.clip, rec[1]));
          const RnnV cand = RnnActivate(d, act[1], RnnClip(d, run.clip, hn::MulAdd(r, rec[2], acc[2])));
          const RnnV h_old = LoadCount(d, hrow + j, n, lanes);
          const RnnV h_new = hn::MulAdd(z, h_old, hn::Mul(hn::Sub(one, z), cand));
          StoreCount(d, h_new, hout + j, n, lanes);
          StoreCount(d, h_new, yrow + j, n, lanes);
        } else if (run.pass == 0) {  // z and r * h of the block
          for (int g = 0; g < 2; ++g) acc[g] = LoadCount(d, xrow + g * h + j, n, lanes);
          RnnRecurrent(d, rt, gh, h, j, n, lanes, hrow, 0, 2, acc);
          const RnnV z = RnnActivate(d, act[0], RnnClip(d, run.clip, acc[0]));
          const RnnV r = RnnActivate(d, act[0], RnnClip(d, run.clip, acc[1]));
          StoreCount(d, z, aux + b * 2 * h + j, n, lanes);
          StoreCount(d, hn::Mul(r, LoadCount(d, hrow + j, n, lanes)), aux + b * 2 * h + h + j, n, lanes);
        } else {  // the candidate from (r * h) . Rh^T, then the update
          acc[2] = LoadCount(d, xrow + 2 * h + j, n, lanes);
          RnnRecurrent(d, rt, gh, h, j, n, lanes, aux + b * 2 * h + h, 2, 3, acc);
          const RnnV z = LoadCount(d, aux + b * 2 * h + j, n, lanes);
          const RnnV cand = RnnActivate(d, act[1], RnnClip(d, run.clip, acc[2]));
          const RnnV h_old = LoadCount(d, hrow + j, n, lanes);
          const RnnV h_new = hn::MulAdd(z, h_old, hn::Mul(hn::Sub(one, z), cand));
          StoreCount(d, h_new, hout + j, n, lanes);
          StoreCount(d, h_new, yrow + j, n, lanes);
        }
      }
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(RnnStep);

namespace cpu_detail {

bool linear_packed(KernelContext& ctx, const float* x, const float* w, const float* bias, float* c, int64_t m,
                   int64_t n, int64_t k);

namespace {

constexpr double kMinParallelFlops = 1 << 16;

void step_units(const void* run, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(RnnStep)(*static_cast<const RnnRun*>(run), begin, end);
}

size_t round_floats(int64_t n) {
  return (static_cast<size_t>(n) * sizeof(float) + kRnnAlign - 1) / kRnnAlign * kRnnAlign;
}

struct Shapes {
  bool lstm;
  int gates;
  int64_t t, b, in, h, dirs;
};

Shapes shapes_of(bool lstm, const OpAttrs& attrs, const TensorView* inputs) {
  Shapes s;
  s.lstm = lstm;
  s.gates = lstm ? 4 : 3;
  s.t = inputs[0].dims[0];
  s.b = inputs[0].dims[1];
  s.in = inputs[0].dims[2];
  s.h = attrs.hidden_size;
  s.dirs = attrs.rnn_direction == RnnDirection::Bidirectional ? 2 : 1;
  return s;
}

// The buffers before linear_packed's (which takes the rest of the scratch).
size_t own_bytes(const Shapes& s) {
  const int64_t gh = s.gates * s.h;
  return s.dirs * (round_floats(s.t * s.b * gh) + round_floats(gh) + round_floats(s.h * gh) + round_floats(s.h) +
                   2 * round_floats(s.b * s.h) + round_floats(s.b * s.h) + round_floats(2 * s.b * s.h));
}

size_t scratch_bytes(const Shapes& s, const TensorView* inputs) {
  TensorView x2d = inputs[0];
  x2d.rank = 2;
  x2d.dims[0] = s.t * s.b;
  x2d.dims[1] = s.in;
  return own_bytes(s) + kRnnAlign + cpu::linear_scratch(OpAttrs{}, &x2d, 1, nullptr, 0, 1);
}

void run_rnn(KernelContext& ctx, bool lstm, const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
             TensorView* outputs) {
  const Shapes s = shapes_of(lstm, attrs, inputs);
  const int64_t h = s.h, gh = s.gates * h, bc = s.b;
  auto opt = [&](size_t i) -> const void* { return i < input_count ? inputs[i].data : nullptr; };
  const float* x = inputs[0].data_as<const float>();
  const float* w = inputs[1].data_as<const float>();
  const float* r = inputs[2].data_as<const float>();
  const float* bias = static_cast<const float*>(opt(3));
  const int32_t* lens = static_cast<const int32_t*>(opt(4));
  const float* h0 = static_cast<const float*>(opt(5));
  const float* c0 = lstm ? static_cast<const float*>(opt(6)) : nullptr;
  float* y = outputs[0].data_as<float>();
  float* y_h = outputs[1].data_as<float>();
  float* y_c = lstm ? outputs[2].data_as<float>() : nullptr;
  const size_t need = scratch_bytes(s, inputs);
  uint8_t* base = ctx.scratch.data();
  if (base == nullptr || ctx.scratch.size() < need) {
    // Unreachable after load (rnn_scratch sizes it): NaN rather than stale data.
    for (size_t o = 0; o < (lstm ? 3u : 2u); ++o) {
      float* out = outputs[o].data_as<float>();
      std::fill(out, out + outputs[o].numel(), std::numeric_limits<float>::quiet_NaN());
    }
    return;
  }
  uint8_t* p = base + (kRnnAlign - reinterpret_cast<uintptr_t>(base) % kRnnAlign) % kRnnAlign;
  auto take = [&p](int64_t floats) {
    float* f = reinterpret_cast<float*>(p);
    p += round_floats(floats);
    return f;
  };
  float *xproj[2], *bsum[2], *rt[2], *rbc[2];
  for (int64_t dir = 0; dir < s.dirs; ++dir) {
    xproj[dir] = take(s.t * bc * gh);
    bsum[dir] = take(gh);
    rt[dir] = take(h * gh);
    rbc[dir] = take(h);
  }
  float* h_a = take(s.dirs * bc * h);
  float* h_b = take(s.dirs * bc * h);
  float* cbuf = take(s.dirs * bc * h);
  float* aux = take(s.dirs * 2 * bc * h);
  KernelContext gemm_ctx = ctx;
  gemm_ctx.scratch = Span<uint8_t>(p, static_cast<size_t>(base + ctx.scratch.size() - p));

  const bool lbr = !lstm && attrs.linear_before_reset;
  for (int64_t dir = 0; dir < s.dirs; ++dir) {
    const float* wb = bias != nullptr ? bias + dir * 2 * gh : nullptr;
    for (int64_t n = 0; n < gh; ++n) {
      const bool keep_rb_inside = lbr && n >= 2 * h;  // r * (h Rh^T + Rbh)
      bsum[dir][n] = wb == nullptr ? 0.0f : (keep_rb_inside ? wb[n] : wb[n] + wb[gh + n]);
    }
    for (int64_t j = 0; j < h; ++j) rbc[dir][j] = wb != nullptr ? wb[gh + 2 * h + j] : 0.0f;
    const float* wd = w + dir * gh * s.in;
    if (s.t * bc > 0 && !linear_packed(gemm_ctx, x, wd, bsum[dir], xproj[dir], s.t * bc, gh, s.in)) {
      // s.in == 0 (linear_packed takes k > 0): the projection is the bias alone.
      for (int64_t m = 0; m < s.t * bc; ++m) std::memcpy(xproj[dir] + m * gh, bsum[dir], gh * sizeof(float));
    }
    const float* rd = r + dir * gh * h;
    for (int64_t n = 0; n < gh; ++n)
      for (int64_t k = 0; k < h; ++k) rt[dir][k * gh + n] = rd[n * h + k];
  }
  for (int64_t i = 0; i < s.dirs * bc * h; ++i) {
    h_a[i] = h0 != nullptr ? h0[i] : 0.0f;
    cbuf[i] = c0 != nullptr ? c0[i] : 0.0f;
  }
  std::fill(y, y + outputs[0].numel(), 0.0f);

  RnnRun run{};
  run.lstm = lstm;
  run.lbr = lbr;
  run.input_forget = lstm && attrs.input_forget;
  run.gates = s.gates;
  run.t_count = s.t;
  run.b_count = bc;
  run.h = h;
  run.dirs = s.dirs;
  run.blocks = (h + kRnnBlock - 1) / kRnnBlock;
  run.clip = attrs.rnn_clip;
  run.lens = lens;
  run.peep = lstm ? static_cast<const float*>(opt(7)) : nullptr;
  run.per = lstm ? 3 : 2;
  for (int k = 0; k < attrs.rnn_act_count && k < kMaxRnnActivations; ++k) {
    run.act[k] = RnnAct{attrs.rnn_act[k], attrs.rnn_alpha[k], attrs.rnn_beta[k]};
  }
  for (int64_t dir = 0; dir < s.dirs; ++dir) {
    run.reverse[dir] = attrs.rnn_direction == RnnDirection::Reverse || dir == 1;
    run.xproj_dir[dir] = xproj[dir];
    run.rt_dir[dir] = rt[dir];
  }
  run.rb_cand = lbr ? rbc[0] : nullptr;
  run.rb_cand_stride = s.dirs == 2 ? rbc[1] - rbc[0] : 0;
  run.c = lstm ? cbuf : nullptr;
  run.aux = aux;
  run.y = y;
  const size_t units = static_cast<size_t>(s.dirs * run.blocks);
  const double flops = 2.0 * double(bc) * double(gh) * double(h) * double(s.dirs);
  float* cur = h_a;
  float* next = h_b;
  for (int64_t step = 0; step < s.t; ++step) {
    run.step = step;
    run.h_cur = cur;
    run.h_next = next;
    for (int pass = 0; pass < (lstm || lbr ? 1 : 2); ++pass) {
      run.pass = pass;
      run_units(ctx.pool, units, flops, kMinParallelFlops, &run, step_units);
    }
    std::swap(cur, next);
  }
  // The final state; onnxruntime gives an empty row (length 0) a zero state, not its initial one.
  for (int64_t dir = 0; dir < s.dirs; ++dir) {
    for (int64_t b = 0; b < bc; ++b) {
      const bool empty = (lens != nullptr ? lens[b] : s.t) == 0;
      const int64_t o = (dir * bc + b) * h;
      for (int64_t j = 0; j < h; ++j) {
        y_h[o + j] = empty ? 0.0f : cur[o + j];
        if (lstm) y_c[o + j] = empty ? 0.0f : cbuf[o + j];
      }
    }
  }
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

void lstm(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
          size_t) {
  cpu_detail::run_rnn(ctx, true, attrs, inputs, input_count, outputs);
}

void gru(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t input_count, TensorView* outputs,
         size_t) {
  cpu_detail::run_rnn(ctx, false, attrs, inputs, input_count, outputs);
}

size_t lstm_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t, const TensorView*, size_t, size_t) {
  return cpu_detail::scratch_bytes(cpu_detail::shapes_of(true, attrs, inputs), inputs);
}

size_t gru_scratch(const OpAttrs& attrs, const TensorView* inputs, size_t, const TensorView*, size_t, size_t) {
  return cpu_detail::scratch_bytes(cpu_detail::shapes_of(false, attrs, inputs), inputs);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
