// The CUDA backend's kernels (backends/cuda/README.md): one host function per op with the portable
// KernelFn signature (runtime/kernel/kernel.h), bound by KernelKey through a KernelRegistry of their
// own (register_cuda_kernels), so the interpreter's binding and shape functions serve the device too.
// A function only *enqueues* work on LaunchContext::stream: no host synchronisation, no host heap,
// no host read of device memory. Every data pointer it receives is device memory (TensorView::domain
// says Device): inputs, outputs, constants, program state (the KV cache) and KernelContext::scratch
// (device scratch of the size the op's ScratchFn asked for at the bound shapes). Attributes and
// dims are host metadata. QuantView::scale and global_scale point to device memory as well.
//
// Semantics are kernels/reference's (kernels/reference/ops.h is exact); tolerances per dtype are in
// tests/backends/cuda. Errors:
//  - a launch or library failure: record_failure() / check_launch(); the backend turns the first
//    one into BackendFailed naming the op and the CUDA / cuBLASLt error string;
//  - bad input data that only the device sees (a token id outside the table, a block id outside the
//    pool): the kernel writes defined output (zeros), never reads or writes out of bounds, and calls
//    device_report() once; the backend copies the error word back with the step's outputs and fails
//    the step with InvalidArgument naming the op and the reason (DeviceError).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/kernel/kernel.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember::backends::cuda {

// Why a kernel refused device-side data: error word = (OpCode << 8) | DeviceError.
enum class DeviceError : uint32_t {
  None = 0,
  IdOutOfRange = 1,       // embedding: a token id outside [0, V)
  BlockOutOfRange = 2,    // paged_attention: a block id outside [0, block_count)
  SlotOutOfRange = 3,     // paged_attention: slot_mapping outside the pool
  ContextTooLong = 4,     // paged_attention: context_len beyond max_blocks * block_size, or < q_len
  BadQueryStart = 5,      // paged_attention: query_start not increasing / beyond T
  IndexOutOfRange = 6,    // logits_gather: an index outside [-1, T)
  Nan = 7,                // reserved: a non-finite value where none may be
  BadSampling = 8,        // sample: a parameter outside its range (the portable sample_check's rules)
};
const char* to_string(DeviceError e);

struct GemmCache;  // cuBLASLt plans per (shape, types, scale modes): ops/linear.cu

// W8A8 activation quantization fused into the producer (README "Fusions"). The backend finds, at
// init, each rms_norm / silu_mul whose f32 output [M, K] feeds a linear with FP8 per-tensor /
// per-channel weights and per-token FP8 activations, and gives the group a planned device buffer
// (alive from the producer to its last such linear). The producer writes the per-token scales and
// the quantized rows there besides its f32 output; the linears read them instead of quantizing the
// same rows once each. Both sides pick the form from (M, K) alone (quant_form), so no flag passes
// between kernels. Indexed by KernelContext::instruction.
enum class FusedRole : uint8_t { None, Produce, Consume };
struct FusedQuant {
  FusedRole role = FusedRole::None;
  float* sx = nullptr;    // [M] per-token scales
  void* data = nullptr;   // [M, K]: f32 values of the codes (QuantForm::F32) or e4m3 codes (Codes)
};
enum class QuantForm : uint8_t {
  None,   // not fused: the linear quantizes x itself
  F32,    // M <= 8 (the W8A8 GEMV): the codes' exact f32 values
  Codes,  // M > 8 and K % 16 == 0 (the FP8 GEMM): e4m3 codes
};
constexpr int64_t kGemvMaxRows = 8;  // ops/linear.cu: the GEMV path's largest M
inline QuantForm quant_form(int64_t m, int64_t k) {
  if (m <= 0 || k <= 0) return QuantForm::None;
  if (m <= kGemvMaxRows) return QuantForm::F32;
  return k % 16 == 0 ? QuantForm::Codes : QuantForm::None;
}

// What every CUDA kernel function gets through KernelContext::device. Owned by the backend (one per
// delegate; one stream per Method), borrowed by the ops for the call.
struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;     // device, for cublasLtMatmul (passed explicitly: graph capture)
  size_t lt_workspace_bytes = 0;
  uint32_t* error_word = nullptr;   // device, zeroed by the backend before a step; device_report()
  int sm_count = 0;                 // of the current device
  // Numerics. false (default): linears with more rows than the GEMV path takes run bf16 tensor
  // cores (activations rounded to bf16, f32 accumulation). true: every linear computes in f32 from
  // the exactly decoded weights (tests compare with the reference at the f32 bound).
  bool exact = false;
  GemmCache* gemm = nullptr;        // created by the backend with gemm_cache_create()
  // The first host-side failure of this run (launch error, cuBLASLt status). Checked by the backend
  // after the run; ops keep going (their launches are skipped once failed is set).
  bool failed = false;
  char message[256] = {};
  // Fused W8A8 activation quantization, one entry per instruction (null: none fused).
  const FusedQuant* fused = nullptr;
  uint32_t fused_count = 0;
};

