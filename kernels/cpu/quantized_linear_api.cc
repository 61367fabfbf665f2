// Argument checks, scratch layout and threading of the quantized linear kernels
// (quantized_linear.h); the per-target code is in quantized_linear.cc.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/e4m3_encode.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized_linear.h"
#include "kernels/cpu/quantized_linear_plan.h"
#include "runtime/core/quant.h"

namespace ember::kernels {
namespace cpu_detail {
namespace {

constexpr double kMinParallelWork = 1 << 18;  // weight elements (GEMV) or flops (GEMM)

long long ll(int64_t v) { return static_cast<long long>(v); }

size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
size_t mul_sat(size_t a, size_t b) { return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b; }
size_t round64(size_t a) { return a > SIZE_MAX - 63 ? SIZE_MAX : (a + 63) / 64 * 64; }

// The quantized activations of W8A8: m * k values, then m scales.
size_t w8a8_bytes(int64_t m, int64_t k) {
  return add_sat(round64(mul_sat(mul_sat(size_t(m), size_t(k)), 4)), round64(size_t(m) * 4));
}
int64_t padded_k(int64_t k) { return (k + kMaxGroup - 1) / kMaxGroup * kMaxGroup; }
// The prepared x (m rows of padded_k floats) and the per-row output scales.
size_t prepared_bytes(int64_t m, int64_t k) {
  return add_sat(round64(mul_sat(mul_sat(size_t(m), size_t(padded_k(k))), 4)), round64(size_t(m) * 8));
}

Status check_dims(int64_t m, int64_t n, int64_t k, ErrorContext* error) {
  if (m < 0 || n < 0 || k < 0) {
    return EMBER_FAIL(error, Error::InvalidArgument, "linear m = %lld, n = %lld, k = %lld: negative",
                      ll(m), ll(n), ll(k));
  }
  auto fits = [](int64_t a, int64_t b) { return a == 0 || b <= INT64_MAX / 2 / a; };
  if (!fits(m, k) || !fits(n, k) || !fits(m, n)) {
    return EMBER_FAIL(error, Error::InvalidArgument, "linear m = %lld, n = %lld, k = %lld: too large",
                      ll(m), ll(n), ll(k));
  }
  return Status::ok();
}

Status check_pointers(const QuantPlan& p, const void* scales, bool has_scales, ErrorContext* error) {
  const char* missing = nullptr;
  if (p.m * p.k > 0 && p.x == nullptr) missing = "x";
  else if (p.n * p.k > 0 && p.w == nullptr) missing = "the weight";
  else if (has_scales && p.n * p.k > 0 && scales == nullptr) missing = "the weight scales";
  else if (p.m * p.n > 0 && p.y == nullptr) missing = "y";
  if (missing != nullptr) return EMBER_FAIL(error, Error::InvalidArgument, "linear: %s is null", missing);
  return Status::ok();
}

Status check_fp8_blocks(int64_t block_n, int64_t block_k, ErrorContext* error) {
  if (block_n < 1 || block_k < 1) {
    return EMBER_FAIL(error, Error::InvalidArgument, "FP8 block [%lld, %lld] must be at least [1, 1]",
                      ll(block_n), ll(block_k));
  }
  return Status::ok();
}

Status check_multiple(int64_t k, int64_t block, const char* scheme, ErrorContext* error) {
  if (k % block != 0) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "%s needs k to be a multiple of %lld, got k = %lld", scheme, ll(block), ll(k));
  }
  return Status::ok();
}

void units(const void* plan, size_t begin, size_t end) {
  quant_units(*static_cast<const QuantPlan*>(plan), begin, end);
}

void prepare_rows(const void* plan, size_t begin, size_t end) {
  quant_prepare(*static_cast<const QuantPlan*>(plan), begin, end);
}

struct QuantizeRows {
  const float* x;
  int64_t k;
  float* xq;
  float* sx;
};

void quantize_units(const void* arg, size_t begin, size_t end) {
  const QuantizeRows& a = *static_cast<const QuantizeRows*>(arg);
  cpu::quantize_rows_e4m3fn(a.x, a.k, begin, end, a.xq, a.sx);
}

Status run(const KernelContext& context, QuantPlan& plan, ErrorContext* error) {
  if (plan.m == 0 || plan.n == 0) return Status::ok();
  if (plan.k == 0) {  // x wᵀ is all zeros: y = bias, or 0
    for (int64_t i = 0; i < plan.m; ++i)
      for (int64_t j = 0; j < plan.n; ++j) plan.y[i * plan.n + j] = plan.bias != nullptr ? plan.bias[j] : 0.0f;
    return Status::ok();
  }
  ThreadPool* pool = context.pool;
  // The scratch, aligned to 64 bytes: the W8A8 activations, then the prepared x.
  uint8_t* cursor = context.scratch.data();
  const size_t pad = (64 - reinterpret_cast<uintptr_t>(cursor) % 64) % 64;
  const size_t avail = context.scratch.size() > pad ? context.scratch.size() - pad : 0;
  cursor += pad;
  const size_t activations = plan.w8a8 ? w8a8_bytes(plan.m, plan.k) : 0;
  if (avail < add_sat(activations, prepared_bytes(plan.m, plan.k))) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "quantized linear [%lld, %lld] x [%lld, %lld]: scratch of %zu bytes is too small "
                      "(quantized_linear_scratch_bytes)", ll(plan.m), ll(plan.k), ll(plan.n),
                      ll(plan.k), context.scratch.size());
  }
  if (plan.w8a8) {
    const size_t values = round64(size_t(plan.m) * size_t(plan.k) * 4);
    QuantizeRows q{plan.x, plan.k, reinterpret_cast<float*>(cursor),
                   reinterpret_cast<float*>(cursor + values)};
    run_units(pool, size_t(plan.m), double(plan.m) * double(plan.k), kMinParallelWork, &q,
              quantize_units);
    plan.x = q.xq;
    plan.sx = q.sx;
    cursor += activations;
  }
  plan.kp = padded_k(plan.k);
  plan.xp = reinterpret_cast<float*>(cursor);
  plan.y_scale = reinterpret_cast<double*>(cursor + round64(size_t(plan.m) * size_t(plan.kp) * 4));
  run_units(pool, size_t(plan.m), double(plan.m) * double(plan.kp), kMinParallelWork, &plan, prepare_rows);
  const size_t unit_count = size_t((plan.n + kUnitRows - 1) / kUnitRows);
  run_units(pool, unit_count, double(plan.m) * double(plan.n) * double(plan.k), kMinParallelWork,
            &plan, units);
  return Status::ok();
}

