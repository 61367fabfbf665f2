// Runs one CUDA kernel function (backends/cuda/ops/cuda_ops.h) on host data, for the op tests:
// uploads the inputs (with their quantized weights' scales), poisons every output (0xFF bytes: NaN
// for floats, -1 for ints) so a kernel that skips an element fails, runs the function on a stream of
// its own, and copies the outputs and the inputs (caches written in place) back. The tests compare
// with kernels/reference. Without a GPU the harness constructor fails the test with a clear message.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/ops/cuda_ops.h"

namespace ember::testing {

class CudaOpHarness {
 public:
  CudaOpHarness();   // ADD_FAILURE when no usable GPU (ok() is then false)
  ~CudaOpHarness();
  CudaOpHarness(const CudaOpHarness&) = delete;
  CudaOpHarness& operator=(const CudaOpHarness&) = delete;
  bool ok() const { return ok_; }

  struct Result {
    bool failed = false;        // LaunchContext::failed (a launch / library error)
    std::string message;        // its message
    uint32_t error_word = 0;    // the device error word ((OpCode << 8) | DeviceError), 0 = none
  };
  // `inputs` and `outputs` are host views (data = host memory; an input's quant may point at a host
  // QuantView whose scale / global_scale are host pointers). Output dims must be set. `scratch` may
  // be null (no scratch). `exact` sets LaunchContext::exact. Outputs and inputs are copied back.
  // `instruction` is KernelContext::instruction (the index set_fused's table is read at).
  Result run(KernelFn fn, ScratchFn scratch, const OpAttrs& attrs, std::vector<TensorView> inputs,
             std::vector<TensorView> outputs, bool exact = false, uint32_t instruction = 0);
  // The fused-quantization table the next runs see (LaunchContext::fused; null: none). Borrowed.
  void set_fused(const backends::cuda::FusedQuant* table, uint32_t count) {
    lc_.fused = table;
    lc_.fused_count = count;
  }

  const backends::cuda::LaunchContext& launch() const { return lc_; }

 private:
  bool ok_ = false;
  backends::cuda::LaunchContext lc_;
};

// Host buffers for tests.
std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// rel L2 = ||a - b|| / max(||b||, tiny); NaN in either counts as infinite.
double rel_l2(const float* a, const float* b, size_t n);
bool any_nan(const float* a, size_t n);

}  // namespace ember::testing
