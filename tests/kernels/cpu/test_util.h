// Helpers for the kernels/cpu twin tests: owned test tensors, shape functions, running a cpu kernel
// and its reference twin, tolerance checks, and the per-Highway-target fixture.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/highway.h"
#include "runtime/core/thread_pool.h"
#include "runtime/kernel/kernel.h"
#include "runtime/kernel/op_info.h"

namespace ember::kernels::cpu_test {

// A tensor that owns its bytes (8-byte aligned, so any element type can be read in place).
struct Tensor {
  std::vector<uint64_t> storage;
  TensorView view;

  Tensor() = default;
  Tensor(ScalarType dtype, std::vector<int64_t> dims) { reset(dtype, dims.data(), int(dims.size())); }
  void reset(ScalarType dtype, const int64_t* dims, int rank) {
    view = TensorView{};
    view.dtype = dtype;
    view.rank = static_cast<uint8_t>(rank);
    for (int i = 0; i < rank; ++i) view.dims[i] = dims[i];
    storage.assign(static_cast<size_t>(view.nbytes() + 8) / 8 + 1, 0);
    view.data = storage.data();
  }
  float* f() const { return view.data_as<float>(); }
  size_t numel() const { return static_cast<size_t>(view.numel()); }
  size_t nbytes() const { return static_cast<size_t>(view.nbytes()); }
};

inline Tensor Random(std::vector<int64_t> dims, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(ScalarType::F32, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (size_t i = 0; i < t.numel(); ++i) t.f()[i] = dist(rng);
  return t;
}

inline Tensor RandomBytes(ScalarType dtype, std::vector<int64_t> dims, uint32_t seed) {
  Tensor t(dtype, std::move(dims));
  std::mt19937 rng(seed);
  auto* p = reinterpret_cast<uint8_t*>(t.view.data);
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  return t;
}

// Runs the op's shape function; `out` gets its dims and storage.
inline void Shape(OpCode op, const OpAttrs& attrs, const TensorView* in, size_t n_in, Tensor* out) {
  const OpInfo* info = find_op_info(op);
  ASSERT_NE(info, nullptr);
  TensorView view;
  ErrorContext ctx;
  Status s = info->shape(attrs, in, n_in, &view, 1, Span<const int64_t>(), &ctx);
  ASSERT_TRUE(s.is_ok()) << to_string(op) << ": " << ctx.message;
  out->reset(view.dtype, view.dims, view.rank);
}

inline ThreadPool* Pool(int threads) {
  static FixedThreadPool pool3(3);
  return threads == 3 ? &pool3 : nullptr;
}

// Calls fn with pool `threads` (1 = no pool, 3 = FixedThreadPool(3)).
inline void RunKernel(KernelFn fn, const OpAttrs& attrs, const TensorView* in, size_t n_in, Tensor* out,
                int threads = 1) {
  KernelContext ctx;
  ctx.pool = Pool(threads);
  fn(ctx, attrs, in, n_in, &out->view, 1);
}

struct Tolerance {
  float abs = 0.0f;
  float rel = 0.0f;
};
constexpr Tolerance kExact{0.0f, 0.0f};
constexpr Tolerance kTranscendental{1e-5f, 1e-4f};

// |actual - expected| <= abs + rel * |expected| (NaN matches NaN, inf the same inf); reports the
// first mismatch.
inline ::testing::AssertionResult AllClose(const Tensor& actual, const Tensor& expected,
                                           Tolerance tol) {
  if (actual.numel() != expected.numel()) {
    return ::testing::AssertionFailure() << "numel " << actual.numel() << " vs " << expected.numel();
  }
  for (size_t i = 0; i < actual.numel(); ++i) {
    const float a = actual.f()[i], e = expected.f()[i];
    if ((std::isnan(a) && std::isnan(e)) || a == e) continue;  // a == e: equal infinities too
    if (!(std::fabs(a - e) <= tol.abs + tol.rel * std::fabs(e))) {
      return ::testing::AssertionFailure() << "first mismatch at " << i << ": " << a << " vs "
                                           << e << " (diff " << std::fabs(a - e) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult BytesEqual(const Tensor& actual, const Tensor& expected) {
  if (actual.nbytes() != expected.nbytes()) {
    return ::testing::AssertionFailure() << "nbytes " << actual.nbytes() << " vs " << expected.nbytes();
  }
  const auto* a = reinterpret_cast<const uint8_t*>(actual.view.data);
  const auto* e = reinterpret_cast<const uint8_t*>(expected.view.data);
  for (size_t i = 0; i < actual.nbytes(); ++i) {
    if (a[i] != e[i]) return ::testing::AssertionFailure() << "first byte mismatch at " << i;
  }
  return ::testing::AssertionSuccess();
}

// Runs cpu (threads 1 and 3) and reference on the same inputs and compares. Returns the cpu
// result of the single-threaded run; with `bitwise_threads`, 1 and 3 threads must agree bit for bit.
inline Tensor CheckTwin(OpCode op, KernelFn cpu, KernelFn ref, const OpAttrs& attrs,
                        const std::vector<TensorView>& in, Tolerance tol,
                        bool bitwise_threads = false) {
  Tensor expected, actual1, actual3;
  Shape(op, attrs, in.data(), in.size(), &expected);
  Shape(op, attrs, in.data(), in.size(), &actual1);
  Shape(op, attrs, in.data(), in.size(), &actual3);
  RunKernel(ref, attrs, in.data(), in.size(), &expected);
  RunKernel(cpu, attrs, in.data(), in.size(), &actual1, 1);
  RunKernel(cpu, attrs, in.data(), in.size(), &actual3, 3);
  if (expected.view.dtype == ScalarType::F32) {
    EXPECT_TRUE(AllClose(actual1, expected, tol)) << to_string(op) << " (1 thread)";
    EXPECT_TRUE(AllClose(actual3, expected, tol)) << to_string(op) << " (3 threads)";
  } else {
    EXPECT_TRUE(BytesEqual(actual1, expected)) << to_string(op) << " (1 thread)";
    EXPECT_TRUE(BytesEqual(actual3, expected)) << to_string(op) << " (3 threads)";
  }
  if (bitwise_threads) {
    EXPECT_TRUE(BytesEqual(actual1, actual3)) << "1 vs 3 threads differ";
  }
  return actual1;
}

inline std::string DimsText(const TensorView& t) {
  char buf[96];
  return format_dims(t.dims, t.rank, buf, sizeof(buf));
}

// Each TEST_P runs once per Highway target compiled into kernels_cpu and supported by this CPU.
class TargetTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam()); }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

inline std::vector<int64_t> Targets() {
#if defined(EMBER_HWY_STATIC_DISPATCH) && EMBER_HWY_STATIC_DISPATCH
  return {HWY_STATIC_TARGET};  // static dispatch: the one compiled target
#else
  return hwy::SupportedAndGeneratedTargets();
#endif
}

inline std::string TargetName(const ::testing::TestParamInfo<int64_t>& info) {
  return hwy::TargetName(info.param);
}

#define EMBER_INSTANTIATE_TARGETS(suite) \
  INSTANTIATE_TEST_SUITE_P(Hwy, suite, ::testing::ValuesIn(::ember::kernels::cpu_test::Targets()), \
                           ::ember::kernels::cpu_test::TargetName)

// Sizes around every x86 vector width (1, 4, 8, 16 f32 lanes), plus large and odd ones.
inline const std::vector<int64_t>& EdgeSizes() {
  static const std::vector<int64_t> sizes = {0,  1,  2,  3,  4,  5,  7,  8,    9,   15,
                                             16, 17, 31, 32, 33, 63, 65, 1000, 1037, 70001};
  return sizes;
}

}  // namespace ember::kernels::cpu_test
