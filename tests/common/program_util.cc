#include "tests/common/program_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/builtin.h"
#include "backends/null/register.h"
#include "backends/sim/register.h"
#include "exporter/importers/builder/examples.h"
#include "exporter/plan/overlap_check.h"
#include "kernels/builtin.h"
#include "tools/capabilities/manifest_writer.h"

namespace ember::testing {

AlignedBuffer::AlignedBuffer(size_t size, size_t alignment) : size_(size) {
  const size_t rounded = ((size == 0 ? 1 : size) + alignment - 1) / alignment * alignment;
  uint8_t* p = static_cast<uint8_t*>(std::aligned_alloc(alignment, rounded));
  if (p == nullptr) std::abort();
  std::memset(p, 0, rounded);
  data_.reset(p);
}

AlignedBuffer::AlignedBuffer(const uint8_t* data, size_t size, size_t alignment) : AlignedBuffer(size, alignment) {
  if (size) std::memcpy(data_.get(), data, size);
}

Runtime::Runtime(const RuntimeOptions& options)
    : kernels(std::make_unique<KernelRegistry>()), backends(std::make_unique<BackendRegistry>()) {
  if (options.kernels && !register_builtin(*kernels).is_ok()) ADD_FAILURE() << "register_builtin failed";
  if (options.null_backend && !backends::null_backend::register_backend(*backends).is_ok()) {
    ADD_FAILURE() << "null backend registration failed";
  }
  if (options.sim_backend && !backends::sim::register_backend(*backends).is_ok()) {
    ADD_FAILURE() << "sim backend registration failed";
  }
  if (options.threads > 0) pool = std::make_unique<FixedThreadPool>(options.threads);
  context.kernels = kernels.get();
  context.backends = backends.get();
  context.pool = pool.get();
}

namespace {

// The manifest of kernels + every backend this build registers (null, sim, and the device backends
// built: cuda), written as tools/capabilities writes it. `sim_ops` empty: sim lists every signature
// its supports() accepts; otherwise only those of these ops.
std::string manifest_json(const std::vector<OpCode>& sim_ops) {
  auto registry = std::make_unique<KernelRegistry>();
  auto backends = std::make_unique<BackendRegistry>();
  if (!register_builtin(*registry).is_ok() || !register_builtin_backends(*backends).is_ok()) {
    throw std::runtime_error("registration failed");
  }
  RuntimeContext runtime;
  runtime.kernels = registry.get();
  runtime.backends = backends.get();
  return tools::capability_manifest_json(runtime, [&](const char* backend, const KernelKey& key) {
    if (std::strcmp(backend, backends::sim::kBackendId) != 0 || sim_ops.empty()) return true;
    for (OpCode op : sim_ops) {
      if (op == key.op) return true;
    }
    return false;
  });
}

}  // namespace

const exporter::CapabilityManifest& builtin_manifest() {
  static const exporter::CapabilityManifest manifest =
      exporter::CapabilityManifest::parse(manifest_json({}), "in-process test manifest");
  return manifest;
}

exporter::CapabilityManifest sim_manifest(const std::vector<OpCode>& ops) {
  if (ops.empty()) throw std::runtime_error("sim_manifest: no ops");
  return exporter::CapabilityManifest::parse(manifest_json(ops), "in-process test manifest (sim: some ops)");
}

exporter::ExportResult export_program(exporter::Graph graph, const std::vector<std::string>& backends,
                                      const std::optional<exporter::QuantizeOptions>& quantize,
                                      const exporter::CapabilityManifest* manifest, bool allow_non_finite_weights) {
  exporter::ExportOptions options;
  options.allow_non_finite_weights = allow_non_finite_weights;
  options.manifest = manifest != nullptr ? manifest : &builtin_manifest();
  options.backends = backends;
  options.quantize = quantize;
  exporter::ExportResult result = exporter::export_graph(std::move(graph), options);
  // Every program the tests export also passes the independent memory-plan checker.
  for (const std::string& violation : exporter::check_overlaps(result.program.bytes)) {
    ADD_FAILURE() << "memory plan of an exported test program: " << violation;
  }
  return result;
}

const exporter::ExportResult& example(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<exporter::ExportResult>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(name);
  if (it != cache.end()) return *it->second;
  std::unique_ptr<exporter::ExportResult> r;
  if (name == "mlp") {
    r = std::make_unique<exporter::ExportResult>(export_program(exporter::build_mlp_example(1)));
  } else if (name == "cnn") {
    r = std::make_unique<exporter::ExportResult>(export_program(exporter::build_cnn_example(1)));
  } else if (name == "mlp_fp8" || name == "mlp_fp8_dynamic" || name == "mlp_nvfp4") {
    exporter::QuantizeOptions q;
    q.preset = name == "mlp_fp8" ? exporter::QuantPreset::Fp8
               : name == "mlp_nvfp4" ? exporter::QuantPreset::Nvfp4 : exporter::QuantPreset::Fp8Dynamic;
    q.min_size = 1;
    r = std::make_unique<exporter::ExportResult>(export_program(exporter::build_mlp_example(1), {"portable"}, q));
  } else if (name == "cnn_sim") {
    static const exporter::CapabilityManifest manifest = sim_manifest({OpCode::Conv2d, OpCode::Linear});
    r = std::make_unique<exporter::ExportResult>(
        export_program(exporter::build_cnn_example(1), {"sim", "portable"}, std::nullopt, &manifest));
  } else if (name == "paged_attention" || name == "paged_attention_sim") {
    // With an LlmInfo table (no tokenizer), so the fuzz seeds reach its validation too.
    exporter::LlmProgramInfo llm;
    llm.vocab_size = 32;
    llm.block_size = 4;
    llm.max_seqs = 2;
    llm.max_tokens = 8;
    llm.max_context = 16;
    llm.max_blocks_per_seq = 4;
    llm.num_layers = 1;
    llm.kv_heads = 2;
    llm.head_dim = 8;
    llm.kv_dtype = ScalarType::F32;
    llm.eos_ids = {3};
    llm.temperature = 0.7f;
    static const exporter::CapabilityManifest sim_attention = sim_manifest({OpCode::PagedAttention});
    exporter::ExportOptions options;
    options.manifest = name == "paged_attention" ? &builtin_manifest() : &sim_attention;
    if (name == "paged_attention_sim") options.backends = {"sim", "portable"};
    options.llm = &llm;
    options.method_name = "step";
    r = std::make_unique<exporter::ExportResult>(
        exporter::export_graph(exporter::build_paged_attention_example(ScalarType::F32), options));
  } else if (name == "cnn_null") {
    r = std::make_unique<exporter::ExportResult>(export_program(exporter::build_cnn_example(1), {"null", "portable"}));
  } else {
    throw std::runtime_error("unknown example " + name);
  }
  return *cache.emplace(name, std::move(r)).first->second;
}

LoadedProgram::LoadedProgram(const std::vector<uint8_t>& file, const RuntimeContext& runtime,
                             const LoadOptions& options)
    : bytes_(file.data(), file.size(), 65536),
      loader_(std::make_unique<BufferDataLoader>(bytes_.data(), file.size())) {
  Result<Program> r = Program::load(*loader_, runtime, options, &ctx_);
  if (r.is_ok()) {
    program_.emplace(std::move(r).value());
  } else {
    error_ = r.error();
  }
}

MethodMemory::MethodMemory(const MethodMeta& meta, size_t allocator_bytes, const std::vector<size_t>& arena_shrink) {
  const size_t alloc_size = allocator_bytes == SIZE_MAX ? meta.method_allocator_bytes() : allocator_bytes;
  allocator_memory_ = AlignedBuffer(alloc_size, 64);
  allocator_ = std::make_unique<BumpAllocator>(Span<uint8_t>(allocator_memory_.data(), alloc_size));
  for (size_t a = 0; a < meta.arena_count(); ++a) {
    Result<ArenaMeta> arena = meta.arena(a);
    EXPECT_TRUE(arena.is_ok());
    const size_t shrink = a < arena_shrink.size() ? arena_shrink[a] : 0;
    const size_t size = static_cast<size_t>(arena->size) - shrink;
    arena_memory_.emplace_back(size, arena->alignment < 64 ? 64 : arena->alignment);
    arenas_.emplace_back(arena_memory_.back().data(), size);
  }
  scratch_ = AlignedBuffer(meta.scratch_bytes(), 64);
  plan_ = std::make_unique<MemoryPlan>(*allocator_, Span<Span<uint8_t>>(arenas_.data(), arenas_.size()),
                                       Span<uint8_t>(scratch_.data(), meta.scratch_bytes()));
}

LoadedMethod::LoadedMethod(const std::vector<uint8_t>& file, const RuntimeContext& runtime, const LoadOptions& options,
                           const char* method)
    : program_(file, runtime, options) {
  if (!program_.ok()) {
    error_ = program_.error();
    ctx_ = program_.ctx();
    return;
  }
  Result<MethodMeta> meta = program_.program().method_meta(method, &ctx_);
  if (!meta.is_ok()) {
    error_ = meta.error();
    return;
  }
  memory_ = std::make_unique<MethodMemory>(*meta);
  Result<Method> m = program_.program().load_method(method, memory_->plan(), &ctx_);
  if (!m.is_ok()) {
    error_ = m.error();
    return;
  }
  method_.emplace(std::move(m).value());
}

exporter::HostTensor i32_tensor(std::vector<int64_t> dims, const std::vector<int32_t>& values) {
  exporter::HostTensor t;
  t.dtype = ScalarType::I32;
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * sizeof(int32_t));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

exporter::HostTensor f32_tensor(std::vector<int64_t> dims, const std::vector<float>& values) {
  return exporter::HostTensor::from_f32(std::move(dims), values);
}

TensorView view_of(const exporter::HostTensor& t) {
  TensorView v;
  v.data = const_cast<uint8_t*>(t.bytes.data());
  v.dtype = t.dtype;
  v.rank = static_cast<uint8_t>(t.dims.size());
  for (size_t d = 0; d < t.dims.size(); ++d) v.dims[d] = t.dims[d];
  return v;
}

exporter::HostTensor copy_of(const TensorView& v) {
  exporter::HostTensor h;
  h.dtype = v.dtype;
  h.dims.assign(v.dims, v.dims + v.rank);
  const uint8_t* p = static_cast<const uint8_t*>(v.data);
  h.bytes.assign(p, p + v.nbytes());
  return h;
}

std::vector<exporter::HostTensor> run_method(Method& method, const std::vector<exporter::HostTensor>& inputs) {
  ErrorContext ctx;
  if (inputs.size() != method.input_count()) {
    ADD_FAILURE() << "method takes " << method.input_count() << " inputs, given " << inputs.size();
    return {};
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Status s = method.set_input(i, view_of(inputs[i]), &ctx);
    if (!s.is_ok()) {
      ADD_FAILURE() << "set_input(" << i << "): " << to_string(s.code()) << ": " << ctx.message;
      return {};
    }
  }
  const Status s = method.execute(&ctx);
  if (!s.is_ok()) {
    ADD_FAILURE() << "execute: " << to_string(s.code()) << ": " << ctx.message;
    return {};
  }
  std::vector<exporter::HostTensor> outputs;
  for (size_t o = 0; o < method.output_count(); ++o) outputs.push_back(copy_of(*method.output(o)));
  return outputs;
}

std::vector<float> pattern(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 2.0f * std::sin(0.37f * static_cast<float>(i) + 0.91f * static_cast<float>(seed));
  return v;
}

void ExpectAllClose(const exporter::HostTensor& actual, const exporter::HostTensor& expected, Tolerance tol) {
  ASSERT_EQ(actual.dtype, expected.dtype);
  ASSERT_EQ(actual.dims, expected.dims);
  const std::vector<float> a = actual.to_f32(), e = expected.to_f32();
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const float bound = tol.abs + tol.rel * std::fabs(e[i]);
    if (!(std::fabs(a[i] - e[i]) <= bound)) {
      ADD_FAILURE() << "first mismatch at element " << i << " of " << a.size() << ": actual " << a[i] << ", expected "
                    << e[i] << " (|diff| " << std::fabs(a[i] - e[i]) << " > " << bound << ")";
      return;
    }
  }
}

