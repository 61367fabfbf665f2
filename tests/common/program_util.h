// Helpers for tests that export programs in-process and run them in the runtime:
//   Runtime          kernels (builtin), optional null and sim backends, optional FixedThreadPool
//   export_program   GraphBuilder graph -> .pte bytes through the real exporter pipeline, with the
//                    capability manifest of this build built in-process (no file paths)
//   LoadedProgram    aligned copy of the bytes + loader + Program
//   MethodMemory     arenas, method allocator and scratch sized from MethodMeta
//   run_method       set inputs, execute, copy outputs
//   i32_tensor       HostTensors from values (and f32_tensor)
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/ir/graph.h"
#include "exporter/partition/manifest.h"
#include "exporter/passes/evaluate.h"
#include "exporter/pipeline.h"
#include "runtime/backend/backend.h"
#include "runtime/core/data_loader.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/core/thread_pool.h"
#include "runtime/executor/load_options.h"
#include "runtime/executor/memory_plan.h"
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember::testing {

// Heap bytes with a chosen alignment, zero-filled. Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, size_t alignment = 64);
  AlignedBuffer(const uint8_t* data, size_t size, size_t alignment = 64);
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

struct RuntimeOptions {
  bool kernels = true;       // register_builtin; false = empty registry
  bool null_backend = true;  // register backends/null
  bool sim_backend = false;  // register backends/sim (after null)
  size_t threads = 0;        // 0 = no pool; otherwise a FixedThreadPool of that many threads
};

// Registries and pool; `context` points at them. Not movable (the context borrows members).
class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& options = {});
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  RuntimeContext context;
  std::unique_ptr<KernelRegistry> kernels;
  std::unique_ptr<BackendRegistry> backends;
  std::unique_ptr<FixedThreadPool> pool;
};

// The capability manifest of this build (builtin kernels, the null backend's ops, and every
// signature the sim backend's supports() accepts), made in-process as tools/capabilities writes it.
const exporter::CapabilityManifest& builtin_manifest();
// The same kernels with "sim" listing only its signatures of `ops` (null as above): a sim export
// then delegates those ops and leaves the others to the portable kernels.
exporter::CapabilityManifest sim_manifest(const std::vector<OpCode>& ops);

// Exports `graph` (backends in priority order; {"null", "portable"} delegates what null supports,
// {"sim"} the whole graph to sim). `manifest` null: builtin_manifest(). `allow_non_finite_weights`
// for tests that put NaN / Inf into weights on purpose.
exporter::ExportResult export_program(exporter::Graph graph, const std::vector<std::string>& backends = {"portable"},
                                      const std::optional<exporter::QuantizeOptions>& quantize = std::nullopt,
                                      const exporter::CapabilityManifest* manifest = nullptr,
                                      bool allow_non_finite_weights = false);

// The bundled examples: "mlp", "cnn" (portable), "cnn_null" (cnn with a GRAPH delegate for "null"),
// "cnn_sim" (cnn with its conv2d and linear nodes in three GRAPH delegates for "sim"),
// "mlp_fp8", "mlp_fp8_dynamic", "mlp_nvfp4" (mlp with every linear quantized by that preset),
// "paged_attention" (exporter/importers/builder/examples.h, method "step", KV cache as program state,
// an LlmInfo table without a tokenizer), "paged_attention_sim" (the same with paged_attention in a
// GRAPH delegate for "sim" that holds the KV cache state).
const exporter::ExportResult& example(const std::string& name);

// A program in memory: a 64-aligned copy of the bytes, a BufferDataLoader and the loaded Program.
class LoadedProgram {
 public:
  LoadedProgram(const std::vector<uint8_t>& file, const RuntimeContext& runtime, const LoadOptions& options = {});
  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;
  bool ok() const { return program_.has_value(); }
  Error error() const { return error_; }
  const ErrorContext& ctx() const { return ctx_; }
  Program& program() { return *program_; }

