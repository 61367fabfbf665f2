// The tiny LLMs (tests/llm/make_checkpoints.py) on the CUDA backend (label gpu; the GPU machine runs it
// through scripts/test_gpu.sh):
//  - teacher-forced logits of every prompt position against the transformers references in
//    tests/data/llm/hf_reference: f32 and FP8 checkpoints within 1e-3 relative L2 (f32 math: the
//    decode linears are the f32 GEMV), f16 / bf16 within the CPU's bound;
//  - greedy generation through the Engine (three prompts, chunked prefill of 8 tokens a step, a pool
//    of 16 blocks that forces preemption): the same ids as the portable CPU run, except after a
//    position where the CPU's top-two logit gap is under the tolerance (counted and printed);
//  - batch invariance: a prompt's greedy ids alone and among 31 others are the same;
//  - the KV states are the cuda backend's device memory; planned bytes are the bytes init took;
//  - the program exported for cuda (one GRAPH delegate) runs on cuda with the same ids.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "backends/cuda/register.h"
#include "exporter/importers/hf_llm/step_graph.h"
#include "exporter/passes/quantize.h"
#include "runtime/llm/engine.h"
#include "tests/common/program_util.h"
#include "tests/runtime/llm/engine_test_util.h"
#include "tools/common/npy.h"

namespace ember {
namespace {

using testing::Generation;

std::string data_dir() {
  const char* src = std::getenv("EMBER_SOURCE_DIR");
  return src != nullptr ? std::string(src) + "/tests/data/llm" : std::string(EMBER_LLM_TEST_DATA);
}
std::string checkpoint_dir(const std::string& name) {
  const char* env = std::getenv("EMBER_LLM_CHECKPOINTS");
  return (env != nullptr ? std::string(env) : std::string(EMBER_LLM_CHECKPOINTS)) + "/" + name;
}
std::string str(const char* s) { return s != nullptr ? s : "(null)"; }

bool HaveGpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    ADD_FAILURE() << "no CUDA GPU (this test carries the ctest label 'gpu': run it on the GPU machine with "
                     "scripts/test_gpu.sh)";
    return false;
  }
  return true;
}

struct Family {
  const char* name;
  double tolerance;   // relative L2 of the logits vs transformers
  double gap;         // greedy: a CPU top-two gap below this may flip the argmax on the GPU
};
// f32 and FP8 (weights decoded exactly, f32 math): 1e-3 (the bound); f16 / bf16: the CPU's.
const Family kFamilies[] = {{"llama_f32", 1e-3, 1e-3}, {"qwen2_f32", 1e-3, 1e-3},  {"qwen3_f32", 1e-3, 1e-3},
                            {"qwen3_fp8", 1e-3, 1e-3}, {"llama_f16", 5e-3, 1e-2},  {"qwen2_bf16", 2e-2, 2e-2},
                            {"qwen3_bf16", 2e-2, 2e-2}};

constexpr int32_t kBlocks = 16;
constexpr int64_t kMaxTokens = 8;

std::unique_ptr<testing::Runtime> MakeRuntime(bool cuda) {
  auto rt = std::make_unique<testing::Runtime>();
  if (cuda) {
    const Status s = backends::cuda::register_backend(*rt->backends);
    EXPECT_TRUE(s.is_ok());
  }
  return rt;
}

struct Load {
  explicit Load(std::vector<const char*> priority = {}, int32_t blocks = kBlocks) : names(std::move(priority)) {
    symbol = SymbolValue{"num_blocks", blocks};
    options.symbols = Span<const SymbolValue>(&symbol, 1);
    options.backends = Span<const char* const>(names.data(), names.size());
    options.fallback = Fallback::Fail;
  }
  Load(const Load&) = delete;
  std::vector<const char*> names;
  SymbolValue symbol;
  LoadOptions options;
};

struct Exported {
  std::vector<uint8_t> portable, cuda;
  int32_t vocab = 0;
  int64_t layers = 0;
};

std::vector<uint8_t> ExportStep(const std::string& name, int64_t max_seqs, int64_t max_tokens,
                                const std::vector<std::string>& backends, int32_t* vocab, int64_t* layers,
                                const std::optional<exporter::QuantizeOptions>& quantize = std::nullopt) {
  exporter::hf::StepOptions options;
  options.max_seqs = max_seqs;
  options.max_tokens = max_tokens;
  options.max_context = 64;
  options.block_size = 4;
  options.emit_logits = true;
  options.kv_dtype = ScalarType::F32;
  exporter::hf::StepImport a = exporter::hf::import_step(checkpoint_dir(name), options);
  if (vocab != nullptr) *vocab = static_cast<int32_t>(a.config.vocab_size);
  if (layers != nullptr) *layers = a.config.num_layers;
  return testing::export_program(std::move(a.graph), backends, quantize).program.bytes;
}

