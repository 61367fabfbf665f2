// The CUDA linear (backends/cuda/ops/linear.cu) against kernels/reference's linear,
// linear_bf16_weight and linear_quantized on the same inputs: every weight format, bias present /
// absent (null data) / omitted, M on both sides of the GEMV / GEMM switch (8), odd N and K.
//
// Tolerances (rel L2 = ||gpu - ref|| / ||ref||):
//  - exact mode, every M <= 8 (the GEMV decodes exactly and accumulates in f32) and f32 weights:
//    1e-5 (f32 accumulation of a few hundred terms: ~sqrt(K) · 2^-24 ≈ 1e-6 expected).
//  - fast mode (bf16 tensor cores at M > 8; the GEMV rounds the same operands at M <= 8): 1e-2. Rounding x (and a 128x128-block FP8 weight) to
//    bf16 gives each factor an independent relative error of at most u = 2^-9 (uniform, rms u/√3);
//    the products' errors then have rms ≈ √2 · u/√3 ≈ 1.6e-3 of |x·w|, and the output's rel L2 is
//    that (random signs), so 1e-2 is a 6x margin; f32 accumulation adds ~1e-6.
//  - W8A8 at M <= 8: 1e-6 (bit-exact by construction: exact products, double sum, the reference's
//    epilogue order); M > 8 through cuBLASLt FP8 (f32 accumulation in the tensor cores, whose
//    internal FP8 accumulator is narrower than f32 between promotions): 1e-3; the bf16 route with
//    exact codes: within that too.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backends/cuda/ops/linear_internal.cuh"
#include "kernels/reference/ops.h"
#include "kernels/reference/quantize.h"
#include "runtime/core/float_codecs.h"
#include "tests/backends/cuda/cuda_op_harness.h"

namespace ember {
namespace {

namespace cuda = backends::cuda;
namespace ref = kernels::reference;
using testing::CudaOpHarness;

enum class Kind { F32, Bf16, Fp8Tensor, Fp8Channel, Fp8Block128, Fp8BlockOdd, Mx, Nvfp4 };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::F32: return "f32";
    case Kind::Bf16: return "bf16";
    case Kind::Fp8Tensor: return "fp8 per tensor";
    case Kind::Fp8Channel: return "fp8 per channel";
    case Kind::Fp8Block128: return "fp8 128x128";
    case Kind::Fp8BlockOdd: return "fp8 3x40";
    case Kind::Mx: return "mxfp8";
    case Kind::Nvfp4: return "nvfp4";
  }
  return "?";
}

// A weight [n, k] in host memory with its QuantView (host scale pointers, as the harness wants).
struct Weight {
  int64_t n = 0, k = 0;
  ScalarType dtype = ScalarType::F32;
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales;
  float global = 0.0f;
  QuantView quant;
  bool quantized = false;

  TensorView view() {
    TensorView v;
    v.data = data.empty() ? static_cast<void*>(&global) : data.data();
    v.dtype = dtype;
    v.rank = 2;
    v.dims[0] = n;
    v.dims[1] = k;
    if (quantized) {
      quant.scale = scales.data();
      quant.global_scale = dtype == ScalarType::F4E2M1 ? &global : nullptr;
      v.quant = &quant;
    }
    return v;
  }
};

