// kernels/cpu linear's packed path (ctx.scratch of linear_scratch bytes, as the runtime runs it)
// against the reference on every target: panel and few-token edges, chunks of x past 256 rows,
// non-finite values, bitwise equality for 1 / 2 / 3 threads and batch invariance across the
// panel micro-kernel and the few-token path, and the scratch size.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/register.h"
#include "kernels/reference/ops.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

Tolerance GemmTolerance(int64_t k) { return Tolerance{2e-6f * float(k > 16 ? k : 16), 1e-4f}; }

ThreadPool* LinearPool(int threads) {
  static FixedThreadPool pool2(2), pool3(3);
  return threads == 2 ? &pool2 : threads == 3 ? &pool3 : nullptr;
}

OpAttrs LinearAttrs() {
  OpAttrs attrs;
  attrs.kind = AttrKind::Linear;
  return attrs;
}

// linear with ctx.scratch sized by linear_scratch (misaligned on purpose: the kernel aligns).
void RunPacked(const std::vector<TensorView>& in, int threads, Tensor* out) {
  const OpAttrs attrs = LinearAttrs();
  Shape(OpCode::Linear, attrs, in.data(), in.size(), out);
  const size_t bytes = cpu::linear_scratch(attrs, in.data(), in.size(), &out->view, 1, size_t(threads));
  std::vector<uint8_t> scratch(bytes + 5);
  KernelContext ctx;
  ctx.pool = LinearPool(threads);
  ctx.scratch = Span<uint8_t>(scratch.data() + 5, bytes);
  cpu::linear(ctx, attrs, in.data(), in.size(), &out->view, 1);
}

void CheckPacked(const std::vector<TensorView>& in, Tolerance tol) {
  Tensor expected, one, two, three;
  Shape(OpCode::Linear, LinearAttrs(), in.data(), in.size(), &expected);
  RunKernel(ref::linear, LinearAttrs(), in.data(), in.size(), &expected);
  RunPacked(in, 1, &one);
  RunPacked(in, 2, &two);
  RunPacked(in, 3, &three);
  EXPECT_TRUE(AllClose(one, expected, tol)) << "1 thread";
  EXPECT_TRUE(BytesEqual(two, one)) << "2 threads differ from 1";
  EXPECT_TRUE(BytesEqual(three, one)) << "3 threads differ from 1";
}

using LinearPackedTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(LinearPackedTest);

// M around the panel widths (2 vectors: 2 .. 32 tokens) and the few-token path (<= 4 tokens), K
// around the transposed blocks (4, 8, 16 columns), N around the row groups (6 / 8 rows, 8 / 16
// lanes) and the 48 / 64-row blocks; M = 300 takes two chunks (256 + 44 rows).
TEST_P(LinearPackedTest, Shapes) {
  const std::vector<std::vector<int64_t>> mkn = {
      {1, 1, 1},    {1, 16, 16},  {1, 17, 33},   {2, 15, 64},  {3, 32, 65},   {4, 100, 130},
      {5, 7, 9},    {8, 33, 17},  {16, 64, 48},  {17, 31, 100}, {31, 5, 7},   {32, 16, 31},
      {33, 129, 70}, {36, 40, 47}, {64, 257, 129}, {129, 20, 40}, {300, 24, 37}, {260, 9, 66},
  };
  for (const auto& s : mkn) {
    Tensor x = Random({s[0], s[1]}, 61), w = Random({s[2], s[1]}, 62), bias = Random({s[2]}, 63);
    TensorView absent;
    SCOPED_TRACE(testing::Message() << "M,K,N = " << s[0] << "," << s[1] << "," << s[2]);
    const Tolerance tol = GemmTolerance(s[1]);
    CheckPacked({x.view, w.view, bias.view}, tol);
    CheckPacked({x.view, w.view, absent}, tol);
    CheckPacked({x.view, w.view}, tol);
  }
  // Leading batch dims of x: M = 2 x 3.
  Tensor x = Random({2, 3, 40}, 64), w = Random({24, 40}, 65), bias = Random({24}, 66);
  CheckPacked({x.view, w.view, bias.view}, GemmTolerance(40));
}