const Exported& Export(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Exported>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return *it->second;
  auto e = std::make_unique<Exported>();
  e->portable = ExportStep(name, 4, kMaxTokens, {"portable"}, &e->vocab, &e->layers);
  e->cuda = ExportStep(name, 4, kMaxTokens, {"cuda"}, nullptr, nullptr);
  return *cache.emplace(name, std::move(e)).first->second;
}

std::vector<std::vector<int32_t>> Prompts(int32_t vocab) {
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t length : {33, 21, 9}) {
    std::vector<int32_t> p;
    for (int32_t i = 0; i < length; ++i) p.push_back((7 + 13 * i + 31 * length) % vocab);
    prompts.push_back(p);
  }
  return prompts;
}

llm::SchedulerLimits Limits(int32_t max_seqs, int32_t max_tokens, int32_t requests) {
  llm::SchedulerLimits limits;
  limits.max_seqs = max_seqs;
  limits.max_tokens = max_tokens;
  limits.block_size = 4;
  limits.max_context = 64;
  limits.max_requests = requests;
  return limits;
}

Generation Generate(Method& method, int32_t vocab, const std::vector<std::vector<int32_t>>& prompts,
                    int32_t max_seqs = 4, int32_t max_tokens = kMaxTokens, int32_t blocks = kBlocks) {
  llm::GenerationConfig config;
  config.max_new_tokens = 10;
  config.ignore_eos = true;
  return testing::generate(method, Limits(max_seqs, max_tokens, static_cast<int32_t>(prompts.size())), blocks,
                           vocab, prompts, config);
}

// Greedy ids equal, request by request, up to the first position where the CPU's top-two logit gap
// (relative to the largest |logit|) is below `gap`: from there on a flipped argmax is allowed.
// Returns the number of such near-tie positions met before a difference.
int CompareGreedy(const Generation& got, const Generation& cpu, double gap) {
  int near_ties = 0;
  EXPECT_EQ(got.ids.size(), cpu.ids.size());
  for (size_t r = 0; r < got.ids.size() && r < cpu.ids.size(); ++r) {
    EXPECT_EQ(got.ids[r].size(), cpu.ids[r].size()) << "request " << r;
    for (size_t t = 0; t < got.ids[r].size() && t < cpu.ids[r].size(); ++t) {
      const std::vector<float>& l = cpu.logits[r][t];
      float first = -INFINITY, second = -INFINITY, scale = 0;
      for (float v : l) {
        scale = std::max(scale, std::fabs(v));
        if (v > first) {
          second = first;
          first = v;
        } else if (v > second) {
          second = v;
        }
      }
      const bool tie = (first - second) <= gap * std::max(scale, 1.0f);
      near_ties += tie;
      if (got.ids[r][t] != cpu.ids[r][t]) {
        EXPECT_TRUE(tie) << "request " << r << " token " << t << ": cuda " << got.ids[r][t] << ", cpu " << cpu.ids[r][t]
                         << " (top-two gap " << first - second << ")";
        break;
      }
    }
  }
  return near_ties;
}

void ExpectCudaOwnsEveryKvState(const Program& program, int64_t layers) {
  ASSERT_EQ(program.state_count(), size_t(2 * layers));
  for (size_t s = 0; s < program.state_count(); ++s) {
    const Program::State& state = program.state(s);
    SCOPED_TRACE(state.name);
    EXPECT_EQ(str(state.owner), "cuda");
    EXPECT_EQ(state.domain, MemoryDomain::Device);
    EXPECT_EQ(state.data, nullptr);
    EXPECT_NE(state.buffer, nullptr);
    EXPECT_GE(state.memory.device_bytes, state.nbytes);
  }
}

struct Reference {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::pair<int64_t, int64_t>> rows;
  tools::NpyArray logits;
};

Reference LoadReference(const std::string& name) {
  static const nlohmann::json j = [] {
    std::ifstream f(data_dir() + "/hf_reference/reference.json");
    return nlohmann::json::parse(f);
  }();
  const nlohmann::json& c = j.at("checkpoints").at(name);
  Reference r;
  r.prompts = c.at("prompts").get<std::vector<std::vector<int32_t>>>();
  for (const auto& row : c.at("rows")) r.rows.emplace_back(row[0].get<int64_t>(), row[1].get<int64_t>());
  std::string error;
  EXPECT_TRUE(tools::read_npy(data_dir() + "/hf_reference/" + c.at("logits_file").get<std::string>(), &r.logits, &error))
      << error;
  return r;
}