Weight make_weight(Kind kind, int64_t n, int64_t k, uint64_t seed) {
  Weight w;
  w.n = n;
  w.k = k;
  const std::vector<float> f = testing::random_floats(static_cast<size_t>(n * k), seed);
  auto fp8 = [&](int64_t bn, int64_t bk) {
    w.dtype = ScalarType::F8E4M3FN;
    w.data.resize(static_cast<size_t>(n * k));
    const int64_t rows = (n + bn - 1) / bn, cols = (k + bk - 1) / bk;
    w.scales.resize(static_cast<size_t>(rows * cols) * 4);
    EXPECT_TRUE(ref::quantize_fp8_e4m3(f.data(), n, k, bn, bk, w.data.data(),
                                       reinterpret_cast<float*>(w.scales.data()))
                    .is_ok());
    w.quantized = true;
    w.quant.scale_dtype = ScalarType::F32;
    w.quant.block[0] = bn;
    w.quant.block[1] = bk;
    w.quant.layout = classify_quant(ScalarType::F8E4M3FN, ScalarType::F32, n, k, bn, bk, false);
  };
  switch (kind) {
    case Kind::F32:
      w.data.resize(f.size() * 4);
      if (!f.empty()) std::memcpy(w.data.data(), f.data(), f.size() * 4);
      break;
    case Kind::Bf16: {
      w.dtype = ScalarType::BF16;
      w.data.resize(f.size() * 2);
      auto* b = reinterpret_cast<uint16_t*>(w.data.data());
      for (size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
      break;
    }
    case Kind::Fp8Tensor: fp8(n, k); break;
    case Kind::Fp8Channel: fp8(1, k); break;
    case Kind::Fp8Block128: fp8(128, 128); break;
    case Kind::Fp8BlockOdd: fp8(3, 40); break;
    case Kind::Mx:
      w.dtype = ScalarType::F8E4M3FN;
      w.data.resize(static_cast<size_t>(n * k));
      w.scales.resize(static_cast<size_t>(n * (k / 32)));
      EXPECT_TRUE(ref::quantize_mxfp8(f.data(), n, k, w.data.data(), w.scales.data()).is_ok());
      w.quantized = true;
      w.quant.layout = QuantLayout::Mx;
      w.quant.scale_dtype = ScalarType::E8M0;
      w.quant.block[0] = 1;
      w.quant.block[1] = 32;
      break;
    case Kind::Nvfp4:
      w.dtype = ScalarType::F4E2M1;
      w.data.resize(static_cast<size_t>(n * k / 2));
      w.scales.resize(static_cast<size_t>(n * (k / 16)));
      EXPECT_TRUE(ref::quantize_nvfp4(f.data(), n, k, w.data.data(), w.scales.data(), &w.global).is_ok());
      w.quantized = true;
      w.quant.layout = QuantLayout::Nvfp4;
      w.quant.scale_dtype = ScalarType::UE4M3;
      w.quant.block[0] = 1;
      w.quant.block[1] = 16;
      break;
  }
  return w;
}

KernelFn reference_fn(const Weight& w) {
  if (w.quantized) return ref::linear_quantized;
  return w.dtype == ScalarType::BF16 ? ref::linear_bf16_weight : ref::linear;
}

enum class BiasMode { Present, NullData, Omitted };

struct Case {
  std::vector<int64_t> x_dims;  // [.., K]
  BiasMode bias = BiasMode::Present;
  bool exact = false;
  ActivationQuant aq = ActivationQuant::None;
  uint64_t seed = 1;
};

struct Outcome {
  std::vector<float> gpu, ref;
  CudaOpHarness::Result result;
};

Outcome run_case(CudaOpHarness& h, Weight& w, const Case& c) {
  Outcome o;
  int64_t m = 1;
  for (size_t i = 0; i + 1 < c.x_dims.size(); ++i) m *= c.x_dims[i];
  std::vector<float> x = testing::random_floats(static_cast<size_t>(m * w.k), c.seed * 7 + 3);
  std::vector<float> bias = testing::random_floats(static_cast<size_t>(w.n), c.seed * 11 + 5);
  float dummy = 0.0f;
  TensorView xv;
  xv.data = x.empty() ? static_cast<void*>(&dummy) : x.data();
  xv.dtype = ScalarType::F32;
  xv.rank = static_cast<uint8_t>(c.x_dims.size());
  for (size_t i = 0; i < c.x_dims.size(); ++i) xv.dims[i] = c.x_dims[i];
  TensorView bv;
  bv.rank = 1;
  bv.dims[0] = w.n;
  if (c.bias == BiasMode::Present) {
    bv.data = bias.data();
    bv.dtype = ScalarType::F32;
  }
  std::vector<TensorView> inputs = {xv, w.view()};
  if (c.bias != BiasMode::Omitted) inputs.push_back(bv);
  o.gpu.assign(static_cast<size_t>(m * w.n), 0.0f);
  o.ref.assign(static_cast<size_t>(m * w.n), 0.0f);
  TensorView yv;
  yv.dtype = ScalarType::F32;
  yv.rank = static_cast<uint8_t>(c.x_dims.size());
  for (size_t i = 0; i + 1 < c.x_dims.size(); ++i) yv.dims[i] = c.x_dims[i];
  yv.dims[yv.rank - 1] = w.n;
  OpAttrs attrs;
  attrs.kind = AttrKind::Linear;
  attrs.activation_quant = c.aq;
  {
    TensorView out = yv;
    out.data = o.ref.empty() ? static_cast<void*>(&dummy) : o.ref.data();
    KernelContext ctx;
    reference_fn(w)(ctx, attrs, inputs.data(), inputs.size(), &out, 1);
  }
  TensorView out = yv;
  out.data = o.gpu.empty() ? static_cast<void*>(&dummy) : o.gpu.data();
  o.result = h.run(cuda::linear, cuda::linear_scratch, attrs, inputs, {out}, c.exact);
  return o;
}

const int64_t kMs[] = {1, 3, 8, 9, 33, 130};
const BiasMode kBiasModes[] = {BiasMode::Present, BiasMode::NullData, BiasMode::Omitted};

// Fast mode rounds like the bf16 tensor cores at every M (the GEMV too: batch invariance).
double tolerance(Kind kind, int64_t m, bool exact) {
  return exact || kind == Kind::F32 ? 1e-5 : 1e-2;
}

void sweep(Kind kind, int64_t n, int64_t k) {
  CudaOpHarness h;
  if (!h.ok()) return;
  Weight w = make_weight(kind, n, k, 1000 + n * 31 + k);
  uint64_t seed = 1;
  for (int64_t m : kMs) {
    for (BiasMode b : kBiasModes) {
      for (bool exact : {true, false}) {
        SCOPED_TRACE(::testing::Message() << kind_name(kind) << " N=" << n << " K=" << k << " M=" << m
                                          << " bias=" << static_cast<int>(b) << " exact=" << exact);
        Case c;
        c.x_dims = {m, k};
        c.bias = b;
        c.exact = exact;
        c.seed = seed++;
        Outcome o = run_case(h, w, c);
        ASSERT_FALSE(o.result.failed) << o.result.message;
        EXPECT_EQ(o.result.error_word, 0u);
        ASSERT_FALSE(testing::any_nan(o.ref.data(), o.ref.size()));
        EXPECT_LE(testing::rel_l2(o.gpu.data(), o.ref.data(), o.gpu.size()), tolerance(kind, m, exact));
      }
    }
  }
}

// Odd shapes take the scalar (unaligned row) path, 16-byte multiples the vectorised one.
TEST(CudaLinear, F32) { sweep(Kind::F32, 197, 301); sweep(Kind::F32, 130, 256); }
TEST(CudaLinear, Bf16) { sweep(Kind::Bf16, 197, 301); sweep(Kind::Bf16, 130, 256); }
TEST(CudaLinear, Fp8PerTensor) { sweep(Kind::Fp8Tensor, 197, 301); sweep(Kind::Fp8Tensor, 130, 256); }
TEST(CudaLinear, Fp8PerChannel) { sweep(Kind::Fp8Channel, 197, 301); sweep(Kind::Fp8Channel, 130, 256); }
TEST(CudaLinear, Fp8Block128) { sweep(Kind::Fp8Block128, 197, 301); sweep(Kind::Fp8Block128, 130, 256); }
TEST(CudaLinear, Fp8BlockNotMultipleOf16) { sweep(Kind::Fp8BlockOdd, 50, 160); sweep(Kind::Fp8BlockOdd, 47, 83); }
TEST(CudaLinear, Mxfp8) { sweep(Kind::Mx, 77, 96); sweep(Kind::Mx, 130, 256); }
TEST(CudaLinear, Nvfp4) { sweep(Kind::Nvfp4, 77, 112); sweep(Kind::Nvfp4, 130, 256); }

// Batch invariance in both numerics: a row computed alone (the GEMV) and inside 33 rows (the GEMM
// path) differ only by summation order, never by rounding (fast mode rounds the same operands).
TEST(CudaLinear, ARowAloneAndInABatchAgree) {
  CudaOpHarness h;
  if (!h.ok()) return;
  for (Kind kind : {Kind::F32, Kind::Bf16, Kind::Fp8Channel, Kind::Fp8Block128, Kind::Mx, Kind::Nvfp4}) {
    Weight w = make_weight(kind, 130, 256, 77);
    for (bool exact : {true, false}) {
      SCOPED_TRACE(::testing::Message() << kind_name(kind) << " exact=" << exact);
      Case batch;
      batch.x_dims = {33, 256};
      batch.exact = exact;
      batch.seed = 5;
      Outcome all = run_case(h, w, batch);
      ASSERT_FALSE(all.result.failed) << all.result.message;
      // Row 0 of the same random x (run_case draws x from the seed: row 0 is the first K values).
      Case one = batch;
      one.x_dims = {1, 256};
      Outcome alone = run_case(h, w, one);
      ASSERT_FALSE(alone.result.failed) << alone.result.message;
      EXPECT_LE(testing::rel_l2(alone.gpu.data(), all.gpu.data(), 130), 1e-5);
    }
  }
}

TEST(CudaLinear, LayoutsAreTheOnesMeant) {
  EXPECT_EQ(make_weight(Kind::Fp8Tensor, 197, 301, 1).quant.layout, QuantLayout::PerTensor);
  EXPECT_EQ(make_weight(Kind::Fp8Channel, 197, 301, 1).quant.layout, QuantLayout::PerChannel);
  EXPECT_EQ(make_weight(Kind::Fp8Block128, 197, 301, 1).quant.layout, QuantLayout::Block2d);
  EXPECT_EQ(make_weight(Kind::Fp8Block128, 130, 256, 1).quant.layout, QuantLayout::Block2d);
  EXPECT_EQ(make_weight(Kind::Fp8BlockOdd, 50, 160, 1).quant.layout, QuantLayout::Block2d);
}

TEST(CudaLinear, RankThreeInputZeroRowsAndZeroK) {
  CudaOpHarness h;
  if (!h.ok()) return;
  for (Kind kind : {Kind::F32, Kind::Fp8Channel}) {
    Weight w = make_weight(kind, 67, 96, 5);
    for (bool exact : {true, false}) {
      SCOPED_TRACE(::testing::Message() << kind_name(kind) << " exact=" << exact);
      Case c;
      c.exact = exact;
      c.x_dims = {2, 5, 96};  // M = 10
      Outcome o = run_case(h, w, c);
      ASSERT_FALSE(o.result.failed) << o.result.message;
      EXPECT_LE(testing::rel_l2(o.gpu.data(), o.ref.data(), o.gpu.size()), tolerance(kind, 1, exact));
      c.x_dims = {0, 96};  // M = 0: nothing to write
      o = run_case(h, w, c);
      EXPECT_FALSE(o.result.failed) << o.result.message;
    }
  }
  Weight w = make_weight(Kind::F32, 5, 0, 6);  // K = 0: y = bias, or 0
  for (int64_t m : {3, 9}) {
    for (BiasMode b : kBiasModes) {
      Case c;
      c.x_dims = {m, 0};
      c.bias = b;
      Outcome o = run_case(h, w, c);
      ASSERT_FALSE(o.result.failed) << o.result.message;
      for (size_t i = 0; i < o.gpu.size(); ++i) EXPECT_EQ(o.gpu[i], o.ref[i]) << i;
    }
  }
}

// Weights larger than one decode chunk (linear_chunk_rows) on the GEMM path.
TEST(CudaLinear, ChunkedWeightRows) {
  CudaOpHarness h;
  if (!h.ok()) return;
  const int64_t n = 1100, k = 4096;
  ASSERT_LT(cuda::linear_chunk_rows(n, k), n);
  for (Kind kind : {Kind::Fp8Channel, Kind::Bf16, Kind::Nvfp4}) {
    Weight w = make_weight(kind, n, k, 9);
    for (bool exact : {true, false}) {
      SCOPED_TRACE(::testing::Message() << kind_name(kind) << " exact=" << exact);
      Case c;
      c.x_dims = {9, k};
      c.exact = exact;
      Outcome o = run_case(h, w, c);
      ASSERT_FALSE(o.result.failed) << o.result.message;
      EXPECT_LE(testing::rel_l2(o.gpu.data(), o.ref.data(), o.gpu.size()), tolerance(kind, 9, exact));
    }
  }
  Weight w = make_weight(Kind::Fp8Channel, n, k, 10);
  Case c;
  c.x_dims = {9, k};
  c.aq = ActivationQuant::Fp8PerToken;
  Outcome o = run_case(h, w, c);
  ASSERT_FALSE(o.result.failed) << o.result.message;
  EXPECT_LE(testing::rel_l2(o.gpu.data(), o.ref.data(), o.gpu.size()), 1e-3);
}

void sweep_w8a8(Kind kind, int64_t n, int64_t k, bool expect_fp8_plan) {
  CudaOpHarness h;
  if (!h.ok()) return;
  Weight w = make_weight(kind, n, k, 2000 + n + k);
  uint64_t seed = 100;
  for (int64_t m : kMs) {
    for (BiasMode b : kBiasModes) {
      SCOPED_TRACE(::testing::Message() << "W8A8 " << kind_name(kind) << " N=" << n << " K=" << k << " M=" << m
                                        << " bias=" << static_cast<int>(b));
      Case c;
      c.x_dims = {m, k};
      c.bias = b;
      c.aq = ActivationQuant::Fp8PerToken;
      c.seed = seed++;
      Outcome o = run_case(h, w, c);
      ASSERT_FALSE(o.result.failed) << o.result.message;
      ASSERT_FALSE(testing::any_nan(o.ref.data(), o.ref.size()));
      EXPECT_LE(testing::rel_l2(o.gpu.data(), o.ref.data(), o.gpu.size()), m <= 8 ? 1e-6 : 1e-3);
    }
  }
  const int fp8_all = cuda::gemm_cache_fp8_plan_count(h.launch().gemm, false);
  const int fp8_ok = cuda::gemm_cache_fp8_plan_count(h.launch().gemm, true);
  std::printf("[ W8A8 %s N=%lld K=%lld: cuBLASLt FP8 plans %d usable of %d tried ]\n", kind_name(kind),
              static_cast<long long>(n), static_cast<long long>(k), fp8_ok, fp8_all);
  if (expect_fp8_plan) {
    EXPECT_GT(fp8_ok, 0) << "cuBLASLt refused every FP8 plan: the bf16 route ran instead";
  } else {
    EXPECT_EQ(fp8_all, 0);
  }
}

// N, K multiples of 16 take cuBLASLt FP8 (OUTER_VEC scales); others the exact bf16 route.
TEST(CudaLinearW8a8, PerTensor) { sweep_w8a8(Kind::Fp8Tensor, 144, 256, true); sweep_w8a8(Kind::Fp8Tensor, 197, 301, false); }
TEST(CudaLinearW8a8, PerChannel) { sweep_w8a8(Kind::Fp8Channel, 144, 256, true); sweep_w8a8(Kind::Fp8Channel, 197, 301, false); }

TEST(CudaLinearW8a8, BlockScalesGiveNanLikeTheReference) {
  CudaOpHarness h;
  if (!h.ok()) return;
  Weight w = make_weight(Kind::Fp8Block128, 197, 301, 3);
  for (int64_t m : {3, 33}) {
    Case c;
    c.x_dims = {m, 301};
    c.aq = ActivationQuant::Fp8PerToken;
    Outcome o = run_case(h, w, c);
    ASSERT_FALSE(o.result.failed) << o.result.message;
    for (size_t i = 0; i < o.gpu.size(); ++i) {
      ASSERT_TRUE(std::isnan(o.ref[i]));
      ASSERT_TRUE(std::isnan(o.gpu[i])) << i;
    }
  }
}

TEST(CudaLinearW8a8, MxAndNvfp4IgnoreActivationQuantLikeTheReference) {
  CudaOpHarness h;
  if (!h.ok()) return;
  for (Kind kind : {Kind::Mx, Kind::Nvfp4}) {
    Weight w = make_weight(kind, 77, 128, 4);
    for (int64_t m : {3, 33}) {
      SCOPED_TRACE(::testing::Message() << kind_name(kind) << " M=" << m);
      Case c;
      c.x_dims = {m, 128};
      c.exact = true;
      c.aq = ActivationQuant::Fp8PerToken;
      Outcome o = run_case(h, w, c);
      ASSERT_FALSE(o.result.failed) << o.result.message;
      EXPECT_LE(testing::rel_l2(o.gpu.data(), o.ref.data(), o.gpu.size()), 1e-5);
    }
  }
}

// NaN codes (0x7F, 0xFF) make every output of their weight row NaN, as in the reference; the rest
// stays within tolerance.
TEST(CudaLinear, NanCodesPropagate) {
  CudaOpHarness h;
  if (!h.ok()) return;
  for (auto [n, k] : {std::pair<int64_t, int64_t>{197, 301}, std::pair<int64_t, int64_t>{144, 256}}) {
    for (Kind kind : {Kind::Fp8Channel, Kind::Fp8Block128}) {
      Weight w = make_weight(kind, n, k, 7);
      w.data[static_cast<size_t>(5 * k + 7)] = 0x7F;
      w.data[static_cast<size_t>(20 * k + 100)] = 0xFF;
      for (ActivationQuant aq : {ActivationQuant::None, ActivationQuant::Fp8PerToken}) {
        if (aq == ActivationQuant::Fp8PerToken && kind == Kind::Fp8Block128) continue;
        for (int64_t m : {3, 33}) {
          for (bool exact : {true, false}) {
            SCOPED_TRACE(::testing::Message() << kind_name(kind) << " N=" << n << " M=" << m << " exact=" << exact
                                              << " w8a8=" << (aq == ActivationQuant::Fp8PerToken));
            Case c;
            c.x_dims = {m, k};
            c.exact = exact;
            c.aq = aq;
            Outcome o = run_case(h, w, c);
            ASSERT_FALSE(o.result.failed) << o.result.message;
            std::vector<float> g, r;
            int nan_rows = 0;
            for (size_t i = 0; i < o.gpu.size(); ++i) {
              ASSERT_EQ(std::isnan(o.gpu[i]), std::isnan(o.ref[i])) << "element " << i;
              if (std::isnan(o.ref[i])) {
                ++nan_rows;
                continue;
              }
              g.push_back(o.gpu[i]);
              r.push_back(o.ref[i]);
            }
            EXPECT_EQ(nan_rows, 2 * m);
            const double tol = aq == ActivationQuant::Fp8PerToken ? (m <= 8 ? 1e-6 : 1e-3) : tolerance(kind, m, exact);
            EXPECT_LE(testing::rel_l2(g.data(), r.data(), g.size()), tol);
          }
        }
      }
    }
  }
}

// ---- Failure paths, on a LaunchContext of the test's own ------------------------------------------

struct RawRun {
  cuda::LaunchContext lc;
  float* x = nullptr;
  float* w = nullptr;
  float* y = nullptr;
  uint8_t* scratch = nullptr;
  size_t scratch_bytes = 0;
  int64_t n = 48, k = 64, max_m = 130;

  bool init(int gemm_capacity) {
    if (cudaStreamCreateWithFlags(&lc.stream, cudaStreamNonBlocking) != cudaSuccess) return false;
    if (cublasLtCreate(&lc.lt) != CUBLAS_STATUS_SUCCESS) return false;
    lc.lt_workspace_bytes = 4u << 20;
    if (cudaMalloc(&lc.lt_workspace, lc.lt_workspace_bytes) != cudaSuccess) return false;
    if (cudaMalloc(&lc.error_word, 4) != cudaSuccess) return false;
    lc.gemm = cuda::gemm_cache_create_with_capacity(gemm_capacity);
    const std::vector<float> hx = testing::random_floats(static_cast<size_t>(max_m * k), 1);
    const std::vector<float> hw = testing::random_floats(static_cast<size_t>(n * k), 2);
    if (cudaMalloc(&x, hx.size() * 4) != cudaSuccess || cudaMalloc(&w, hw.size() * 4) != cudaSuccess ||
        cudaMalloc(&y, static_cast<size_t>(max_m * n) * 4) != cudaSuccess) {
      return false;
    }
    cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice);
    return lc.gemm != nullptr;
  }
  ~RawRun() {
    cuda::gemm_cache_destroy(lc.gemm);
    cudaFree(x);
    cudaFree(w);
    cudaFree(y);
    cudaFree(scratch);
    cudaFree(lc.lt_workspace);
    cudaFree(lc.error_word);
    if (lc.lt != nullptr) cublasLtDestroy(lc.lt);
    if (lc.stream != nullptr) cudaStreamDestroy(lc.stream);
  }
  // Runs linear with an f32 (or, with bf16, a bf16-reinterpreted) weight at M = m.
  void run(int64_t m, ScalarType wtype = ScalarType::F32) {
    TensorView in[2];
    in[0].data = x;
    in[0].dtype = ScalarType::F32;
    in[0].rank = 2;
    in[0].dims[0] = m;
    in[0].dims[1] = k;
    in[0].domain = MemoryDomain::Device;
    in[1].data = w;
    in[1].dtype = wtype;
    in[1].rank = 2;
    in[1].dims[0] = n;
    in[1].dims[1] = k;
    in[1].domain = MemoryDomain::Device;
    TensorView out;
    out.data = y;
    out.dtype = ScalarType::F32;
    out.rank = 2;
    out.dims[0] = m;
    out.dims[1] = n;
    out.domain = MemoryDomain::Device;
    KernelContext ctx;
    ctx.device = &lc;
    ctx.scratch = Span<uint8_t>(scratch, scratch_bytes);
    OpAttrs attrs;
    attrs.kind = AttrKind::Linear;
    cuda::linear(ctx, attrs, in, 2, &out, 1);
    cudaStreamSynchronize(lc.stream);
  }
};