QuantPlan make_plan(QuantFormat format, const float* x, int64_t m, const void* w, int64_t n,
                    int64_t k, const float* bias, float* y) {
  QuantPlan p{};
  p.format = format;
  p.x = x;
  p.m = m;
  p.n = n;
  p.k = k;
  p.w = static_cast<const uint8_t*>(w);
  p.bias = bias;
  p.y = y;
  p.block_n = 1;
  p.block_k = k > 0 ? k : 1;
  p.block_cols = 1;
  return p;
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

using cpu_detail::QuantFormat;
using cpu_detail::QuantPlan;

size_t quantized_linear_scratch_bytes(int64_t m, int64_t k, size_t thread_count, bool w8a8) {
  (void)thread_count;  // the scratch is shared by the threads
  if (m <= 0 || k <= 0) return 0;
  const size_t bytes = cpu_detail::add_sat(w8a8 ? cpu_detail::w8a8_bytes(m, k) : 0,
                                           cpu_detail::prepared_bytes(m, k));
  return cpu_detail::add_sat(bytes, 64);  // + alignment slack
}

Status linear_fp8_e4m3(const KernelContext& context, const float* x, int64_t m,
                       const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                       int64_t block_k, const float* scales, const float* bias, float* y,
                       ErrorContext* error, bool nan_free) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_fp8_blocks(block_n, block_k, error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Fp8, x, m, codes, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  // Blocks larger than the weight act as the whole dimension (and keep index math small).
  p.block_n = block_n < n ? block_n : (n > 0 ? n : 1);
  p.block_k = block_k < k ? block_k : (k > 0 ? k : 1);
  p.block_cols = (k + p.block_k - 1) / p.block_k;
  p.fp8_scales = scales;
  p.row_bytes = k;
  p.nan_free = nan_free;
  return cpu_detail::run(context, p, error);
}

Status linear_mxfp8(const KernelContext& context, const float* x, int64_t m, const uint8_t* codes,
                    int64_t n, int64_t k, const uint8_t* scales, const float* bias, float* y,
                    ErrorContext* error, bool nan_free) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_multiple(k, kMxBlock, "MXFP8", error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Mxfp8, x, m, codes, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  p.block_k = kMxBlock;
  p.block_cols = k / kMxBlock;
  p.u8_scales = scales;
  p.row_bytes = k;
  p.nan_free = nan_free;
  return cpu_detail::run(context, p, error);
}

Status linear_nvfp4(const KernelContext& context, const float* x, int64_t m,
                    const uint8_t* packed, int64_t n, int64_t k, const uint8_t* scales,
                    float global_scale, const float* bias, float* y, ErrorContext* error) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_multiple(k, kNvfp4Block, "NVFP4", error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Nvfp4, x, m, packed, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  EMBER_RETURN_IF_ERROR(check_nvfp4_global_scale(global_scale, error));
  p.block_k = kNvfp4Block;
  p.block_cols = k / kNvfp4Block;
  p.u8_scales = scales;
  p.global_scale = global_scale;
  p.row_bytes = k / 2;
  return cpu_detail::run(context, p, error);
}

Status linear_bf16(const KernelContext& context, const float* x, int64_t m, const uint16_t* w,
                   int64_t n, int64_t k, const float* bias, float* y, ErrorContext* error) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Bf16, x, m, w, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, nullptr, false, error));
  p.row_bytes = 2 * k;
  return cpu_detail::run(context, p, error);
}

