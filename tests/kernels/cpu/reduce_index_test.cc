// kernels/cpu's reduce_max / reduce_min, argmax / argmin and group_norm (issue 17) against their
// reference twins on every compiled Highway target: sizes 0, 1, lanes - 1, lanes, lanes + 1 and
// large along the reduced axis, every axis pattern (last axis, a middle block, split axes), NaN /
// ±inf / ±0 at every lane position; reductions and arg ops bit for bit, group_norm within f32
// rounding; 1, 2 and 3 threads bitwise equal.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "runtime/core/thread_pool.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Lanes of the widest target compiled here (16 f32 on AVX-512): sizes below bracket every width.
size_t Lanes() { return 16; }

// Runs the kernel with 1, 2 and 3 threads and the reference; every result must be the reference's
// bytes (exact = true) or within tol, and the thread counts bitwise equal.
void Check(OpCode op, KernelFn cpu, KernelFn reference, const OpAttrs& attrs, const std::vector<TensorView>& in,
           bool exact, Tolerance tol = kExact) {
  static FixedThreadPool pool2(2);
  Tensor expected;
  Shape(op, attrs, in.data(), in.size(), &expected);
  RunKernel(reference, attrs, in.data(), in.size(), &expected);
  Tensor results[3];
  for (int t = 0; t < 3; ++t) {
    Shape(op, attrs, in.data(), in.size(), &results[t]);
    KernelContext ctx;
    ctx.pool = t == 0 ? nullptr : t == 1 ? static_cast<ThreadPool*>(&pool2) : Pool(3);
    cpu(ctx, attrs, in.data(), in.size(), &results[t].view, 1);
  }
  for (int t = 0; t < 3; ++t) {
    if (exact) {
      EXPECT_TRUE(BytesEqual(results[t], expected)) << to_string(op) << " " << DimsText(in[0]) << " threads " << t + 1;
    } else {
      EXPECT_TRUE(AllClose(results[t], expected, tol)) << to_string(op) << " " << DimsText(in[0]) << " threads " << t + 1;
    }
    EXPECT_TRUE(BytesEqual(results[t], results[0])) << to_string(op) << " threads " << t + 1 << " vs 1";
  }
}

OpAttrs reduce_attrs(std::initializer_list<int> axes, bool keepdims) {
  OpAttrs a;
  a.kind = AttrKind::Reduce;
  a.keepdims = keepdims;
  a.count = static_cast<uint8_t>(axes.size());
  int i = 0;
  for (int ax : axes) a.axes[i++] = ax;
  return a;
}

OpAttrs arg_attrs(int axis, bool keepdims, bool last) {
  OpAttrs a;
  a.kind = AttrKind::Arg;
  a.axis = axis;
  a.keepdims = keepdims;
  a.select_last_index = last;
  return a;
}

// Random values with special ones sprinkled in (every lane position gets some over the sizes).
Tensor Special(std::vector<int64_t> dims, uint32_t seed, bool with_nan) {
  Tensor t = Random(std::move(dims), seed, -4.0f, 4.0f);
  std::mt19937 rng(seed * 7 + 1);
  const float specials[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 4.0f, -4.0f};
  for (size_t i = 0; i < t.numel(); ++i) {
    if (rng() % 5 != 0) continue;
    const float v = specials[rng() % 7];
    if (!with_nan && std::isnan(v)) continue;
    t.f()[i] = v;
  }
  return t;
}

// 1, lanes - 1, lanes, lanes + 1 for 4, 8 and 16 lanes, and large.
std::vector<int64_t> Sizes() { return {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 35, 1000}; }

class ReduceIndexTest : public TargetTest {};

TEST_P(ReduceIndexTest, ReduceMaxMinMatchBitwise) {
  for (bool max : {true, false}) {
    const OpCode op = max ? OpCode::ReduceMax : OpCode::ReduceMin;
    const KernelFn cpu_fn = max ? cpu::reduce_max : cpu::reduce_min;
    const KernelFn ref_fn = max ? ref::reduce_max : ref::reduce_min;
    for (int64_t n : Sizes()) {
      for (bool special : {false, true}) {
        const uint32_t seed = static_cast<uint32_t>(n) * 3 + special;
        // Last axis (softmax-like): contiguous rows.
        Tensor x = special ? Special({3, n}, seed, true) : Random({3, n}, seed);
        Check(op, cpu_fn, ref_fn, reduce_attrs({-1}, true), {x.view}, true);
        // A middle block (pooling-like: [N, C, H, W] over H, W; channels over C).
        Tensor y = special ? Special({2, 3, n, 2}, seed + 1, true) : Random({2, 3, n, 2}, seed + 1);
        Check(op, cpu_fn, ref_fn, reduce_attrs({1}, false), {y.view}, true);
        Check(op, cpu_fn, ref_fn, reduce_attrs({1, 2}, true), {y.view}, true);
        // Split axes (scalar walk) and everything.
        Check(op, cpu_fn, ref_fn, reduce_attrs({0, 2}, false), {y.view}, true);
        Check(op, cpu_fn, ref_fn, reduce_attrs({}, false), {y.view}, true);
      }
    }
    // Size-1 dims between the blocks do not break the contiguous layout; empty extents give ±inf.
    Tensor z = Special({2, 1, 7, 1, 5}, 11, true);
    Check(op, cpu_fn, ref_fn, reduce_attrs({2, 3, 4}, false), {z.view}, true);
    Check(op, cpu_fn, ref_fn, reduce_attrs({1, 2}, false), {z.view}, true);
    Tensor empty(ScalarType::F32, {3, 0, 2});
    Check(op, cpu_fn, ref_fn, reduce_attrs({1}, false), {empty.view}, true);
    Check(op, cpu_fn, ref_fn, reduce_attrs({0}, false), {empty.view}, true);
  }
}