double RelL2(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// One sequence's token `token` at position `pos` as its own step (a decode of one token) with the
// 16-block table `table` (blocks of 4), greedy sampling parameters and an empty history; executes.
Status DecodeOne(Method& m, int32_t token, int32_t pos, const std::vector<int32_t>& table, ErrorContext* ctx) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> ints = {
      {{1}, {token}}, {{1}, {pos}}, {{1}, {table[size_t(pos / 4)] * 4 + pos % 4}}, {{1, 16}, table},
      {{1}, {pos + 1}}, {{2}, {0, 1}}, {{1}, {0}}};
  for (size_t k = 0; k < ints.size(); ++k) {
    EMBER_RETURN_IF_ERROR(m.set_input_sizes(k, Span<const int64_t>(ints[k].first.data(), ints[k].first.size()), ctx));
    std::memcpy(m.input(k).value().data, ints[k].second.data(), ints[k].second.size() * 4);
  }
  // temperature 0, top_k 0, top_p 1, penalty 1, seed 0, position 0, history [1, 1], history_len 0.
  const float zero = 0.0f, one = 1.0f;
  const int32_t izero = 0;
  const int64_t s1[1] = {1}, h[2] = {1, 1};
  for (size_t k = 7; k < 15; ++k) {
    EMBER_RETURN_IF_ERROR(m.set_input_sizes(k, Span<const int64_t>(k == 13 ? h : s1, k == 13 ? 2 : 1), ctx));
    const void* src = k == 7 ? static_cast<const void*>(&zero)
                      : (k == 9 || k == 10) ? static_cast<const void*>(&one)
                                            : static_cast<const void*>(&izero);
    std::memcpy(m.input(k).value().data, src, 4);
  }
  return m.execute(ctx);
}

// Sets EMBER_CUDA_NUMERICS for the loads in scope (read at init), then restores the default.
struct Numerics {
  explicit Numerics(const char* mode) { setenv("EMBER_CUDA_NUMERICS", mode, 1); }
  ~Numerics() { unsetenv("EMBER_CUDA_NUMERICS"); }
};

// Teacher-forced on the cuda backend: each prompt token its own step, the logits of every position.
// exact numerics: every family within its bound (f32 / FP8: 1e-3); fast (the default): activations
// rounded to bf16 for non-f32 weights, so those families are held to the bf16 bound (2e-2).
TEST(CudaLlm, LogitsOfEveryPositionMatchTransformers) {
  if (!HaveGpu()) return;
  auto rt = MakeRuntime(true);
  for (const char* mode : {"exact", "fast"})
  for (Family f : kFamilies) {
    const Numerics numerics(mode);
    const bool f32_weights = std::string(f.name).find("_f32") != std::string::npos;
    if (std::string(mode) == "fast" && !f32_weights) f.tolerance = std::max(f.tolerance, 2e-2);
    SCOPED_TRACE(std::string(f.name) + " numerics " + mode);
    const Reference ref = LoadReference(f.name);
    const Exported& e = Export(f.name);
    const Load load({"cuda"}, 64);
    testing::LoadedMethod lm(e.portable, rt->context, load.options);
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    EXPECT_EQ(str(lm.method().meta().delegate(DelegateMeta::kWholeMethod)->runs_on), "cuda");
    Method& m = lm.method();
    const int64_t vocab = ref.logits.dims[1];
    int32_t block = 0;
    double worst = 0;
    for (size_t s = 0; s < ref.prompts.size(); ++s) {
      const std::vector<int32_t>& prompt = ref.prompts[s];
      std::vector<int32_t> table(16, 0);
      for (int32_t& b : table) b = block++;
      double num = 0, den = 0;
      for (size_t i = 0; i < prompt.size(); ++i) {
        const int32_t pos = static_cast<int32_t>(i);
        ErrorContext ctx;
        ASSERT_TRUE(DecodeOne(m, prompt[i], pos, table, &ctx).is_ok()) << ctx.message;
        const float* got = m.output(2)->data_as<const float>();
        const float* want =
            reinterpret_cast<const float*>(ref.logits.data.data()) + (ref.rows[s].first + int64_t(i)) * vocab;
        const double err = RelL2(got, want, size_t(vocab));
        worst = std::max(worst, err);
        EXPECT_LE(err, 1.5 * f.tolerance) << "prompt " << s << " position " << i;
        for (int64_t v = 0; v < vocab; ++v) {
          num += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
          den += double(want[v]) * want[v];
        }
      }
      EXPECT_LE(std::sqrt(num / den), f.tolerance) << "prompt " << s;
    }
    std::printf("%s on cuda (%s numerics): worst position's relative L2 of the logits vs transformers %.3g (bound %.0e)\n",
                f.name, mode, worst, f.tolerance);
  }
}