 private:
  AlignedBuffer bytes_;
  std::unique_ptr<BufferDataLoader> loader_;
  std::optional<Program> program_;
  Error error_ = Error::Ok;
  ErrorContext ctx_;
};

// Memory for one method, sized from its MethodMeta. `allocator_bytes` overrides the method
// allocator's size (SIZE_MAX = exactly meta.method_allocator_bytes()); `arena_shrink[i]` bytes are
// taken off arena i.
class MethodMemory {
 public:
  explicit MethodMemory(const MethodMeta& meta, size_t allocator_bytes = SIZE_MAX,
                        const std::vector<size_t>& arena_shrink = {});
  MethodMemory(const MethodMemory&) = delete;
  MethodMemory& operator=(const MethodMemory&) = delete;
  MemoryPlan& plan() { return *plan_; }
  BumpAllocator& allocator() { return *allocator_; }

 private:
  AlignedBuffer allocator_memory_;
  std::unique_ptr<BumpAllocator> allocator_;
  std::vector<AlignedBuffer> arena_memory_;
  std::vector<Span<uint8_t>> arenas_;
  AlignedBuffer scratch_;
  std::unique_ptr<MemoryPlan> plan_;
};

// A loaded program plus one loaded method, with memory from its meta.
class LoadedMethod {
 public:
  LoadedMethod(const std::vector<uint8_t>& file, const RuntimeContext& runtime, const LoadOptions& options = {},
               const char* method = "forward");
  bool ok() const { return method_.has_value(); }
  const ErrorContext& ctx() const { return ctx_; }
  Error error() const { return error_; }
  Method& method() { return *method_; }
  Program& program() { return program_.program(); }

 private:
  LoadedProgram program_;
  std::unique_ptr<MethodMemory> memory_;
  std::optional<Method> method_;
  Error error_ = Error::Ok;
  ErrorContext ctx_;
};

// An i32 / f32 HostTensor of `dims` holding `values`.
exporter::HostTensor i32_tensor(std::vector<int64_t> dims, const std::vector<int32_t>& values);
exporter::HostTensor f32_tensor(std::vector<int64_t> dims, const std::vector<float>& values);

// A view of a HostTensor (the data pointer is borrowed).
TensorView view_of(const exporter::HostTensor& t);
// Copies a runtime output.
exporter::HostTensor copy_of(const TensorView& v);

// set_input for each input, execute, copy every output. ADD_FAILUREs and returns {} on an error.
std::vector<exporter::HostTensor> run_method(Method& method, const std::vector<exporter::HostTensor>& inputs);

// Deterministic values in [-2, 2].
std::vector<float> pattern(size_t n, uint32_t seed = 0);

// f32 comparison: |a - e| <= abs + rel * |e|; reports the first mismatch. Dims must match.
struct Tolerance {
  float abs = 1e-5f;
  float rel = 1e-4f;
};
void ExpectAllClose(const exporter::HostTensor& actual, const exporter::HostTensor& expected, Tolerance tol = {});
// Bitwise equality of dtype, dims and bytes.
void ExpectBitwiseEqual(const exporter::HostTensor& a, const exporter::HostTensor& b);

// MethodMeta::delegate(i).memory (planned, before init) equals Method::delegate_memory(i) (what init
// took) for the whole method and every delegate; `backend_delegates` of them run on `backend` and take
// host memory (and device memory, for "sim"), the others (the portable kernels) none; and
// MethodMeta::backend_memory() is their sum.
void ExpectPlannedMemoryIsTaken(LoadedMethod& lm, const char* backend, size_t backend_delegates);

// The state `name` is the sim backend's device memory: no host data, and a host read of its device
// address faults (SIGSEGV). A death test: the caller sets death_test_style "threadsafe".
void ExpectHostReadOfSimStateFaults(const Program& program, const char* name);

}  // namespace ember::testing
