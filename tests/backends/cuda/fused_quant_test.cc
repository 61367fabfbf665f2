// W8A8 activation quantization fused into the producer (backends/cuda/ops/cuda_ops.h FusedQuant):
// rms_norm and silu_mul, given a Produce entry, also write the per-token scales and quantized rows;
// a linear with FP8 per-tensor / per-channel weights and Fp8PerToken activations, given the Consume
// entry, reads them instead of quantizing x. For M in {1, 5, 8, 9, 33} and K with and without
// K % 16 == 0:
//  - the producer's f32 output is bit-identical with and without fusion;
//  - the fused linear equals the unfused one (bit-exact on the GEMV path, M <= 8; within 1e-6 on
//    the FP8 GEMM path) and the reference on the same f32 rows (1e-6 / 1e-3 rel L2);
//  - it really read the buffer: fed zeros as x, it still gives the fused result where the form
//    (quant_form) fuses, and the bias-only result where it does not (it quantized x itself).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "kernels/reference/ops.h"
#include "kernels/reference/quantize.h"
#include "tests/backends/cuda/cuda_op_harness.h"

namespace ember {
namespace {

namespace cuda = backends::cuda;
namespace ref = kernels::reference;
using testing::CudaOpHarness;

TensorView view(const float* data, std::vector<int64_t> dims, ScalarType dtype = ScalarType::F32) {
  TensorView v;
  v.data = const_cast<float*>(data);
  v.dtype = dtype;
  v.rank = static_cast<uint8_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) v.dims[i] = dims[i];
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

enum class Producer { RmsNorm, SiluMul };

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { ok = cudaMalloc(&p, bytes) == cudaSuccess; }
  ~DeviceBuffer() {
    if (p != nullptr) cudaFree(p);
  }
  void* p = nullptr;
  bool ok = false;
};

void check(Producer producer, int64_t m, int64_t k, int64_t n, bool per_tensor) {
  SCOPED_TRACE(::testing::Message() << (producer == Producer::RmsNorm ? "rms_norm" : "silu_mul") << " M=" << m
                                    << " K=" << k << " N=" << n << (per_tensor ? " per tensor" : " per channel"));
  CudaOpHarness h;
  ASSERT_TRUE(h.ok());
  const size_t mk = static_cast<size_t>(m * k);
  // The producer's inputs: x and the norm weight, or gate and up.
  const std::vector<float> a = testing::random_floats(mk, 11 + m * 3 + k, -3.0f, 3.0f);
  const std::vector<float> b = testing::random_floats(producer == Producer::RmsNorm ? size_t(k) : mk, 17 + m + k, 0.5f, 1.5f);
  OpAttrs pattrs;
  pattrs.epsilon = 1e-6f;
  KernelFn pfn = producer == Producer::RmsNorm ? cuda::rms_norm : cuda::silu_mul;
  const std::vector<TensorView> pin = {view(a.data(), {m, k}),
                                       view(b.data(), producer == Producer::RmsNorm ? std::vector<int64_t>{k}
                                                                                    : std::vector<int64_t>{m, k})};
  // The weight, quantized by the reference.
  const std::vector<float> wf = testing::random_floats(static_cast<size_t>(n * k), 29 + n + k);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  const int64_t bn = per_tensor ? n : 1;
  std::vector<float> scales(static_cast<size_t>(n / bn));
  ASSERT_TRUE(ref::quantize_fp8_e4m3(wf.data(), n, k, bn, k, codes.data(), scales.data()).is_ok());
  QuantView q;
  q.scale = scales.data();
  q.scale_dtype = ScalarType::F32;
  q.block[0] = bn;
  q.block[1] = k;
  q.layout = classify_quant(ScalarType::F8E4M3FN, ScalarType::F32, n, k, bn, k, false);
  TensorView wv;
  wv.data = codes.data();
  wv.dtype = ScalarType::F8E4M3FN;
  wv.rank = 2;
  wv.dims[0] = n;
  wv.dims[1] = k;
  wv.quant = &q;
  const std::vector<float> bias = testing::random_floats(static_cast<size_t>(n), 31 + n);
  OpAttrs lattrs;
  lattrs.kind = AttrKind::Linear;
  lattrs.activation_quant = ActivationQuant::Fp8PerToken;
  auto linear = [&](const std::vector<float>& x, std::vector<float>* y, uint32_t instruction) {
    y->assign(static_cast<size_t>(m * n), 0.0f);
    const auto r = h.run(cuda::linear, cuda::linear_scratch, lattrs,
                         {view(x.data(), {m, k}), wv, view(bias.data(), {n})}, {view(y->data(), {m, n})}, false,
                         instruction);
    ASSERT_FALSE(r.failed) << r.message;
  };

  // Unfused.
  std::vector<float> y_plain(mk), out_plain;
  h.set_fused(nullptr, 0);
  ASSERT_FALSE(h.run(pfn, nullptr, pattrs, pin, {view(y_plain.data(), {m, k})}).failed);
  linear(y_plain, &out_plain, 1);

  // Fused: instruction 0 produces, instruction 1 consumes; the buffer poisoned first.
  const size_t scales_bytes = (static_cast<size_t>(m) * 4 + 255) / 256 * 256;
  DeviceBuffer buffer(scales_bytes + mk * 4);
  ASSERT_TRUE(buffer.ok);
  ASSERT_EQ(cudaMemset(buffer.p, 0xFF, scales_bytes + mk * 4), cudaSuccess);
  cuda::FusedQuant table[2];
  table[0] = {cuda::FusedRole::Produce, static_cast<float*>(buffer.p), static_cast<uint8_t*>(buffer.p) + scales_bytes};
  table[1] = {cuda::FusedRole::Consume, table[0].sx, table[0].data};
  h.set_fused(table, 2);
  std::vector<float> y_fused(mk), out_fused, out_zeros;
  ASSERT_FALSE(h.run(pfn, nullptr, pattrs, pin, {view(y_fused.data(), {m, k})}, false, 0).failed);
  EXPECT_TRUE(same_bits(y_fused, y_plain)) << "the fused producer changed its f32 output";
  linear(y_fused, &out_fused, 1);
  const std::vector<float> zeros(mk, 0.0f);
  linear(zeros, &out_zeros, 1);
  h.set_fused(nullptr, 0);

  ASSERT_FALSE(testing::any_nan(out_fused.data(), out_fused.size()));
  if (m <= cuda::kGemvMaxRows) {
    EXPECT_TRUE(same_bits(out_fused, out_plain)) << "the GEMV's result changed with fusion";
  } else {
    EXPECT_LE(testing::rel_l2(out_fused.data(), out_plain.data(), out_fused.size()), 1e-6);
  }
  // The reference on the same f32 rows.
  std::vector<float> want(static_cast<size_t>(m * n));
  {
    QuantView rq = q;
    TensorView rw = wv;
    rw.quant = &rq;
    const TensorView in[] = {view(y_plain.data(), {m, k}), rw, view(bias.data(), {n})};
    TensorView out = view(want.data(), {m, n});
    KernelContext ctx;
    ref::linear_quantized(ctx, lattrs, in, 3, &out, 1);
  }
  EXPECT_LE(testing::rel_l2(out_fused.data(), want.data(), want.size()), m <= cuda::kGemvMaxRows ? 1e-6 : 1e-3);

  // Which rows the fused linear read: the producer's buffer where the form fuses, else x.
  if (cuda::quant_form(m, k) != cuda::QuantForm::None) {
    EXPECT_TRUE(same_bits(out_zeros, out_fused)) << "the consumer quantized x instead of reading the buffer";
  } else {
    std::vector<float> bias_rows(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) std::memcpy(&bias_rows[size_t(i * n)], bias.data(), size_t(n) * 4);
    EXPECT_TRUE(same_bits(out_zeros, bias_rows)) << "no fused form at this (M, K): x must be quantized";
  }
}

const int64_t kRows[] = {1, 5, 8, 9, 33};

TEST(CudaFusedQuant, RmsNormIntoW8a8Linears) {
  for (int64_t m : kRows) {
    check(Producer::RmsNorm, m, 256, 144, false);
    check(Producer::RmsNorm, m, 200, 75, true);  // K % 16 != 0: not fused past the GEMV
  }
}

TEST(CudaFusedQuant, SiluMulIntoW8a8Linears) {
  for (int64_t m : kRows) {
    check(Producer::SiluMul, m, 4160, 48, true);  // K > 4096: 1024 threads a row
    check(Producer::SiluMul, m, 72, 75, false);
  }
}

}  // namespace
}  // namespace ember
