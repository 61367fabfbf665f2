// The tiny LLMs (tests/llm/make_checkpoints.py) on the sim backend, a simulated device whose memory
// the host cannot read (backends/sim), against the same step on the portable kernels:
//  - every checkpoint, exported with logits, generates through the Engine (three prompts, chunked
//    prefill of 8 tokens a step, a KV pool of 16 blocks that forces preemption) the same greedy
//    tokens, bitwise the same logprobs and bitwise the same logits (memcmp) when
//    (a) the portable program's step runs whole on sim (LoadOptions::backends = {"sim"}) and
//    (b) the program exported for sim (one GRAPH delegate holding every KV state) runs on sim;
//    the KV states are then sim's (owner "sim", domain Device, no host data);
//  - the sim export without sim registered runs its delegate on the portable kernels with the same
//    tokens, or fails with BackendUnavailable naming why (Fallback::Fail);
//  - the bytes MethodMeta::delegate() plans are the bytes init took (Method::delegate_memory);
//  - the portable program's KV cache comes from the app's DeviceAllocator, exactly the states'
//    bytes, and goes back at ~Program; on sim it is not asked for;
//  - reading sim's KV cache from the host after a step faults (a death test).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exporter/importers/hf_llm/step_graph.h"
#include "runtime/core/device_allocator.h"
#include "runtime/llm/engine.h"
#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"
#include "tests/common/state_allocator.h"
#include "tests/runtime/llm/engine_test_util.h"