// Row r of a batch equals the row computed alone, bit for bit: alone it is one token (the
// few-token path where the target has it), in the batch a panel of the micro-kernel or the last
// few tokens of a chunk (rows 256..259 of 260: a chunk of 4).
TEST_P(LinearPackedTest, BatchInvariant) {
  const int64_t k = 77, n = 70;
  for (int64_t m : {int64_t(3), int64_t(37), int64_t(260)}) {
    Tensor x = Random({m, k}, 67), w = Random({n, k}, 68), bias = Random({n}, 69), full;
    RunPacked({x.view, w.view, bias.view}, 3, &full);
    for (int64_t row : {int64_t(0), int64_t(2), m / 2, m - 1}) {
      for (int64_t count : {int64_t(1), int64_t(2)}) {
        if (row + count > m) continue;
        Tensor part(ScalarType::F32, {count, k}), out;
        std::memcpy(part.f(), x.f() + row * k, size_t(count * k) * sizeof(float));
        RunPacked({part.view, w.view, bias.view}, 1, &out);
        EXPECT_EQ(0, std::memcmp(out.f(), full.f() + row * n, size_t(count * n) * sizeof(float)))
            << "M " << m << ", rows " << row << " + " << count;
      }
    }
  }
}

// inf / NaN in x and w: the reference's inf where only an inf meets finite values, NaN where
// inf - inf or a NaN occurs (the padded tokens of a panel are zeros and never stored).
TEST_P(LinearPackedTest, NonFinite) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t m : {int64_t(2), int64_t(40)}) {
    const int64_t k = 33, n = 40;
    Tensor x = Random({m, k}, 70), w = Random({n, k}, 71), bias = Random({n}, 72);
    x.f()[1 * k + 5] = inf;         // row 1: inf everywhere except where w has NaN / -inf
    w.f()[3 * k + 7] = nan;         // column 3: NaN in every row
    w.f()[20 * k + 5] = -inf;       // row 1 x column 20: inf * -inf = -inf
    w.f()[21 * k + 0] = inf;        // column 21: inf, and row 1 x column 21: inf + inf
    w.f()[22 * k + 0] = inf;
    w.f()[22 * k + 1] = -inf;       // column 22: inf - inf = NaN
    SCOPED_TRACE(testing::Message() << "M " << m);
    CheckPacked({x.view, w.view, bias.view}, GemmTolerance(k));
  }
}

// linear_scratch: the packed rows of x (up to 256, rounded up to 32) x K floats + alignment; the
// same for any thread count; a smaller M fits; no scratch for K = 0 or M = 0.
TEST_P(LinearPackedTest, ScratchSize) {
  const OpAttrs attrs = LinearAttrs();
  auto bytes = [&](std::vector<int64_t> x_dims, int64_t n, size_t threads) {
    Tensor x(ScalarType::F32, x_dims), w(ScalarType::F32, {n, x_dims.back()}), out;
    const TensorView in[] = {x.view, w.view};
    Shape(OpCode::Linear, attrs, in, 2, &out);
    return cpu::linear_scratch(attrs, in, 2, &out.view, 1, threads);
  };
  EXPECT_EQ(bytes({300, 10}, 7, 1), 256u * 10u * 4u + 64u);
  EXPECT_EQ(bytes({300, 10}, 7, 3), bytes({300, 10}, 7, 1));
  EXPECT_EQ(bytes({5, 10}, 7, 1), 32u * 10u * 4u + 64u);
  EXPECT_EQ(bytes({2, 3, 10}, 7, 1), 32u * 10u * 4u + 64u);
  EXPECT_EQ(bytes({0, 10}, 7, 1), 0u);
  EXPECT_EQ(bytes({4, 0}, 7, 1), 0u);
  Tensor x(ScalarType::F32, {40, 10}), w(ScalarType::F32, {7, 10});
  const TensorView in[] = {x.view, w.view};
  EXPECT_EQ(cpu_scratch_bytes(OpCode::Linear, attrs, in, 2, nullptr, 0), 64u * 10u * 4u + 64u);
  // Given fewer bytes than it needs, linear runs its unpacked tiles: still the reference's result.
  Tensor big = Random({40, 10}, 73), wr = Random({7, 10}, 74), expected, actual;
  const TensorView inr[] = {big.view, wr.view};
  Shape(OpCode::Linear, attrs, inr, 2, &expected);
  RunKernel(ref::linear, attrs, inr, 2, &expected);
  Shape(OpCode::Linear, attrs, inr, 2, &actual);
  std::vector<uint8_t> small(64u * 10u * 4u - 1);
  KernelContext ctx;
  ctx.scratch = Span<uint8_t>(small.data(), small.size());
  cpu::linear(ctx, attrs, inr, 2, &actual.view, 1);
  EXPECT_TRUE(AllClose(actual, expected, GemmTolerance(10)));
}

}  // namespace
}  // namespace ember::kernels::cpu_test
