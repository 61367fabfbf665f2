// No heap allocation in runtime/llm's hot paths (docs/DESIGN.md §3, §6), with hooks on malloc & co. and every
// operator new counting on all threads:
//  - encode(), decode() and StreamDecoder: 0 while every golden string of the seven tokenizers of
//    tests/data/llm (byte-level and SentencePiece layouts) is encoded, decoded and stream-decoded,
//    and every golden id list decoded and stream-decoded (buffers sized beforehand from the
//    documented bounds);
//    load itself takes its memory from a caller buffer, so it is counted too;
//  - Engine::step() on an exported tiny LLM with 2 threads, with and without the `logits` output:
//    0 over every step after the first (chunked prefill of three prompts, then decodes, finishing
//    sequences, a new request added mid-run); on the portable kernels, and on the sim backend (the
//    step whole on sim, and exported for sim as one GRAPH delegate).
//
// Its own binary: the hooks replace libc's malloc for the whole process. Not built with sanitizers.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "exporter/importers/hf_llm/step_graph.h"
#include "runtime/llm/engine.h"
#include "tests/common/program_util.h"
#include "tests/runtime/llm/tokenizer_test_util.h"
#if EMBER_NO_HEAP_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/register.h"
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#error "no_heap_test replaces malloc; build it without sanitizers"
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
inline void count() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);