void ExpectBitwiseEqual(const exporter::HostTensor& a, const exporter::HostTensor& b) {
  ASSERT_EQ(a.dtype, b.dtype);
  ASSERT_EQ(a.dims, b.dims);
  ASSERT_EQ(a.bytes.size(), b.bytes.size());
  for (size_t i = 0; i < a.bytes.size(); ++i) {
    if (a.bytes[i] != b.bytes[i]) {
      ADD_FAILURE() << "first differing byte " << i << " of " << a.bytes.size();
      return;
    }
  }
}

void ExpectPlannedMemoryIsTaken(LoadedMethod& lm, const char* backend, size_t backend_delegates) {
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  const MethodMeta meta = lm.method().meta();
  std::vector<uint32_t> indices = {DelegateMeta::kWholeMethod};
  for (uint32_t d = 0; d < meta.delegate_count(); ++d) indices.push_back(d);
  MemoryRequirements total;
  size_t on_backend = 0;
  for (uint32_t i : indices) {
    SCOPED_TRACE(i == DelegateMeta::kWholeMethod ? std::string("whole method") : "delegate " + std::to_string(i));
    ErrorContext ctx;
    Result<DelegateMeta> planned = meta.delegate(i, &ctx);
    ASSERT_TRUE(planned.is_ok()) << ctx.message;
    const MemoryRequirements taken = lm.method().delegate_memory(i);
    EXPECT_EQ(planned->memory.host_bytes, taken.host_bytes);
    EXPECT_EQ(planned->memory.pinned_bytes, taken.pinned_bytes);
    EXPECT_EQ(planned->memory.device_bytes, taken.device_bytes);
    EXPECT_TRUE(planned->memory == taken);
    total += taken;
    if (planned->runs_on != nullptr && std::string(planned->runs_on) == backend) {
      ++on_backend;
      EXPECT_GT(taken.host_bytes, 0u);
      // Every byte is listed by purpose (runner --info prints the breakdown).
      EXPECT_GT(taken.parts().size(), 0u);
      for (MemoryDomain d : {MemoryDomain::Host, MemoryDomain::PinnedHost, MemoryDomain::Device}) {
        EXPECT_EQ(taken.unlisted(d), 0u) << to_string(d);
      }
      if (std::string(backend) == "sim") {
        EXPECT_GT(taken.device_bytes, 0u);
      }
    } else {
      EXPECT_TRUE(taken == MemoryRequirements()) << planned->runs_on;  // the portable kernels take none
    }
  }
  EXPECT_EQ(on_backend, backend_delegates);
  Result<MemoryRequirements> summed = meta.backend_memory();
  ASSERT_TRUE(summed.is_ok());
  EXPECT_TRUE(summed.value() == total);
}

void ExpectHostReadOfSimStateFaults(const Program& program, const char* name) {
  const Program::State* state = program.find_state(name);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(program.state_data(name), nullptr);
  const volatile uint8_t* device = static_cast<const volatile uint8_t*>(backends::sim::device_address(state->buffer));
  ASSERT_NE(device, nullptr);
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_DEATH({ std::printf("%d\n", int(device[0])); }, "SEGV");
#else
  EXPECT_EXIT({ std::printf("%d\n", int(device[0])); }, ::testing::KilledBySignal(SIGSEGV), "");
#endif
}

}  // namespace ember::testing