TEST(CudaLinearFailure, FullGemmCacheIsRecorded) {
  CudaOpHarness h;
  if (!h.ok()) return;
  RawRun r;
  ASSERT_TRUE(r.init(1));
  r.run(33);  // the one plan
  EXPECT_FALSE(r.lc.failed) << r.lc.message;
  r.run(33);  // found again
  EXPECT_FALSE(r.lc.failed) << r.lc.message;
  EXPECT_EQ(cuda::gemm_cache_plan_count(r.lc.gemm), 1);
  r.run(34);  // a second shape: the table is full
  EXPECT_TRUE(r.lc.failed);
  EXPECT_NE(std::strstr(r.lc.message, "GemmCache full"), nullptr) << r.lc.message;
  r.lc.failed = false;
  r.run(3);  // the GEMV path needs no plan
  EXPECT_FALSE(r.lc.failed) << r.lc.message;
}

TEST(CudaLinearFailure, CublasLtRefusalIsRecorded) {
  CudaOpHarness h;
  if (!h.ok()) return;
  RawRun r;
  ASSERT_TRUE(r.init(cuda::kGemmCacheCapacity));
  cublasLtHandle_t lt = r.lc.lt;
  r.lc.lt = nullptr;  // an impossible plan: the heuristic has no handle
  r.run(33);
  r.lc.lt = lt;
  EXPECT_TRUE(r.lc.failed);
  EXPECT_NE(std::strstr(r.lc.message, "cuBLASLt"), nullptr) << r.lc.message;
  // The refusal is kept: the same key reports again instead of asking cuBLASLt.
  r.lc.failed = false;
  r.run(33);
  EXPECT_TRUE(r.lc.failed);
}