namespace ember {
namespace {

using testing::Generation;
using testing::StateAllocator;

constexpr uint32_t kWhole = DelegateMeta::kWholeMethod;
constexpr int32_t kBlocks = 16;    // 64 tokens of KV: the three prompts cannot all keep theirs
constexpr int64_t kMaxTokens = 8;  // chunked prefill: the 33-token prompt takes five steps

const char* const kCheckpoints[] = {"llama_f32", "qwen2_f32", "qwen3_f32", "qwen3_fp8",
                                    "llama_f16", "qwen2_bf16", "qwen3_bf16"};

std::string str(const char* s) { return s != nullptr ? s : "(null)"; }

// A checkpoint's step exported with logits, for the portable kernels and for sim.
struct Exported {
  std::vector<uint8_t> portable, sim;
  int32_t vocab = 0;
  int64_t layers = 0;
};

const Exported& Export(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Exported>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return *it->second;
  auto e = std::make_unique<Exported>();
  exporter::hf::StepOptions options;
  options.max_seqs = 4;
  options.max_tokens = kMaxTokens;
  options.max_context = 64;
  options.block_size = 4;
  options.emit_logits = true;
  const std::string dir = std::string(EMBER_LLM_CHECKPOINTS) + "/" + name;
  exporter::hf::StepImport a = exporter::hf::import_step(dir, options);
  e->vocab = static_cast<int32_t>(a.config.vocab_size);
  e->layers = a.config.num_layers;
  e->portable = testing::export_program(std::move(a.graph)).program.bytes;
  exporter::hf::StepImport b = exporter::hf::import_step(dir, options);
  e->sim = testing::export_program(std::move(b.graph), {"sim"}).program.bytes;
  return *cache.emplace(name, std::move(e)).first->second;
}

std::unique_ptr<testing::Runtime> MakeRuntime(bool sim, size_t threads = 0) {
  testing::RuntimeOptions o;
  o.sim_backend = sim;
  o.threads = threads;
  return std::make_unique<testing::Runtime>(o);
}

struct Load {
  Load(std::vector<const char*> priority = {}, Fallback fallback = Fallback::Portable) : names(std::move(priority)) {
    options.symbols = Span<const SymbolValue>(&blocks, 1);
    options.backends = Span<const char* const>(names.data(), names.size());
    options.fallback = fallback;
  }
  Load(const Load&) = delete;
  std::vector<const char*> names;
  SymbolValue blocks{"num_blocks", kBlocks};
  LoadOptions options;
};

std::unique_ptr<testing::LoadedMethod> LoadStep(const std::vector<uint8_t>& file, const testing::Runtime& rt,
                                                const Load& load) {
  return std::make_unique<testing::LoadedMethod>(file, rt.context, load.options, "forward");
}

// Three prompts of 33, 21 and 9 ids (the first takes five steps of 8), ids below the vocabulary.
std::vector<std::vector<int32_t>> Prompts(int32_t vocab) {
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t length : {33, 21, 9}) {
    std::vector<int32_t> p;
    for (int32_t i = 0; i < length; ++i) p.push_back((7 + 13 * i + 31 * length) % vocab);
    prompts.push_back(p);
  }
  return prompts;
}

// Prompts(vocab), greedy, max_new tokens each (EOS ignored), on a pool of kBlocks: the step has logits.
Generation Generate(Method& method, int32_t vocab, int32_t max_new = 10) {
  llm::SchedulerLimits limits;
  limits.max_seqs = 4;
  limits.max_tokens = static_cast<int32_t>(kMaxTokens);
  limits.block_size = 4;
  limits.max_context = 64;
  limits.max_requests = 3;
  llm::GenerationConfig config;
  config.max_new_tokens = max_new;
  config.ignore_eos = true;
  Generation g = testing::generate(method, limits, kBlocks, vocab, Prompts(vocab), config);
  EXPECT_TRUE(g.has_logits);
  return g;
}

void ExpectSameGeneration(const Generation& got, const Generation& expected, int32_t vocab) {
  EXPECT_EQ(got.ids, expected.ids);
  EXPECT_EQ(got.preemptions, expected.preemptions);
  EXPECT_EQ(got.steps, expected.steps);
  ASSERT_EQ(got.logits.size(), expected.logits.size());
  for (size_t r = 0; r < got.logits.size(); ++r) {
    ASSERT_EQ(got.logits[r].size(), expected.logits[r].size()) << "request " << r;
    ASSERT_EQ(got.logprobs[r].size(), expected.logprobs[r].size()) << "request " << r;
    EXPECT_EQ(std::memcmp(got.logprobs[r].data(), expected.logprobs[r].data(), got.logprobs[r].size() * 4), 0)
        << "request " << r;
    for (size_t t = 0; t < got.logits[r].size(); ++t) {
      ASSERT_EQ(got.logits[r][t].size(), size_t(vocab)) << "request " << r << " token " << t;
      EXPECT_EQ(std::memcmp(got.logits[r][t].data(), expected.logits[r][t].data(), size_t(vocab) * 4), 0)
          << "request " << r << " token " << t;
    }
  }
}

// Every kv.<layer>.{k,v} state belongs to sim: device memory, no host address.
void ExpectSimOwnsEveryKvState(const Program& program, int64_t layers) {
  ASSERT_EQ(program.state_count(), size_t(2 * layers));
  for (size_t s = 0; s < program.state_count(); ++s) {
    const Program::State& state = program.state(s);
    SCOPED_TRACE(state.name);
    EXPECT_EQ(str(state.owner), "sim");
    EXPECT_EQ(state.domain, MemoryDomain::Device);
    EXPECT_EQ(state.data, nullptr);
    EXPECT_EQ(program.state_data(state.name), nullptr);
    EXPECT_NE(state.buffer, nullptr);
    EXPECT_GE(state.memory.device_bytes, state.nbytes);
    EXPECT_GT(state.nbytes, 0u);
  }
  const Program::State* k = program.find_state("kv.0.k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(str(k->owner), "sim");
  EXPECT_EQ(k->domain, MemoryDomain::Device);
  EXPECT_EQ(k->data, nullptr);
}

TEST(SimBackendLlmTest, StepsOnSimGiveThePortableTokensAndBitwiseLogits) {
  // sim gets the pool (BackendExecuteContext::pool): the kernels' results do not depend on it.
  auto plain = MakeRuntime(false), with_sim = MakeRuntime(true, 2);
  for (const char* name : kCheckpoints) {
    SCOPED_TRACE(name);
    const Exported& e = Export(name);
    const Load blocks, priority({"sim"});

    auto portable = LoadStep(e.portable, *plain, blocks);
    ASSERT_TRUE(portable->ok()) << portable->ctx().message;
    EXPECT_EQ(str(portable->program().find_state("kv.0.k")->owner), "program");
    EXPECT_NE(portable->program().state_data("kv.0.k"), nullptr);
    const Generation expected = Generate(portable->method(), e.vocab);
    ASSERT_EQ(expected.ids.size(), 3u);
    EXPECT_GT(expected.preemptions, 0) << "the pool was meant to force a preemption";
    for (const auto& ids : expected.ids) EXPECT_EQ(ids.size(), 10u);

    // (a) The portable program, its step taken whole by sim.
    auto whole = LoadStep(e.portable, *with_sim, priority);
    ASSERT_TRUE(whole->ok()) << whole->ctx().message;
    ExpectSimOwnsEveryKvState(whole->program(), e.layers);
    {
      const MethodMeta meta = whole->method().meta();
      EXPECT_EQ(meta.delegate_count(), 0u);
      const DelegateMeta body = meta.delegate(kWhole).value();
      EXPECT_EQ(str(body.runs_on), "sim");
      EXPECT_EQ(body.instruction_count, meta.instruction_count());
      EXPECT_NE(str(body.reason).find("first listed backend that runs all"), std::string::npos) << body.reason;
    }
    testing::ExpectPlannedMemoryIsTaken(*whole, "sim", 1);
    {
      SCOPED_TRACE("whole method on sim");
      ExpectSameGeneration(Generate(whole->method(), e.vocab), expected, e.vocab);
    }

    // (b) Exported for sim: one GRAPH delegate, which holds every KV state; the Method passes none.
    const fb::Program& file = *testing::program_of(e.sim);
    const fb::Method& step = *file.methods()->Get(0);
    ASSERT_NE(step.delegates(), nullptr);
    ASSERT_EQ(step.delegates()->size(), 1u);
    for (const fb::Tensor* t : *step.graph()->values()) EXPECT_NE(t->storage_type(), fb::Storage::StateStorage);
    size_t payload_states = 0;
    for (const fb::Tensor* t : *step.delegates()->Get(0)->payload_nested_root()->values()) {
      payload_states += t->storage_type() == fb::Storage::StateStorage;
    }
    EXPECT_EQ(payload_states, size_t(2 * e.layers));

    auto delegated = LoadStep(e.sim, *with_sim, blocks);
    ASSERT_TRUE(delegated->ok()) << delegated->ctx().message;
    ExpectSimOwnsEveryKvState(delegated->program(), e.layers);
    {
      const MethodMeta meta = delegated->method().meta();
      ASSERT_EQ(meta.delegate_count(), 1u);
      const DelegateMeta d = meta.delegate(0).value();
      EXPECT_EQ(str(d.runs_on), "sim");
      EXPECT_EQ(str(d.exported_for), "sim");
      EXPECT_EQ(str(d.reason), "exported for it");
      EXPECT_EQ(str(meta.delegate(kWhole)->runs_on), "portable");
    }
    testing::ExpectPlannedMemoryIsTaken(*delegated, "sim", 1);
    {
      SCOPED_TRACE("GRAPH delegate on sim");
      ExpectSameGeneration(Generate(delegated->method(), e.vocab), expected, e.vocab);
    }
    // The sim export with a priority list naming sim: the same choice.
    auto listed = LoadStep(e.sim, *with_sim, priority);
    ASSERT_TRUE(listed->ok()) << listed->ctx().message;
    EXPECT_EQ(str(listed->method().meta().delegate(0)->runs_on), "sim");
  }
}

TEST(SimBackendLlmTest, TheSimExportWithoutSimFallsBackOrFails) {
  auto plain = MakeRuntime(false);
  for (const char* name : {"llama_f32", "qwen2_f32", "qwen3_bf16"}) {
    SCOPED_TRACE(name);
    const Exported& e = Export(name);
    const Load blocks;
    auto portable = LoadStep(e.portable, *plain, blocks);
    ASSERT_TRUE(portable->ok()) << portable->ctx().message;
    const Generation expected = Generate(portable->method(), e.vocab);

    // sim is not registered: the delegate runs on the portable kernels, the state is host memory.
    auto fallback = LoadStep(e.sim, *plain, blocks);
    ASSERT_TRUE(fallback->ok()) << fallback->ctx().message;
    const DelegateMeta d = fallback->method().meta().delegate(0).value();
    EXPECT_EQ(str(d.runs_on), "portable");
    EXPECT_EQ(str(d.exported_for), "sim");
    EXPECT_NE(str(d.reason).find("sim is not registered"), std::string::npos) << d.reason;
    EXPECT_NE(str(d.reason).find("portable kernels (fallback)"), std::string::npos) << d.reason;
    EXPECT_NE(str(fallback->method().instruction_backend(0)).find("portable (fallback for sim)"), std::string::npos)
        << fallback->method().instruction_backend(0);
    const Program::State* k = fallback->program().find_state("kv.0.k");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(str(k->owner), "program");
    EXPECT_EQ(k->domain, MemoryDomain::Host);
    EXPECT_NE(k->data, nullptr);
    ExpectSameGeneration(Generate(fallback->method(), e.vocab), expected, e.vocab);

    // A priority list without sim (null cannot run the graph): the portable kernels too.
    const Load only_null({"null"});
    auto retargeted = LoadStep(e.sim, *plain, only_null);
    ASSERT_TRUE(retargeted->ok()) << retargeted->ctx().message;
    const DelegateMeta r = retargeted->method().meta().delegate(0).value();
    EXPECT_EQ(str(r.runs_on), "portable");
    EXPECT_NE(str(r.reason).find("null lacks"), std::string::npos) << r.reason;
    ExpectSameGeneration(Generate(retargeted->method(), e.vocab), expected, e.vocab);

    // Fallback::Fail: BackendUnavailable from load_method, naming the delegate and the reason.
    const Load strict({}, Fallback::Fail);
    auto failed = LoadStep(e.sim, *plain, strict);
    ASSERT_FALSE(failed->ok());
    EXPECT_EQ(failed->error(), Error::BackendUnavailable);
    const std::string message = failed->ctx().message;
    EXPECT_NE(message.find("method 'forward' delegate 0 (exported for 'sim') has no backend"), std::string::npos)
        << message;
    EXPECT_NE(message.find("sim is not registered"), std::string::npos) << message;
  }
}

TEST(SimBackendLlmTest, TheKvCacheComesFromTheAppsAllocatorOnlyWhenItIsHostMemory) {
  for (const char* name : {"qwen2_f32", "qwen3_bf16"}) {
    SCOPED_TRACE(name);
    const Exported& e = Export(name);
    const Load blocks, priority({"sim"});
    StateAllocator allocator;
    auto rt = MakeRuntime(true);
    rt->context.device_allocator = &allocator;
    uint64_t state_bytes = 0;
    {
      auto lm = LoadStep(e.portable, *rt, blocks);
      ASSERT_TRUE(lm->ok()) << lm->ctx().message;
      const Program& p = lm->program();
      ASSERT_EQ(p.state_count(), size_t(2 * e.layers));
      std::vector<std::string> names;
      for (size_t s = 0; s < p.state_count(); ++s) {
        state_bytes += p.state(s).nbytes;
        names.push_back(p.state(s).name);
        EXPECT_EQ(allocator.live.count(p.state(s).data), 1u) << p.state(s).name << " is not from the app's allocator";
      }
      EXPECT_EQ(allocator.allocated_bytes(), state_bytes);
      EXPECT_EQ(allocator.names, names);
      for (const std::string& owner : allocator.owners) EXPECT_EQ(owner, "program");
      EXPECT_EQ(Generate(lm->method(), e.vocab, 3).ids.size(), 3u);  // the cache in use
      EXPECT_EQ(allocator.freed_bytes, 0u);
    }
    EXPECT_TRUE(allocator.live.empty()) << "state not returned at ~Program";
    EXPECT_EQ(allocator.freed_bytes, state_bytes);
    EXPECT_EQ(allocator.bad_frees, 0);

    // Whole on sim: sim owns the cache, the app's allocator is not asked for it.
    StateAllocator unused;
    rt->context.device_allocator = &unused;
    {
      auto lm = LoadStep(e.portable, *rt, priority);
      ASSERT_TRUE(lm->ok()) << lm->ctx().message;
      ExpectSimOwnsEveryKvState(lm->program(), e.layers);
      EXPECT_EQ(Generate(lm->method(), e.vocab, 3).ids.size(), 3u);
    }
    EXPECT_EQ(unused.allocated_bytes(), 0u);
  }
}

TEST(SimBackendLlmDeathTest, HostReadOfTheKvCacheOnSimFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Exported& e = Export("qwen3_f32");
  auto rt = MakeRuntime(true);
  const Load blocks;
  auto lm = LoadStep(e.sim, *rt, blocks);
  ASSERT_TRUE(lm->ok()) << lm->ctx().message;
  EXPECT_EQ(Generate(lm->method(), e.vocab, 2).ids.size(), 3u);
  testing::ExpectHostReadOfSimStateFaults(lm->program(), "kv.0.k");
}

}  // namespace
}  // namespace ember