TEST(CudaLlm, GreedyIdsEqualThePortableRunWholeAndDelegated) {
  if (!HaveGpu()) return;
  auto cpu_rt = MakeRuntime(false), cuda_rt = MakeRuntime(true);
  int total_ties = 0;
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.name);
    const Exported& e = Export(f.name);
    const Load cpu_load, cuda_load({"cuda"}), delegated_load;
    testing::LoadedMethod cpu(e.portable, cpu_rt->context, cpu_load.options);
    ASSERT_TRUE(cpu.ok()) << cpu.ctx().message;
    const Generation expected = Generate(cpu.method(), e.vocab, Prompts(e.vocab));
    ASSERT_EQ(expected.ids.size(), 3u);
    EXPECT_GT(expected.preemptions, 0) << "the pool was meant to force a preemption";

    // (a) The portable program, its step run whole on cuda.
    testing::LoadedMethod whole(e.portable, cuda_rt->context, cuda_load.options);
    ASSERT_TRUE(whole.ok()) << whole.ctx().message;
    ExpectCudaOwnsEveryKvState(whole.program(), e.layers);
    testing::ExpectPlannedMemoryIsTaken(whole, "cuda", 1);
    const Generation got = Generate(whole.method(), e.vocab, Prompts(e.vocab));
    EXPECT_EQ(got.preemptions, expected.preemptions);
    EXPECT_EQ(got.steps, expected.steps);
    const int ties = CompareGreedy(got, expected, f.gap);

    // (b) Exported for cuda: one GRAPH delegate on cuda.
    testing::LoadedMethod delegated(e.cuda, cuda_rt->context, delegated_load.options);
    ASSERT_TRUE(delegated.ok()) << delegated.ctx().message;
    ASSERT_EQ(delegated.method().meta().delegate_count(), 1u);
    EXPECT_EQ(str(delegated.method().meta().delegate(0)->runs_on), "cuda");
    ExpectCudaOwnsEveryKvState(delegated.program(), e.layers);
    testing::ExpectPlannedMemoryIsTaken(delegated, "cuda", 1);
    const Generation got_delegated = Generate(delegated.method(), e.vocab, Prompts(e.vocab));
    EXPECT_EQ(got_delegated.ids, got.ids) << "the GRAPH delegate and the whole method run the same launches";
    total_ties += ties;
    std::printf("%s on cuda: greedy ids vs portable, %d near-tie positions (gap < %.0e) met\n", f.name, ties, f.gap);
  }
  std::printf("near-tie positions in all checkpoints: %d\n", total_ties);
}

// W8A8 (--quantize fp8-dynamic): the rms_norm / silu_mul producers quantize the activations for
// their linears (fused; plan.h FusedGroup).
//  - Steps of at most 8 tokens (prefill chunks of 8) run every linear on the W8A8 GEMV, bit-exact
//    with the reference's W8A8 (exact FP8 products, double sums): the same greedy ids as the CPU
//    up to f32 near-ties.
//  - Chunks of up to 32 tokens run the prefill on the FP8 GEMM (cuBLASLt, f32 accumulation in
//    another order): a last-bit difference can move an activation to the next FP8 code in a later
//    layer (a step of 1/16 to 1/8 of its value), so ids are compared up to near-ties of 5e-2.
TEST(CudaLlm, W8a8WithQuantizationFusedIntoProducersGivesThePortableIds) {
  if (!HaveGpu()) return;
  auto cpu_rt = MakeRuntime(false), cuda_rt = MakeRuntime(true);
  exporter::QuantizeOptions q;
  q.preset = exporter::QuantPreset::Fp8Dynamic;
  q.min_size = 0;
  for (int32_t chunk : {8, 32}) {
    SCOPED_TRACE(::testing::Message() << "max tokens per step " << chunk);
    int32_t vocab = 0;
    const std::vector<uint8_t> program = ExportStep("qwen3_f32", 4, chunk, {"portable"}, &vocab, nullptr, q);
    const Load cpu_load, cuda_load({"cuda"});
    testing::LoadedMethod cpu(program, cpu_rt->context, cpu_load.options);
    ASSERT_TRUE(cpu.ok()) << cpu.ctx().message;
    testing::LoadedMethod gpu(program, cuda_rt->context, cuda_load.options);
    ASSERT_TRUE(gpu.ok()) << gpu.ctx().message;
    const Generation expected = Generate(cpu.method(), vocab, Prompts(vocab), 4, chunk);
    const Generation got = Generate(gpu.method(), vocab, Prompts(vocab), 4, chunk);
    const double gap = chunk <= 8 ? 1e-3 : 5e-2;
    const int ties = CompareGreedy(got, expected, gap);
    std::printf("qwen3_f32 W8A8 on cuda, %d tokens a step: greedy ids vs portable, %d near-tie positions (gap < %.0e) met\n",
                chunk, ties, gap);
  }
}