TEST_P(ReduceIndexTest, SignedZerosAndNaNAreOrderIndependent) {
  const size_t n = 3 * Lanes() + 1;
  for (size_t at = 0; at < n; ++at) {
    Tensor x(ScalarType::F32, {2, static_cast<int64_t>(n)});
    for (size_t i = 0; i < n; ++i) {
      x.f()[i] = -0.0f;
      x.f()[n + i] = -1.0f;
    }
    x.f()[at] = 0.0f;     // row 0: one +0 among -0s: max +0, min -0
    x.f()[n + at] = kNaN;  // row 1: one NaN: NaN either way
    for (bool max : {true, false}) {
      Tensor out(ScalarType::F32, {2});
      RunKernel(max ? cpu::reduce_max : cpu::reduce_min, reduce_attrs({1}, false), &x.view, 1, &out);
      EXPECT_EQ(std::signbit(out.f()[0]), !max) << "position " << at;
      EXPECT_EQ(out.f()[0], 0.0f);
      EXPECT_TRUE(std::isnan(out.f()[1])) << "position " << at;
    }
  }
}

TEST_P(ReduceIndexTest, ArgMaxMinMatchBitwise) {
  for (bool max : {true, false}) {
    const OpCode op = max ? OpCode::ArgMax : OpCode::ArgMin;
    const KernelFn cpu_fn = max ? cpu::argmax : cpu::argmin;
    const KernelFn ref_fn = max ? ref::argmax : ref::argmin;
    for (int64_t n : Sizes()) {
      for (int kind = 0; kind < 3; ++kind) {  // random, special values with NaN, ties (small integers)
        const uint32_t seed = static_cast<uint32_t>(n) * 5 + static_cast<uint32_t>(kind);
        Tensor x = kind == 1 ? Special({4, n}, seed, true) : Random({4, n}, seed);
        Tensor y = kind == 1 ? Special({2, n, 9}, seed + 2, true) : Random({2, n, 9}, seed + 2);
        if (kind == 2) {
          for (size_t i = 0; i < x.numel(); ++i) x.f()[i] = std::floor(x.f()[i]);
          for (size_t i = 0; i < y.numel(); ++i) y.f()[i] = std::floor(y.f()[i]);
        }
        for (bool last : {false, true}) {
          Check(op, cpu_fn, ref_fn, arg_attrs(-1, false, last), {x.view}, true);
          Check(op, cpu_fn, ref_fn, arg_attrs(1, true, last), {y.view}, true);
          Check(op, cpu_fn, ref_fn, arg_attrs(0, false, last), {y.view}, true);
        }
      }
    }
    // A NaN at index 0 is the answer; elsewhere it is skipped (onnxruntime's scan).
    const size_t n = 2 * Lanes() + 1;
    for (size_t at = 0; at < n; ++at) {
      Tensor x = Random({1, static_cast<int64_t>(n)}, static_cast<uint32_t>(at));
      x.f()[at] = kNaN;
      Tensor out(ScalarType::I64, {1});
      RunKernel(cpu_fn, arg_attrs(1, false, false), &x.view, 1, &out);
      Tensor want(ScalarType::I64, {1});
      RunKernel(ref_fn, arg_attrs(1, false, false), &x.view, 1, &want);
      EXPECT_TRUE(BytesEqual(out, want)) << "NaN at " << at;
      if (at == 0) EXPECT_EQ(out.view.data_as<int64_t>()[0], 0);
      if (at != 0) EXPECT_NE(out.view.data_as<int64_t>()[0], static_cast<int64_t>(at));
    }
  }
}

TEST_P(ReduceIndexTest, GroupNormMatchesReference) {
  for (int64_t n : Sizes()) {
    const uint32_t seed = static_cast<uint32_t>(n);
    for (int64_t groups : {1, 2, 4}) {
      OpAttrs a;
      a.kind = AttrKind::GroupNorm;
      a.groups = static_cast<int32_t>(groups);
      a.epsilon = 1e-5f;
      Tensor x = Random({2, 4, n}, seed, -3.0f, 5.0f);
      Tensor scale = Random({4}, seed + 1), bias = Random({4}, seed + 2);
      Check(OpCode::GroupNorm, cpu::group_norm, ref::group_norm, a, {x.view, scale.view, bias.view}, false,
            {1e-5f, 1e-5f});
      Tensor img = Random({1, 4, 3, n}, seed + 3, 100.0f, 101.0f);  // a large mean: centred in f64
      Check(OpCode::GroupNorm, cpu::group_norm, ref::group_norm, a, {img.view, scale.view, bias.view}, false,
            {1e-5f, 1e-5f});
    }
  }
  OpAttrs a;
  a.kind = AttrKind::GroupNorm;
  a.groups = 3;
  a.epsilon = 1e-3f;
  Tensor empty(ScalarType::F32, {2, 6, 0});
  Tensor scale = Random({6}, 1), bias = Random({6}, 2);
  Check(OpCode::GroupNorm, cpu::group_norm, ref::group_norm, a, {empty.view, scale.view, bias.view}, true);
  Tensor nan = Special({2, 6, 5}, 3, true);  // a NaN or inf makes its group NaN
  Check(OpCode::GroupNorm, cpu::group_norm, ref::group_norm, a, {nan.view, scale.view, bias.view}, false,
        {1e-5f, 1e-5f});
}

EMBER_INSTANTIATE_TARGETS(ReduceIndexTest);

}  // namespace
}  // namespace ember::kernels::cpu_test
