#include "tests/backends/cuda/cuda_op_harness.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace ember::testing {
namespace {

uint64_t scale_bytes(const TensorView& w) {
  const QuantView& q = *w.quant;
  const int64_t n = w.dims[0], k = w.dims[1];
  const int64_t rows = (n + q.block[0] - 1) / q.block[0], cols = (k + q.block[1] - 1) / q.block[1];
  return nbytes_of(q.scale_dtype, static_cast<uint64_t>(rows * cols));
}

}  // namespace

CudaOpHarness::CudaOpHarness() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    ADD_FAILURE() << "no CUDA GPU: " << (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices")
                  << " (GPU tests carry the ctest label 'gpu' and run on the GPU machine: scripts/test_gpu.sh)";
    return;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  lc_.sm_count = prop.multiProcessorCount;
  if (cudaStreamCreateWithFlags(&lc_.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cublasLtCreate(&lc_.lt) != CUBLAS_STATUS_SUCCESS) {
    ADD_FAILURE() << "cannot create a CUDA stream / cuBLASLt handle";
    return;
  }
  lc_.lt_workspace_bytes = 32u << 20;
  if (cudaMalloc(&lc_.lt_workspace, lc_.lt_workspace_bytes) != cudaSuccess ||
      cudaMalloc(&lc_.error_word, sizeof(uint32_t)) != cudaSuccess) {
    ADD_FAILURE() << "cudaMalloc failed";
    return;
  }
  lc_.gemm = backends::cuda::gemm_cache_create();
  ok_ = lc_.gemm != nullptr;
}

CudaOpHarness::~CudaOpHarness() {
  if (lc_.gemm != nullptr) backends::cuda::gemm_cache_destroy(lc_.gemm);
  if (lc_.lt_workspace != nullptr) cudaFree(lc_.lt_workspace);
  if (lc_.error_word != nullptr) cudaFree(lc_.error_word);
  if (lc_.lt != nullptr) cublasLtDestroy(lc_.lt);
  if (lc_.stream != nullptr) cudaStreamDestroy(lc_.stream);
}

CudaOpHarness::Result CudaOpHarness::run(KernelFn fn, ScratchFn scratch_fn, const OpAttrs& attrs,
                                         std::vector<TensorView> inputs, std::vector<TensorView> outputs,
                                         bool exact, uint32_t instruction) {
  Result result;
  if (!ok_) {
    result.failed = true;
    result.message = "no GPU";
    return result;
  }
  std::vector<void*> allocations;
  auto upload = [&](const void* host, uint64_t bytes) -> void* {
    void* d = nullptr;
    if (cudaMalloc(&d, bytes == 0 ? 1 : bytes) != cudaSuccess) return nullptr;
    allocations.push_back(d);
    if (host != nullptr && bytes > 0) cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    return d;
  };
  std::vector<TensorView> d_in = inputs, d_out = outputs;
  std::vector<QuantView> quant(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    d_in[i].domain = MemoryDomain::Device;
    if (inputs[i].data == nullptr) continue;
    d_in[i].data = upload(inputs[i].data, inputs[i].nbytes());
    if (inputs[i].quant != nullptr) {
      quant[i] = *inputs[i].quant;
      quant[i].scale = upload(inputs[i].quant->scale, scale_bytes(inputs[i]));
      if (inputs[i].quant->global_scale != nullptr) {
        quant[i].global_scale = static_cast<const float*>(upload(inputs[i].quant->global_scale, sizeof(float)));
      }
      d_in[i].quant = &quant[i];
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    d_out[i].domain = MemoryDomain::Device;
    d_out[i].data = upload(nullptr, outputs[i].nbytes());
    if (d_out[i].data != nullptr) cudaMemset(d_out[i].data, 0xFF, outputs[i].nbytes());
  }
  size_t scratch_bytes = 0;
  if (scratch_fn != nullptr) {
    scratch_bytes = scratch_fn(attrs, inputs.data(), inputs.size(), outputs.data(), outputs.size(), 1);
  }
  void* scratch = upload(nullptr, scratch_bytes);
  if (scratch != nullptr && scratch_bytes > 0) cudaMemset(scratch, 0xFF, scratch_bytes);  // poisoned too
  cudaMemset(lc_.error_word, 0, sizeof(uint32_t));
  cudaDeviceSynchronize();

  lc_.failed = false;
  lc_.message[0] = '\0';
  lc_.exact = exact;
  KernelContext ctx;
  ctx.device = &lc_;
  ctx.instruction = instruction;
  ctx.scratch = Span<uint8_t>(static_cast<uint8_t*>(scratch), scratch_bytes);
  fn(ctx, attrs, d_in.data(), d_in.size(), d_out.data(), d_out.size());
  const cudaError_t err = cudaStreamSynchronize(lc_.stream);
  if (err != cudaSuccess) backends::cuda::record_failure(lc_, "stream", cudaGetErrorString(err));
  result.failed = lc_.failed;
  result.message = lc_.message;
  cudaMemcpy(&result.error_word, lc_.error_word, sizeof(uint32_t), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (d_out[i].data != nullptr) cudaMemcpy(outputs[i].data, d_out[i].data, outputs[i].nbytes(), cudaMemcpyDeviceToHost);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].data != nullptr && d_in[i].data != nullptr) {
      cudaMemcpy(inputs[i].data, d_in[i].data, inputs[i].nbytes(), cudaMemcpyDeviceToHost);
    }
  }
  for (void* p : allocations) cudaFree(p);
  return result;
}

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double rel_l2(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

bool any_nan(const float* a, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i])) return true;
  }
  return false;
}

}  // namespace ember::testing