void* malloc(size_t size) {
  count();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  count();
  return __libc_realloc(p, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
void* memalign(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  count();
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return 22;  // EINVAL
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}  // extern "C"

namespace {
void* new_impl(size_t size, size_t alignment, bool nothrow) {
  count();
  if (size == 0) size = 1;
  void* p = alignment > alignof(std::max_align_t) ? __libc_memalign(alignment, size) : __libc_malloc(size);
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return new_impl(n, 0, false); }
void* operator new[](size_t n) { return new_impl(n, 0, false); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return new_impl(n, 0, true); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return new_impl(n, 0, true); }
void* operator new(size_t n, std::align_val_t a) { return new_impl(n, static_cast<size_t>(a), false); }
void* operator new[](size_t n, std::align_val_t a) { return new_impl(n, static_cast<size_t>(a), false); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }

namespace ember::llm {
namespace {

class CountAllocations {
 public:
  CountAllocations() {
    g_allocations.store(0);
    g_counting.store(true);
  }
  ~CountAllocations() { stop(); }
  uint64_t stop() {
    g_counting.store(false);
    return g_allocations.load();
  }
};

TEST(TokenizerNoHeapTest, HooksCountAllocations) {
  CountAllocations c;
  void* p = std::malloc(16);
  asm volatile("" : : "g"(p) : "memory");
  std::free(p);
  int* q = new int(1);
  asm volatile("" : : "g"(q) : "memory");
  delete q;
  EXPECT_EQ(c.stop(), 2u);
}

TEST(TokenizerNoHeapTest, LoadEncodeDecodeAndStreamAllocateNothing) {
  for (const char* kind : {"llama3", "qwen2", "llama2", "mistral", "gemma", "smollm", "gpt2"}) {
    auto loaded = testing::load_tokenizer(kind);
    ASSERT_NE(loaded, nullptr);
    const TokenizerDesc desc = tools::make_tokenizer_desc(loaded->data, &loaded->added);
    std::vector<uint8_t> memory(Tokenizer::memory_bytes(desc));
    std::vector<std::string> texts;
    std::vector<std::vector<int32_t>> id_lists;  // the golden decode cases (byte runs, specials)
    for (const nlohmann::json& c : testing::read_jsonl(testing::data_path(std::string(kind) + "/golden.jsonl"))) {
      if (c.contains("text")) texts.push_back(c["text"].get<std::string>());
      if (c.contains("decode_ids")) id_lists.push_back(c["decode_ids"].get<std::vector<int32_t>>());
    }
    size_t longest = 0, longest_ids = 0;
    for (const std::string& t : texts) longest = std::max(longest, t.size());
    for (const std::vector<int32_t>& l : id_lists) longest_ids = std::max(longest_ids, l.size());
    const Tokenizer& tok = **loaded;
    std::vector<int32_t> ids(tok.max_token_count(longest));
    std::vector<uint8_t> scratch(tok.encode_scratch_bytes(longest));
    std::vector<char> text_out(3 * tok.max_token_bytes() * std::max(ids.size(), longest_ids) + 3);
    std::vector<char> piece(StreamDecoder(tok).max_push_bytes());
    size_t total_ids = 0, total_bytes = 0;

    CountAllocations counter;
    BumpAllocator allocator(Span<uint8_t>(memory.data(), memory.size()));
    Result<Tokenizer> fresh = Tokenizer::load(desc, allocator);
    ASSERT_TRUE(fresh.is_ok());
    for (const std::string& t : texts) {
      Result<size_t> n = tok.encode(t, Span<int32_t>(ids.data(), ids.size()), Span<uint8_t>(scratch.data(), scratch.size()),
                                    true);
      ASSERT_TRUE(n.is_ok());
      total_ids += n.value();
      const Span<const int32_t> got(ids.data(), n.value());
      Result<size_t> m = tok.decode(got, Span<char>(text_out.data(), text_out.size()), false);
      ASSERT_TRUE(m.is_ok());
      total_bytes += m.value();
      StreamDecoder stream(tok, true);
      for (int32_t id : got) ASSERT_TRUE(stream.push(id, Span<char>(piece.data(), piece.size())).is_ok());
      ASSERT_TRUE(stream.flush(Span<char>(piece.data(), piece.size())).is_ok());
    }
    for (const std::vector<int32_t>& l : id_lists) {
      const Span<const int32_t> got(l.data(), l.size());
      ASSERT_TRUE(tok.decode(got, Span<char>(text_out.data(), text_out.size()), true).is_ok());
      StreamDecoder stream(tok);
      for (int32_t id : got) ASSERT_TRUE(stream.push(id, Span<char>(piece.data(), piece.size())).is_ok());
      ASSERT_TRUE(stream.flush(Span<char>(piece.data(), piece.size())).is_ok());
    }
    EXPECT_EQ(counter.stop(), 0u) << kind;
    EXPECT_GT(total_ids, 10000u);
    EXPECT_GT(total_bytes, 10000u);
  }
}

// Engine::step() on `bytes` (a qwen3_bf16 step) with 2 threads: nothing allocated after the first
// step. `sim`: the sim backend registered; `backends`: LoadOptions::backends.
void ExpectStepsAfterTheFirstAllocateNothing(const std::vector<uint8_t>& bytes, int32_t vocab, bool emit_logits,
                                             bool sim, const std::vector<const char*>& backends,
                                             const char* runs_on, bool cuda = false) {
  const SymbolValue blocks{"num_blocks", 32};
  LoadOptions load;
  load.symbols = Span<const SymbolValue>(&blocks, 1);
  load.backends = Span<const char* const>(backends.data(), backends.size());
  ember::testing::RuntimeOptions runtime;
  runtime.threads = 2;
  runtime.sim_backend = sim;
  ember::testing::Runtime rt(runtime);
#if EMBER_NO_HEAP_CUDA
  if (cuda) ASSERT_TRUE(backends::cuda::register_backend(*rt.backends).is_ok());
#endif
  ember::testing::LoadedMethod lm(bytes, rt.context, load);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  const MethodMeta meta = lm.method().meta();
  const uint32_t where = meta.delegate_count() == 0 ? DelegateMeta::kWholeMethod : 0;
  EXPECT_EQ(std::string(meta.delegate(where)->runs_on), runs_on);
  SchedulerLimits limits;
  limits.max_seqs = 4;
  limits.max_tokens = 8;
  limits.block_size = 4;
  limits.max_context = 64;
  limits.max_requests = 4;
  std::vector<uint8_t> memory(Engine::memory_bytes(limits, 32));
  Engine engine;
  ErrorContext ctx;
  const int32_t eos[] = {3};
  ASSERT_TRUE(engine.init(lm.method(), limits, 32, vocab, Span<const int32_t>(eos, 1),
                          Span<uint8_t>(memory.data(), memory.size()), &ctx)
                  .is_ok())
      << ctx.message;
  EXPECT_EQ(engine.has_logits(), emit_logits);
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 11}, {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, {100}, {42, 43}};
  GenerationConfig config;
  config.max_new_tokens = 12;
  config.temperature = 0.8f;
  config.top_k = 20;
  config.top_p = 0.9f;
  config.repetition_penalty = 1.1f;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine.add(Span<const int32_t>(prompts[i].data(), prompts[i].size()), config, &ctx).is_ok()) << ctx.message;
  }
  ASSERT_TRUE(engine.step(&ctx).is_ok()) << ctx.message;  // the first execute may allocate (docs/DESIGN.md §3)
  int steps = 0, tokens = 0;
  CountAllocations counter;
  while (engine.has_work()) {
    Result<Span<const TokenEvent>> events = engine.step(&ctx);
    ASSERT_TRUE(events.is_ok()) << ctx.message;
    tokens += static_cast<int>(events.value().size());
    if (++steps == 3) {
      ASSERT_TRUE(engine.add(Span<const int32_t>(prompts[3].data(), prompts[3].size()), config, &ctx).is_ok());
    }
  }
  EXPECT_EQ(counter.stop(), 0u) << steps << " steps";
  EXPECT_GT(steps, 10);
  EXPECT_GT(tokens, 20);
}

exporter::hf::StepImport ImportStep(bool emit_logits) {
  exporter::hf::StepOptions options;
  options.max_seqs = 4;
  options.max_tokens = 8;
  options.max_context = 64;
  options.block_size = 4;
  options.emit_logits = emit_logits;
  const char* dir = std::getenv("EMBER_LLM_CHECKPOINTS");  // the GPU machine's copy (scripts/test_gpu.sh)
  return exporter::hf::import_step(std::string(dir != nullptr ? dir : EMBER_LLM_CHECKPOINTS) + "/qwen3_bf16", options);
}

// With and without the logits output (the exporter's default has none).
TEST(EngineNoHeapTest, StepsAfterTheFirstAllocateNothing) {
  for (bool emit_logits : {false, true}) {
    SCOPED_TRACE(emit_logits ? "with logits" : "without logits");
    exporter::hf::StepImport imported = ImportStep(emit_logits);
    const int32_t vocab = static_cast<int32_t>(imported.config.vocab_size);
    const std::vector<uint8_t> bytes = ember::testing::export_program(std::move(imported.graph)).program.bytes;
    ExpectStepsAfterTheFirstAllocateNothing(bytes, vocab, emit_logits, false, {}, "portable");
  }
}

// On the sim backend (a simulated device: staged I/O, the KV cache in its memory, an asynchronous
// copy of the outputs at synchronize()): the portable step taken whole, and the step exported for
// sim (one GRAPH delegate).
TEST(EngineNoHeapTest, StepsOnSimAfterTheFirstAllocateNothing) {
  for (bool emit_logits : {false, true}) {
    SCOPED_TRACE(emit_logits ? "with logits" : "without logits");
    exporter::hf::StepImport a = ImportStep(emit_logits), b = ImportStep(emit_logits);
    const int32_t vocab = static_cast<int32_t>(a.config.vocab_size);
    const std::vector<uint8_t> portable = ember::testing::export_program(std::move(a.graph)).program.bytes;
    const std::vector<uint8_t> sim = ember::testing::export_program(std::move(b.graph), {"sim"}).program.bytes;
    {
      SCOPED_TRACE("whole method on sim");
      ExpectStepsAfterTheFirstAllocateNothing(portable, vocab, emit_logits, true, {"sim"}, "sim");
    }
    {
      SCOPED_TRACE("GRAPH delegate on sim");
      ExpectStepsAfterTheFirstAllocateNothing(sim, vocab, emit_logits, true, {}, "sim");
    }
  }
}

#if EMBER_NO_HEAP_CUDA
// On the cuda backend (ember_cuda_no_heap_test, label gpu): the portable step taken whole and the step
// exported for cuda; a replayed CUDA graph per step, pinned staging, no host allocation.
TEST(EngineNoHeapTest, StepsOnCudaAfterTheFirstAllocateNothing) {
  int count = 0;
  ASSERT_TRUE(cudaGetDeviceCount(&count) == cudaSuccess && count > 0) << "no CUDA GPU (label gpu: scripts/test_gpu.sh)";
  for (bool emit_logits : {false, true}) {
    SCOPED_TRACE(emit_logits ? "with logits" : "without logits");
    exporter::hf::StepImport a = ImportStep(emit_logits), b = ImportStep(emit_logits);
    const int32_t vocab = static_cast<int32_t>(a.config.vocab_size);
    const std::vector<uint8_t> portable = ember::testing::export_program(std::move(a.graph)).program.bytes;
    const std::vector<uint8_t> cuda = ember::testing::export_program(std::move(b.graph), {"cuda"}).program.bytes;
    {
      SCOPED_TRACE("whole method on cuda");
      ExpectStepsAfterTheFirstAllocateNothing(portable, vocab, emit_logits, false, {"cuda"}, "cuda", true);
    }
    {
      SCOPED_TRACE("GRAPH delegate on cuda");
      ExpectStepsAfterTheFirstAllocateNothing(cuda, vocab, emit_logits, false, {}, "cuda", true);
    }
  }
}
#endif

}  // namespace
}  // namespace ember::llm