TEST(CudaLlm, ASequenceAloneAndInABatchOf32GetTheSameIds) {
  if (!HaveGpu()) return;
  auto rt = MakeRuntime(true);
  for (const char* name : {"qwen3_f32", "qwen2_bf16", "qwen3_fp8"}) {
    SCOPED_TRACE(name);
    int32_t vocab = 0;
    const std::vector<uint8_t> bytes = ExportStep(name, 32, 64, {"portable"}, &vocab, nullptr);
    std::vector<std::vector<int32_t>> prompts;
    for (int32_t r = 0; r < 32; ++r) {
      std::vector<int32_t> p;
      for (int32_t i = 0; i < 5 + (r * 7) % 23; ++i) p.push_back((3 + 17 * i + 29 * r) % vocab);
      prompts.push_back(p);
    }
    const Load load({"cuda"}, 32 * 16);
    testing::LoadedMethod m(bytes, rt->context, load.options);
    ASSERT_TRUE(m.ok()) << m.ctx().message;
    const Generation batch = Generate(m.method(), vocab, prompts, 32, 64, 32 * 16);
    for (size_t r : {size_t(0), size_t(13), size_t(31)}) {
      const Generation alone = Generate(m.method(), vocab, {prompts[r]}, 32, 64, 32 * 16);
      ASSERT_EQ(alone.ids.size(), 1u);
      EXPECT_EQ(alone.ids[0], batch.ids[r]) << "request " << r;
    }
  }
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// Serves every device request of the cuda backend and has no memory: the load fails with
// OutOfMemory naming what was asked, and cleans up.
class NoDeviceMemory final : public DeviceAllocator {
 public:
  bool serves(const AllocationRequest& r) const override { return r.domain == MemoryDomain::Device; }
  void* allocate(const AllocationRequest& r) override {
    ++asked;
    return nullptr;
  }
  void deallocate(const AllocationRequest&, void*) noexcept override {}
  int asked = 0;
};

TEST(CudaLlm, TooLittleDeviceMemoryIsOutOfMemoryNamingTheRequest) {
  if (!HaveGpu()) return;
  auto rt = MakeRuntime(true);
  NoDeviceMemory none;
  rt->context.device_allocator = &none;
  const Exported& e = Export("qwen3_f32");
  const Load load({"cuda"});
  testing::LoadedMethod lm(e.portable, rt->context, load.options);
  ASSERT_FALSE(lm.ok());
  EXPECT_EQ(lm.error(), Error::OutOfMemory) << lm.ctx().message;
  EXPECT_NE(std::string(lm.ctx().message).find("bytes of device memory"), std::string::npos) << lm.ctx().message;
  EXPECT_GT(none.asked, 0);
}

// A token id outside the vocabulary: the device reports it, the step fails with InvalidArgument
// naming the op, and the next good step runs.
TEST(CudaLlm, ATokenIdOutsideTheVocabularyFailsTheStep) {
  if (!HaveGpu()) return;
  auto rt = MakeRuntime(true);
  const Exported& e = Export("qwen3_f32");
  const Load load({"cuda"});
  testing::LoadedMethod lm(e.portable, rt->context, load.options);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  Method& m = lm.method();
  const std::vector<int32_t> table(16, 0);
  auto run = [&](int32_t token, ErrorContext* ctx) { return DecodeOne(m, token, 0, table, ctx); };
  ErrorContext bad;
  const Status s = run(e.vocab + 5, &bad);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(std::string(bad.message).find("embedding"), std::string::npos) << bad.message;
  ErrorContext good;
  EXPECT_TRUE(run(7, &good).is_ok()) << good.message;
}

}  // namespace
}  // namespace ember