TEST(CudaLinearFailure, ScratchTooSmallIsRecordedAndMaxShapeScratchServesSmallerM) {
  CudaOpHarness h;
  if (!h.ok()) return;
  RawRun r;
  ASSERT_TRUE(r.init(cuda::kGemmCacheCapacity));
  r.run(33, ScalarType::BF16);  // a bf16 weight needs scratch on the GEMM path; none given
  EXPECT_TRUE(r.lc.failed);
  EXPECT_NE(std::strstr(r.lc.message, "scratch"), nullptr) << r.lc.message;
  // Scratch sized at the max shape (M = 130) serves every smaller M.
  TensorView in[2], out;
  in[0].dtype = ScalarType::F32;
  in[0].rank = 2;
  in[0].dims[0] = r.max_m;
  in[0].dims[1] = r.k;
  in[1].dtype = ScalarType::BF16;
  in[1].rank = 2;
  in[1].dims[0] = r.n;
  in[1].dims[1] = r.k;
  out.dtype = ScalarType::F32;
  out.rank = 2;
  out.dims[0] = r.max_m;
  out.dims[1] = r.n;
  OpAttrs attrs;
  attrs.kind = AttrKind::Linear;
  r.scratch_bytes = cuda::linear_scratch(attrs, in, 2, &out, 1, 1);
  ASSERT_EQ(cudaMalloc(&r.scratch, r.scratch_bytes), cudaSuccess);
  for (int64_t m : {130, 33, 9, 8, 1}) {
    r.lc.failed = false;
    r.run(m, ScalarType::BF16);
    EXPECT_FALSE(r.lc.failed) << "M=" << m << ": " << r.lc.message;
  }
}

}  // namespace
}  // namespace ember