inline LaunchContext& launch_context(KernelContext& ctx) { return *static_cast<LaunchContext*>(ctx.device); }

// This instruction's fused quantization in `role`, or null.
inline const FusedQuant* fused_quant(const KernelContext& ctx, FusedRole role) {
  const LaunchContext& lc = *static_cast<const LaunchContext*>(ctx.device);
  if (lc.fused == nullptr || ctx.instruction >= lc.fused_count) return nullptr;
  const FusedQuant* f = &lc.fused[ctx.instruction];
  return f->role == role ? f : nullptr;
}

// Records the first failure: "what: detail" into lc.message, failed = true. Later ones are dropped.
void record_failure(LaunchContext& lc, const char* what, const char* detail);
// After a kernel launch: records cudaGetLastError() (if any) as "what: <CUDA error string>".
// Returns false when the launch failed.
bool check_launch(LaunchContext& lc, const char* what);
// After a CUDA runtime call: records a failure (with the error string) unless it is cudaSuccess.
bool check_cuda(LaunchContext& lc, cudaError_t err, const char* what);

#ifdef __CUDACC__
// Device side: records the first bad-input error of a step (atomicCAS on the error word).
__device__ inline void device_report(uint32_t* word, OpCode op, DeviceError e) {
  if (word != nullptr) atomicCAS(word, 0u, (static_cast<uint32_t>(op) << 8) | static_cast<uint32_t>(e));
}
#endif

// cuBLASLt plan cache (ops/linear.cu): created at the backend's init, destroyed in destroy().
// Plans are made on first use of a shape (at init: graph capture runs every bucket's shapes then),
// so replayed steps create nothing.
GemmCache* gemm_cache_create();
void gemm_cache_destroy(GemmCache* cache);

#define EMBER_CUDA_KERNEL(name)                                                                        \
  void name(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t input_count, \
            TensorView* outputs, size_t output_count)
#define EMBER_CUDA_SCRATCH(name)                                                                         \
  size_t name(const OpAttrs& attrs, const TensorView* inputs, size_t input_count, const TensorView* outputs, \
              size_t output_count, size_t threads)

// ops/elementwise.cu
EMBER_CUDA_KERNEL(embedding);      // weight [V, H] f32/bf16/f16, ids [T] i32 -> f32 [T, H]
EMBER_CUDA_KERNEL(rms_norm);       // x [.., H] f32, weight [H] -> f32; attrs.epsilon
EMBER_CUDA_KERNEL(rope);           // x [T, heads, D], positions [T] i32, inv_freq [D/2] -> f32
EMBER_CUDA_KERNEL(silu_mul);       // gate, up (same dims) -> silu(gate) * up
EMBER_CUDA_KERNEL(add);            // f32, numpy broadcasting (rank <= 8)
EMBER_CUDA_KERNEL(reshape);        // any dtype: a device-to-device copy (nothing when in place)
EMBER_CUDA_KERNEL(logits_gather);  // hidden [T, H], indices [S] i32 -> [S, H] (-1: zeros)
// ops/sample.cu
EMBER_CUDA_KERNEL(sample);         // kernels/reference/ops.h's sample, bit-exact ids where the math allows
EMBER_CUDA_SCRATCH(sample_scratch);
// ops/paged_attention.cu
EMBER_CUDA_KERNEL(paged_attention);  // kernels/reference/paged_attention.h; attrs.attn_scale, kv_scale
EMBER_CUDA_SCRATCH(paged_attention_scratch);
// ops/linear.cu
EMBER_CUDA_KERNEL(linear);         // x [.., K] f32, w [N, K] f32/bf16/quantized, bias [N]? -> f32
EMBER_CUDA_SCRATCH(linear_scratch);

// Adds every signature above to `registry` (library "cuda"), the same keys as kernels/reference's
// for these ops: what Backend::supports() answers and what the exporter's manifest lists.
Status register_cuda_kernels(KernelRegistry& registry);

}  // namespace ember::backends::cuda