Status linear_fp8_e4m3_w8a8(const KernelContext& context, const float* x, int64_t m,
                            const uint8_t* codes, int64_t n, int64_t k, int64_t block_n,
                            int64_t block_k, const float* scales, const float* bias, float* y,
                            ErrorContext* error, bool nan_free) {
  EMBER_RETURN_IF_ERROR(cpu_detail::check_dims(m, n, k, error));
  EMBER_RETURN_IF_ERROR(cpu_detail::check_fp8_blocks(block_n, block_k, error));
  if (block_k < k || (block_n != 1 && block_n < n)) {
    return EMBER_FAIL(error, Error::InvalidArgument,
                      "W8A8 needs a per-tensor or per-channel FP8 weight scale; block [%lld, %lld] "
                      "of a [%lld, %lld] weight is neither", cpu_detail::ll(block_n),
                      cpu_detail::ll(block_k), cpu_detail::ll(n), cpu_detail::ll(k));
  }
  QuantPlan p = cpu_detail::make_plan(QuantFormat::Fp8, x, m, codes, n, k, bias, y);
  EMBER_RETURN_IF_ERROR(cpu_detail::check_pointers(p, scales, true, error));
  p.w8a8 = true;
  p.block_n = block_n == 1 ? 1 : (n > 0 ? n : 1);  // 1: per channel; n: per tensor
  p.fp8_scales = scales;
  p.row_bytes = k;
  p.nan_free = nan_free;
  return cpu_detail::run(context, p, error);
}

}  // namespace cpu
}  // namespace ember::kernels
