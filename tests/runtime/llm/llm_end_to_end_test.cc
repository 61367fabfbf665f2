// LLMs end to end (docs/DESIGN.md §6): the tiny checkpoints of tests/llm/make_checkpoints.py imported by the
// hf_llm exporter into a `step` program, loaded, and run:
//  - logits of every prompt position, one decode step per token, against Hugging Face transformers
//    (tests/data/llm/hf_reference, made by tests/llm/make_reference_logits.py): relative L2 over each
//    prompt's [positions, vocab] logits <= 1e-4 for f32 and FP8 (dequantized exactly), <= 5e-3 for
//    f16, <= 2e-2 for bf16, and per position within 1.5x that (transformers runs bf16 / f16 models
//    with bf16 / f16 activations, Ember in f32: the difference is mostly transformers' rounding);
//  - greedy generation by the Engine of the three prompts at once, with chunked prefill (8 tokens a
//    step) and with a pool so small that sequences are preempted and recomputed: the ids equal the
//    independent numpy forward pass's (tests/llm/reference_forward.py, recorded in reference.json);
//  - batch invariance: a sequence's logits are bitwise the same alone and batched with others;
//  - the default export has no `logits` output (only next_ids, logprobs) and generates the same ids
//    and bitwise the same logprobs as the same checkpoint exported with StepOptions::emit_logits;
//  - Engine::init refuses step methods whose outputs it cannot use (wrong dtype, missing, wrong dims).
// Tests that read logits export with emit_logits (the exporter's --emit-logits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporter/importers/hf_llm/step_graph.h"
#include "runtime/llm/engine.h"
#include "tests/common/program_util.h"
#include "tests/runtime/llm/engine_test_util.h"
#include "tools/common/npy.h"

namespace ember {
namespace {

using testing::Generation;

struct Reference {
  std::vector<std::vector<int32_t>> prompts, generated;  // numpy_generated
  std::vector<std::pair<int64_t, int64_t>> rows;         // logits rows of each prompt
  tools::NpyArray logits;                                  // [rows, vocab] f32
};

const nlohmann::json& reference_json() {
  static const nlohmann::json j = [] {
    std::ifstream f(std::string(EMBER_LLM_TEST_DATA) + "/hf_reference/reference.json");
    return nlohmann::json::parse(f);
  }();
  return j;
}

Reference load_reference(const std::string& name) {
  const nlohmann::json& c = reference_json().at("checkpoints").at(name);
  Reference r;
  r.prompts = c.at("prompts").get<std::vector<std::vector<int32_t>>>();
  r.generated = c.at("numpy_generated").get<std::vector<std::vector<int32_t>>>();
  for (const auto& row : c.at("rows")) r.rows.emplace_back(row[0].get<int64_t>(), row[1].get<int64_t>());
  std::string error;
  EXPECT_TRUE(tools::read_npy(std::string(EMBER_LLM_TEST_DATA) + "/hf_reference/" + c.at("logits_file").get<std::string>(),
                              &r.logits, &error))
      << error;
  return r;
}

// An exported step program (with a `logits` output when emit_logits), loaded with `num_blocks` KV
// blocks; `edit` may change the graph before it is exported.
struct LlmProgram {
  LlmProgram(const std::string& name, int64_t num_blocks, int64_t max_tokens = 64, bool emit_logits = false,
             const std::function<void(exporter::Graph&)>& edit = {}) {
    exporter::hf::StepOptions options;
    options.max_seqs = 4;
    options.max_tokens = max_tokens;
    options.max_context = 64;
    options.block_size = 4;
    options.kv_dtype = ScalarType::F32;
    options.emit_logits = emit_logits;
    imported = exporter::hf::import_step(std::string(EMBER_LLM_CHECKPOINTS) + "/" + name, options);
    if (edit) edit(imported.graph);
    // An edit may put NaN into weights on purpose (the exporter refuses them by default).
    bytes = testing::export_program(std::move(imported.graph), {"portable"}, std::nullopt, nullptr,
                                    /*allow_non_finite_weights=*/edit != nullptr)
                .program.bytes;
    symbol = SymbolValue{"num_blocks", num_blocks};
    load.symbols = Span<const SymbolValue>(&symbol, 1);
    method = std::make_unique<testing::LoadedMethod>(bytes, rt.context, load);
  }
  llm::SchedulerLimits limits(int32_t requests) const {
    llm::SchedulerLimits l;
    l.max_seqs = 4;
    l.max_tokens = static_cast<int32_t>(bytes.empty() ? 0 : max_tokens());
    l.block_size = 4;
    l.max_context = 64;
    l.max_requests = requests;
    return l;
  }
  int64_t max_tokens() const { return method->method().meta().input(0).value().max_dims[0]; }
  int32_t vocab_size() const { return static_cast<int32_t>(imported.config.vocab_size); }
  std::vector<std::string> output_names() const {
    std::vector<std::string> names;
    const MethodMeta meta = method->method().meta();
    for (size_t i = 0; i < meta.output_count(); ++i) names.push_back(meta.output(i).value().name);
    return names;
  }

  exporter::hf::StepImport imported;
  std::vector<uint8_t> bytes;
  SymbolValue symbol;
  LoadOptions load;
  testing::Runtime rt;
  std::unique_ptr<testing::LoadedMethod> method;
};

double rel_l2(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct Family {
  const char* name;
  double tolerance;
  bool exact_greedy;  // f32 math on f32 (or exactly dequantized) weights: greedy ids must equal numpy's
};
const Family kFamilies[] = {{"llama_f32", 1e-4, true},  {"qwen2_f32", 1e-4, true},  {"qwen3_f32", 1e-4, true},
                            {"qwen3_fp8", 1e-4, true},  {"llama_f16", 5e-3, false}, {"qwen2_bf16", 2e-2, false},
                            {"qwen3_bf16", 2e-2, false}, {"mistral_f32", 1e-4, true}};

// Teacher-forced: each prompt token in its own step (a decode of one token), logits of every position.
TEST(LlmEndToEnd, LogitsOfEveryPositionMatchTransformers) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.name);
    const Reference ref = load_reference(f.name);
    LlmProgram p(f.name, 64, /*max_tokens=*/64, /*emit_logits=*/true);
    ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
    ASSERT_EQ(p.output_names(), (std::vector<std::string>{"next_ids", "logprobs", "logits"}));
    Method& m = p.method->method();
    const int64_t vocab = ref.logits.dims[1];
    int32_t block = 0;
    double worst = 0, worst_prompt = 0;
    for (size_t s = 0; s < ref.prompts.size(); ++s) {
      const std::vector<int32_t>& prompt = ref.prompts[s];
      std::vector<int32_t> table(16, 0);
      for (int32_t& b : table) b = block++;  // 16 blocks of 4 = the 64-token context
      double num = 0, den = 0;
      for (size_t i = 0; i < prompt.size(); ++i) {
        const int32_t pos = static_cast<int32_t>(i);
        const std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> ints = {
            {{1}, {prompt[i]}}, {{1}, {pos}}, {{1}, {table[size_t(pos / 4)] * 4 + pos % 4}}, {{1, 16}, table},
            {{1}, {pos + 1}},   {{2}, {0, 1}}, {{1}, {0}}};
        ErrorContext ctx;
        for (size_t k = 0; k < ints.size(); ++k) {
          ASSERT_TRUE(m.set_input_sizes(k, Span<const int64_t>(ints[k].first.data(), ints[k].first.size()), &ctx).is_ok()) << ctx.message;
          std::memcpy(m.input(k).value().data, ints[k].second.data(), ints[k].second.size() * 4);
        }
        // Greedy sampling inputs: temperature 0, top_k 0, top_p 1, penalty 1, seed 0, position 0,
        // history [1, 1] empty.
        const float zero = 0.0f, one = 1.0f;
        const int32_t izero = 0;
        const int64_t s1[1] = {1}, h[2] = {1, 1};
        for (size_t k = 7; k < 15; ++k) {
          ASSERT_TRUE(m.set_input_sizes(k, Span<const int64_t>(k == 13 ? h : s1, k == 13 ? 2 : 1), &ctx).is_ok()) << ctx.message;
          const void* src = k == 7 ? static_cast<const void*>(&zero) : (k == 9 || k == 10) ? static_cast<const void*>(&one)
                                                                                          : static_cast<const void*>(&izero);
          std::memcpy(m.input(k).value().data, src, 4);
        }
        ASSERT_TRUE(m.execute(&ctx).is_ok()) << ctx.message;
        const float* got = m.output(2)->data_as<const float>();
        const float* want = reinterpret_cast<const float*>(ref.logits.data.data()) + (ref.rows[s].first + int64_t(i)) * vocab;
        const double err = rel_l2(got, want, size_t(vocab));
        worst = std::max(worst, err);
        EXPECT_LE(err, 1.5 * f.tolerance) << "prompt " << s << " position " << i;
        for (int64_t v = 0; v < vocab; ++v) {
          num += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
          den += double(want[v]) * want[v];
        }
      }
      const double prompt_err = std::sqrt(num / den);
      worst_prompt = std::max(worst_prompt, prompt_err);
      EXPECT_LE(prompt_err, f.tolerance) << "prompt " << s;
    }
    std::printf("%s: relative L2 of the logits vs transformers: worst prompt %.3g (bound %.0e), worst position %.3g\n",
                f.name, worst_prompt, f.tolerance, worst);
  }
}

// `prompts` on p's step with a pool of `num_blocks`, max_new tokens each with `base`'s sampling.
Generation generate(LlmProgram& p, const std::vector<std::vector<int32_t>>& prompts, int32_t num_blocks,
                    int32_t max_new, const llm::GenerationConfig& base = {}) {
  llm::GenerationConfig config = base;
  config.max_new_tokens = max_new;
  return testing::generate(p.method->method(), p.limits(static_cast<int32_t>(prompts.size())), num_blocks,
                           p.vocab_size(), prompts, config);
}

TEST(LlmEndToEnd, GreedyGenerationMatchesNumpyWithChunkedPrefillAndPreemption) {
  for (const Family& f : kFamilies) {
    if (!f.exact_greedy) continue;
    SCOPED_TRACE(f.name);
    const Reference ref = load_reference(f.name);
    const int32_t max_new = static_cast<int32_t>(ref.generated[0].size());
    {
      LlmProgram p(f.name, 48, /*max_tokens=*/8);  // the 33-token prompt takes five steps
      ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
      const Generation g = generate(p, ref.prompts, 48, max_new);
      EXPECT_EQ(g.ids, ref.generated);
      EXPECT_EQ(g.preemptions, 0);
    }
    {
      // 16 blocks = one context: the three sequences cannot all hold their KV at once.
      LlmProgram p(f.name, 16, /*max_tokens=*/8);
      ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
      const Generation g = generate(p, ref.prompts, 16, max_new);
      EXPECT_EQ(g.ids, ref.generated);
      EXPECT_GT(g.preemptions, 0) << "the pool was meant to force a preemption";
    }
  }
}

TEST(LlmEndToEnd, LogitsAreBitwiseTheSameAloneAndBatched) {
  for (const char* name : {"qwen2_f32", "qwen3_bf16", "qwen3_fp8"}) {
    SCOPED_TRACE(name);
    const Reference ref = load_reference(name);
    LlmProgram p(name, 64, /*max_tokens=*/64, /*emit_logits=*/true);
    ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
    const Generation batched = generate(p, ref.prompts, 64, 8);
    ASSERT_TRUE(batched.has_logits);
    for (size_t r = 0; r < ref.prompts.size(); ++r) {
      const Generation alone = generate(p, {ref.prompts[r]}, 64, 8);
      ASSERT_EQ(alone.logits[0].size(), batched.logits[r].size());
      for (size_t t = 0; t < alone.logits[0].size(); ++t) {
        EXPECT_EQ(std::memcmp(alone.logits[0][t].data(), batched.logits[r][t].data(), alone.logits[0][t].size() * 4), 0)
            << "request " << r << " token " << t;
      }
      EXPECT_EQ(alone.ids[0], batched.ids[r]);
    }
  }
}

// The default export: outputs next_ids and logprobs only, Engine::logits() empty, and the same ids
// and bitwise the same logprobs as the program with logits (the lm_head still feeds `sample`; only
// its output leaving the graph differs). Greedy for every family, and sampled with top-k / top-p /
// a repetition penalty for two.
TEST(LlmEndToEnd, WithoutLogitsTheStepGeneratesTheSameIdsAndLogprobs) {
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.name);
    const Reference ref = load_reference(f.name);
    LlmProgram without(f.name, 64, /*max_tokens=*/16);
    LlmProgram with(f.name, 64, /*max_tokens=*/16, /*emit_logits=*/true);
    ASSERT_TRUE(without.method->ok()) << without.method->ctx().message;
    ASSERT_TRUE(with.method->ok()) << with.method->ctx().message;
    EXPECT_EQ(without.output_names(), (std::vector<std::string>{"next_ids", "logprobs"}));
    EXPECT_EQ(with.output_names(), (std::vector<std::string>{"next_ids", "logprobs", "logits"}));
    std::vector<llm::GenerationConfig> configs(1);
    if (std::string(f.name) == "qwen2_f32" || std::string(f.name) == "qwen3_bf16") {
      llm::GenerationConfig sampled;
      sampled.temperature = 0.8f;
      sampled.top_k = 40;
      sampled.top_p = 0.9f;
      sampled.repetition_penalty = 1.2f;
      sampled.seed = 11;
      configs.push_back(sampled);
    }
    for (const llm::GenerationConfig& config : configs) {
      SCOPED_TRACE(config.temperature == 0.0f ? "greedy" : "sampled");
      const Generation a = generate(without, ref.prompts, 64, 12, config);
      const Generation b = generate(with, ref.prompts, 64, 12, config);
      EXPECT_FALSE(a.has_logits);
      EXPECT_TRUE(b.has_logits);
      EXPECT_EQ(a.ids, b.ids);
      ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
      for (size_t r = 0; r < a.logprobs.size(); ++r) {
        ASSERT_EQ(a.logprobs[r].size(), b.logprobs[r].size()) << "request " << r;
        EXPECT_EQ(a.logprobs[r].size(), 12u) << "request " << r;
        EXPECT_EQ(std::memcmp(a.logprobs[r].data(), b.logprobs[r].data(), a.logprobs[r].size() * 4), 0)
            << "request " << r;
        for (size_t t = 0; t < a.logits[r].size(); ++t) {
          EXPECT_TRUE(a.logits[r][t].empty()) << "request " << r << " token " << t;
          EXPECT_EQ(b.logits[r][t].size(), size_t(with.vocab_size())) << "request " << r << " token " << t;
        }
      }
    }
  }
}

// A step without `logprobs` (exporter --no-logprobs; here the output is dropped from the imported
// graph, which is what the option does): only the S ids come back, the tokens are the same, and
// every TokenEvent's logprob is NaN.
TEST(LlmEndToEnd, WithoutLogprobsTheStepReturnsOnlyTheIds) {
  const Reference ref = load_reference("qwen3_f32");
  auto drop_logprobs = [](exporter::Graph& g) {
    for (size_t o = 0; o < g.outputs.size(); ++o) {
      if (g.outputs[o].name == "logprobs") g.outputs.erase(g.outputs.begin() + std::ptrdiff_t(o));
    }
  };
  LlmProgram ids_only("qwen3_f32", 64, /*max_tokens=*/16, /*emit_logits=*/false, drop_logprobs);
  LlmProgram full("qwen3_f32", 64, /*max_tokens=*/16);
  ASSERT_TRUE(ids_only.method->ok()) << ids_only.method->ctx().message;
  EXPECT_EQ(ids_only.output_names(), (std::vector<std::string>{"next_ids"}));
  const Generation a = generate(ids_only, ref.prompts, 64, 12, llm::GenerationConfig());
  const Generation b = generate(full, ref.prompts, 64, 12, llm::GenerationConfig());
  EXPECT_EQ(a.ids, b.ids);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t r = 0; r < a.logprobs.size(); ++r) {
    ASSERT_EQ(a.logprobs[r].size(), 12u) << "request " << r;
    for (size_t t = 0; t < a.logprobs[r].size(); ++t) {
      EXPECT_TRUE(std::isnan(a.logprobs[r][t])) << "request " << r << " token " << t;
      EXPECT_TRUE(std::isfinite(b.logprobs[r][t])) << "request " << r << " token " << t;
    }
  }
}

// Engine::init's checks of the step method's outputs and of its own arguments, each an
// InvalidArgument whose message names the culprit.
TEST(LlmEndToEnd, EngineRefusesAStepMethodItCannotUse) {
  auto output = [](exporter::Graph& g, const char* name) -> exporter::NamedValue& {
    for (exporter::NamedValue& o : g.outputs) {
      if (o.name == name) return o;
    }
    throw std::runtime_error(std::string("no output ") + name);
  };
  // The output `name` replaced by cast(its value, dtype).
  auto cast_output = [&](exporter::Graph& g, const char* name, ScalarType dtype) {
    exporter::NamedValue& out = output(g, name);
    exporter::Value v;
    v.name = std::string(name) + "_cast";
    v.dtype = dtype;
    v.dims = g.values[size_t(out.value)].dims;
    v.producer = static_cast<int>(g.nodes.size());
    exporter::Node n;
    n.op = OpCode::Cast;
    n.attrs.kind = AttrKind::Cast;
    n.attrs.cast_to = dtype;
    n.inputs = {out.value};
    n.outputs = {g.add_value(std::move(v))};
    n.name = n.source_op = std::string(name) + "_cast";
    out.value = n.outputs[0];
    g.nodes.push_back(std::move(n));
  };
  struct Case {
    const char* what;
    bool emit_logits = false;
    std::function<void(exporter::Graph&)> edit = {};
    int32_t vocab_delta = 0;  // added to the model's vocab_size given to init
    bool zero_vocab = false;  // init gets vocab_size 0
    std::vector<int32_t> eos = {};
    bool eos_past_vocab = false;  // eos gets the first id past the vocabulary too
    const char* message = "";
  };
  const std::vector<Case> cases = {
      {.what = "next_ids f32",
       .edit = [&](exporter::Graph& g) { cast_output(g, "next_ids", ScalarType::F32); },
       .message = "step output 'next_ids' is f32; expected i32"},
      {.what = "next_ids f32, logits present",
       .emit_logits = true,
       .edit = [&](exporter::Graph& g) { cast_output(g, "next_ids", ScalarType::F32); },
       .message = "step output 'next_ids' is f32; expected i32"},
      {.what = "logprobs i32",
       .edit = [&](exporter::Graph& g) { cast_output(g, "logprobs", ScalarType::I32); },
       .message = "step output 'logprobs' is i32; expected f32"},
      {.what = "logits i32",
       .emit_logits = true,
       .edit = [&](exporter::Graph& g) { cast_output(g, "logits", ScalarType::I32); },
       .message = "step output 'logits' is i32; expected f32"},
      {.what = "logits as logprobs (rank 2)",
       .emit_logits = true,
       .edit = [&](exporter::Graph& g) {
         output(g, "logprobs").name = "scores";
         output(g, "logits").name = "logprobs";
       },
       .message = "step output 'logprobs' has rank 2"},
      {.what = "no next_ids",
       .emit_logits = true,
       .edit = [&](exporter::Graph& g) { output(g, "next_ids").name = "ids"; },
       .message = "the method has no output 'next_ids'"},
      {.what = "logits columns",
       .emit_logits = true,
       .vocab_delta = 1,
       .message = "step output 'logits' has"},
      {.what = "vocab_size 0", .zero_vocab = true, .message = "vocab_size 0 must be >= 1"},
      {.what = "eos -1", .eos = {-1}, .message = "EOS id -1 is outside"},
      {.what = "eos = vocab_size", .eos = {0}, .eos_past_vocab = true, .message = "is outside [0, vocab_size"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    LlmProgram p("qwen3_f32", 16, /*max_tokens=*/8, c.emit_logits, c.edit);
    ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
    const llm::SchedulerLimits limits = p.limits(1);
    std::vector<uint8_t> memory(llm::Engine::memory_bytes(limits, 16));
    const int32_t vocab = c.zero_vocab ? 0 : p.vocab_size() + c.vocab_delta;
    std::vector<int32_t> eos = c.eos;
    if (c.eos_past_vocab) eos.push_back(vocab);
    llm::Engine engine;
    ErrorContext ctx;
    const Status s = engine.init(p.method->method(), limits, 16, vocab, Span<const int32_t>(eos.data(), eos.size()),
                                 Span<uint8_t>(memory.data(), memory.size()), &ctx);
    EXPECT_EQ(s.code(), Error::InvalidArgument);
    EXPECT_NE(std::string(ctx.message).find(c.message), std::string::npos) << ctx.message;
  }
  // The programs unedited are accepted, with and without logits, EOS = the last id; without logits,
  // Engine::logits() is empty and generation works.
  for (bool emit_logits : {false, true}) {
    LlmProgram p("qwen3_f32", 16, /*max_tokens=*/8, emit_logits);
    ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
    const llm::SchedulerLimits limits = p.limits(1);
    std::vector<uint8_t> memory(llm::Engine::memory_bytes(limits, 16));
    llm::Engine engine;
    ErrorContext ctx;
    const int32_t eos[] = {p.vocab_size() - 1};
    EXPECT_TRUE(engine.init(p.method->method(), limits, 16, p.vocab_size(), Span<const int32_t>(eos, 1),
                            Span<uint8_t>(memory.data(), memory.size()), &ctx)
                    .is_ok())
        << ctx.message;
    EXPECT_EQ(engine.has_logits(), emit_logits);
    const int32_t prompt[] = {5, 9, 11};
    Result<int32_t> seq = engine.add(Span<const int32_t>(prompt, 3), llm::GenerationConfig(), &ctx);
    ASSERT_TRUE(seq.is_ok()) << ctx.message;
    Result<Span<const llm::TokenEvent>> events = engine.step(&ctx);
    ASSERT_TRUE(events.is_ok()) << ctx.message;
    ASSERT_EQ(events.value().size(), 1u);
    EXPECT_EQ(engine.logits(seq.value()).size(), emit_logits ? size_t(p.vocab_size()) : 0u);
  }
}

// The Engine under pressure with the real tiny qwen2: a few hundred requests (500;
// EMBER_LLM_ENGINE_SOAK_REQUESTS sets another count) over 24 prompts that share 4 prefixes, random
// max_new_tokens, an EOS id, stop tokens (finish() as a caller matching stop strings does),
// cancellations, arrivals while others run, against a pool of one context (16 blocks of 4). Every
// request ends; its greedy ids equal those of the same prompt run alone on a roomy pool (batch
// invariance under chunked prefill, prefix reuse and preemption by recompute; cancelled ones a
// prefix of them); the pool has every block free at the end.
TEST(LlmEndToEnd, SoakOfHundredsOfRequestsOnAOneContextPoolMatchesAloneRuns) {
  const char* env = std::getenv("EMBER_LLM_ENGINE_SOAK_REQUESTS");
  const int64_t request_count = env != nullptr && std::atoll(env) > 0 ? std::atoll(env) : 500;
  LlmProgram p("qwen2_f32", 16, /*max_tokens=*/16);
  LlmProgram roomy("qwen2_f32", 64, /*max_tokens=*/16);
  ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
  ASSERT_TRUE(roomy.method->ok()) << roomy.method->ctx().message;
  const int32_t vocab = p.vocab_size();
  std::mt19937_64 rng(2024);
  auto uniform = [&rng](int32_t lo, int32_t hi) { return lo + int32_t(rng() % uint64_t(hi - lo + 1)); };
  std::vector<std::vector<int32_t>> prefixes(4), prompts;
  for (auto& prefix : prefixes) {
    prefix.resize(size_t(uniform(8, 30)));
    for (int32_t& t : prefix) t = uniform(0, vocab - 1);
  }
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> prompt = prefixes[size_t(i % 4)];
    for (int32_t k = uniform(1, 6); k > 0; --k) prompt.push_back(uniform(0, vocab - 1));
    prompts.push_back(prompt);
  }
  // Alone: each prompt by itself, 12 greedy tokens, no EOS.
  constexpr int32_t kMaxNew = 12;
  llm::GenerationConfig alone_config;
  alone_config.max_new_tokens = kMaxNew;
  std::vector<std::vector<int32_t>> alone;
  for (const auto& prompt : prompts) {
    const Generation g = testing::generate(roomy.method->method(), roomy.limits(1), 64, vocab, {prompt}, alone_config);
    ASSERT_EQ(g.ids.size(), 1u);
    ASSERT_EQ(g.ids[0].size(), size_t(kMaxNew));
    alone.push_back(g.ids[0]);
  }
  const int32_t eos = alone[0][3];  // an id that some continuations contain

  struct Request {
    size_t prompt = 0;
    int32_t max_new = 0;
    bool ignore_eos = false;
    int32_t stop = -1;         // a stop token (-1: none)
    int64_t cancel_after = -1;  // steps after its arrival
    int32_t seq = -1;
    int64_t arrived_at = 0;
    llm::FinishReason end = llm::FinishReason::None;
    std::vector<int32_t> ids;
  };
  std::vector<Request> requests(static_cast<size_t>(request_count));
  for (Request& r : requests) {
    r.prompt = size_t(uniform(0, int32_t(prompts.size()) - 1));
    r.max_new = uniform(1, kMaxNew);
    r.ignore_eos = uniform(0, 3) == 0;
    if (uniform(0, 4) == 0) r.stop = alone[r.prompt][size_t(uniform(0, kMaxNew - 1))];
    if (uniform(0, 9) == 0) r.cancel_after = uniform(0, 12);
  }
  const llm::SchedulerLimits limits = p.limits(6);
  std::vector<uint8_t> memory(llm::Engine::memory_bytes(limits, 16));
  llm::Engine engine;
  ErrorContext ctx;
  ASSERT_TRUE(engine.init(p.method->method(), limits, 16, vocab, Span<const int32_t>(&eos, 1),
                          Span<uint8_t>(memory.data(), memory.size()), &ctx)
                  .is_ok())
      << ctx.message;
  std::vector<int64_t> seq_request(size_t(limits.max_requests), -1);
  size_t next = 0;
  int64_t ended = 0, step = 0, live = 0;
  auto end = [&](Request& r, llm::FinishReason reason) {
    r.end = reason;
    engine.release(r.seq);
    seq_request[size_t(r.seq)] = -1;
    --live;
    ++ended;
  };
  while (ended < request_count) {
    ASSERT_LT(step, 40 * request_count) << ended << " of " << request_count << " ended";
    for (int32_t k = uniform(0, 2); k > 0 && next < requests.size() && live < limits.max_requests; --k) {
      Request& r = requests[next++];
      llm::GenerationConfig config;
      config.max_new_tokens = r.max_new;
      config.ignore_eos = r.ignore_eos;
      const std::vector<int32_t>& prompt = prompts[r.prompt];
      Result<int32_t> seq = engine.add(Span<const int32_t>(prompt.data(), prompt.size()), config, &ctx);
      ASSERT_TRUE(seq.is_ok()) << ctx.message;
      r.seq = seq.value();
      r.arrived_at = step;
      seq_request[size_t(r.seq)] = int64_t(&r - requests.data());
      ++live;
    }
    for (int64_t index : std::vector<int64_t>(seq_request)) {
      if (index < 0) continue;
      Request& r = requests[size_t(index)];
      if (r.cancel_after >= 0 && step - r.arrived_at == r.cancel_after) {
        engine.cancel(r.seq);
        end(r, llm::FinishReason::Cancelled);
      }
    }
    ++step;
    if (!engine.has_work()) continue;
    Result<Span<const llm::TokenEvent>> events = engine.step(&ctx);
    ASSERT_TRUE(events.is_ok()) << ctx.message;
    for (const llm::TokenEvent& e : events.value()) {
      Request& r = requests[size_t(seq_request[size_t(e.seq)])];
      ASSERT_NE(e.finished, llm::FinishReason::Failed);
      r.ids.push_back(e.token);
      if (e.finished != llm::FinishReason::None) {
        end(r, e.finished);
      } else if (e.token == r.stop) {
        engine.finish(e.seq, llm::FinishReason::Stop);
        end(r, llm::FinishReason::Stop);
      }
    }
  }
  EXPECT_FALSE(engine.has_work());
  EXPECT_EQ(engine.blocks().free_count(), 16);
  int64_t counts[6] = {};
  for (const Request& r : requests) {
    ++counts[int(r.end)];
    // What the request must have produced: the alone ids up to EOS, max_new or the stop token (in
    // the order the Engine and then its caller look at a token).
    std::vector<int32_t> want;
    llm::FinishReason why = llm::FinishReason::Length;
    for (int32_t t : alone[r.prompt]) {
      want.push_back(t);
      if (!r.ignore_eos && t == eos) {
        why = llm::FinishReason::Eos;
        break;
      }
      if (int32_t(want.size()) == r.max_new) break;
      if (t == r.stop) {
        why = llm::FinishReason::Stop;
        break;
      }
    }
    const size_t index = size_t(&r - requests.data());
    if (r.end == llm::FinishReason::Cancelled) {
      ASSERT_LE(r.ids.size(), want.size()) << "request " << index;
      EXPECT_TRUE(std::equal(r.ids.begin(), r.ids.end(), want.begin())) << "request " << index;
    } else {
      EXPECT_EQ(r.ids, want) << "request " << index;
      EXPECT_EQ(r.end, why) << "request " << index;
    }
  }
  for (int e = 1; e <= 4; ++e) EXPECT_GT(counts[e], 0) << "no request ended as " << llm::to_string(llm::FinishReason(e));
  EXPECT_GT(engine.scheduler().preemptions(), 0);
  EXPECT_GT(engine.scheduler().prefix_hit_tokens(), 0);
  std::printf("%lld requests in %lld steps: %lld eos, %lld length, %lld stop, %lld cancelled; %d preemptions, %d "
              "prefix-cache tokens\n", static_cast<long long>(request_count), static_cast<long long>(step),
              static_cast<long long>(counts[1]), static_cast<long long>(counts[2]), static_cast<long long>(counts[3]),
              static_cast<long long>(counts[4]), engine.scheduler().preemptions(), engine.scheduler().prefix_hit_tokens());
}

// Engine::add refuses every GenerationConfig field outside its range, NaN included, naming the
// field and the value; the boundary values are accepted.
TEST(LlmEndToEnd, EngineRefusesGenerationConfigsOutOfRange) {
  LlmProgram p("qwen3_f32", 16, /*max_tokens=*/8);
  ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
  const llm::SchedulerLimits limits = p.limits(8);
  std::vector<uint8_t> memory(llm::Engine::memory_bytes(limits, 16));
  llm::Engine engine;
  ErrorContext ctx;
  ASSERT_TRUE(engine.init(p.method->method(), limits, 16, p.vocab_size(), Span<const int32_t>(),
                          Span<uint8_t>(memory.data(), memory.size()), &ctx)
                  .is_ok())
      << ctx.message;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::function<void(llm::GenerationConfig&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](llm::GenerationConfig& c) { c.max_new_tokens = 0; }, "engine: max_new_tokens 0 must be >= 1"},
      {[](llm::GenerationConfig& c) { c.temperature = -1.0f; }, "engine: temperature -1 must be finite and >= 0"},
      {[&](llm::GenerationConfig& c) { c.temperature = nan; }, "engine: temperature nan must be finite and >= 0"},
      {[&](llm::GenerationConfig& c) { c.temperature = inf; }, "engine: temperature inf must be finite and >= 0"},
      {[](llm::GenerationConfig& c) { c.top_k = -3; }, "engine: top_k -3 must be >= 0 (0: off)"},
      {[](llm::GenerationConfig& c) { c.top_p = 0.0f; }, "engine: top_p 0 must be in (0, 1]"},
      {[](llm::GenerationConfig& c) { c.top_p = -0.5f; }, "engine: top_p -0.5 must be in (0, 1]"},
      {[](llm::GenerationConfig& c) { c.top_p = 1.5f; }, "engine: top_p 1.5 must be in (0, 1]"},
      {[&](llm::GenerationConfig& c) { c.top_p = nan; }, "engine: top_p nan must be in (0, 1]"},
      {[](llm::GenerationConfig& c) { c.repetition_penalty = 0.0f; }, "engine: repetition_penalty 0 must be finite and > 0"},
      {[&](llm::GenerationConfig& c) { c.repetition_penalty = nan; }, "engine: repetition_penalty nan must be finite"},
      {[&](llm::GenerationConfig& c) { c.repetition_penalty = inf; }, "engine: repetition_penalty inf must be finite"},
  };
  const int32_t prompt[] = {5, 9, 11};
  for (const Case& c : cases) {
    llm::GenerationConfig config;
    c.edit(config);
    ErrorContext error;
    Result<int32_t> seq = engine.add(Span<const int32_t>(prompt, 3), config, &error);
    EXPECT_EQ(seq.status().code(), Error::InvalidArgument) << c.message;
    EXPECT_EQ(std::string(error.message).rfind(c.message, 0), 0u) << error.message;
  }
  EXPECT_FALSE(engine.has_work());
  llm::GenerationConfig edge;
  edge.max_new_tokens = 1;
  edge.temperature = 0.5f;
  edge.top_k = 0;
  edge.top_p = 1.0f;
  edge.repetition_penalty = 1e-3f;
  EXPECT_TRUE(engine.add(Span<const int32_t>(prompt, 3), edge, &ctx).is_ok()) << ctx.message;
  edge.top_p = 1e-6f;
  edge.top_k = 1;
  EXPECT_TRUE(engine.add(Span<const int32_t>(prompt, 3), edge, &ctx).is_ok()) << ctx.message;
}

// A program whose final norm weights are NaN (so every logit is NaN): each sampled row's
// log-probability is not finite, and the Engine ends the request as Failed with a message naming it
// instead of emitting token 0. Greedy (the sample op's logprob is +Inf there) and sampled (NaN).
// The graph is edited after import, so this does not depend on whether the exporter refuses
// non-finite checkpoint weights.
TEST(LlmEndToEnd, NonFiniteLogitsFailTheRequestInsteadOfEmittingAToken) {
  bool edited = false;
  auto nan_norm = [&edited](exporter::Graph& g) {
    for (exporter::Value& v : g.values) {
      if (v.is_constant() && v.name == "model.norm.weight" && v.dtype == ScalarType::F32) {
        auto data = std::make_shared<std::vector<uint8_t>>(v.data->size());
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (size_t i = 0; i + 4 <= data->size(); i += 4) std::memcpy(data->data() + i, &nan, 4);
        v.data = data;
        edited = true;
      }
    }
  };
  LlmProgram p("qwen2_f32", 16, /*max_tokens=*/16, /*emit_logits=*/false, nan_norm);
  ASSERT_TRUE(edited) << "no f32 constant named model.norm.weight";
  ASSERT_TRUE(p.method->ok()) << p.method->ctx().message;
  for (const float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE(temperature);
    const llm::SchedulerLimits limits = p.limits(2);
    std::vector<uint8_t> memory(llm::Engine::memory_bytes(limits, 16));
    llm::Engine engine;
    ErrorContext ctx;
    ASSERT_TRUE(engine.init(p.method->method(), limits, 16, p.vocab_size(), Span<const int32_t>(),
                            Span<uint8_t>(memory.data(), memory.size()), &ctx)
                    .is_ok())
        << ctx.message;
    llm::GenerationConfig config;
    config.temperature = temperature;
    config.max_new_tokens = 5;
    const int32_t a[] = {5, 9, 11}, b[] = {7, 8};
    const int32_t sa = engine.add(Span<const int32_t>(a, 3), config, &ctx).value();
    const int32_t sb = engine.add(Span<const int32_t>(b, 2), config, &ctx).value();
    Result<Span<const llm::TokenEvent>> events = engine.step(&ctx);
    ASSERT_TRUE(events.is_ok()) << ctx.message;
    ASSERT_EQ(events.value().size(), 2u);
    for (const llm::TokenEvent& e : events.value()) {
      EXPECT_EQ(e.finished, llm::FinishReason::Failed);
      EXPECT_FALSE(std::isfinite(e.logprob));
    }
    EXPECT_FALSE(engine.has_work());
    EXPECT_EQ(engine.finish_reason(sa), llm::FinishReason::Failed);
    EXPECT_EQ(engine.tokens(sa).size(), 3u);  // nothing appended
    EXPECT_EQ(engine.tokens(sb).size(), 2u);
    ErrorContext why;
    EXPECT_EQ(engine.failure(sb, &why).code(), Error::InvalidProgram);
    const std::string message = why.message;
    EXPECT_EQ(message.rfind("engine: request " + std::to_string(sb) + ": generated token 0 has log-probability ", 0), 0u)
        << message;
    EXPECT_NE(message.find("the step's logits are not finite"), std::string::npos) << message;
    EXPECT_STREQ(llm::to_string(llm::FinishReason::Failed), "failed");
  }
}

// A checkpoint folder copied with its config.json edited.
std::string edited_checkpoint(const std::string& name, const std::string& key, const nlohmann::json& value) {
  const std::filesystem::path src = std::filesystem::path(EMBER_LLM_CHECKPOINTS) / name;
  const std::filesystem::path dst = std::filesystem::temp_directory_path() / ("ember_llm_" + name + "_" + key);
  std::filesystem::remove_all(dst);
  std::filesystem::copy(src, dst);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dst / "config.json"));
  config[key] = value;
  std::ofstream(dst / "config.json", std::ios::trunc) << config.dump(1);
  return dst.string();
}

std::string import_error(const std::string& dir, exporter::hf::StepOptions options = {}) {
  try {
    exporter::hf::import_step(dir, options);
  } catch (const exporter::ExportError& e) {
    return e.what();
  }
  return "";
}

TEST(LlmEndToEnd, ImportErrorsNameTheTensorOrTheValue) {
  // One layer fewer than the weights: the other layer's tensors are left over.
  std::string e = import_error(edited_checkpoint("llama_f32", "num_hidden_layers", 1));
  EXPECT_NE(e.find("tensors not used by the llama graph: model.layers.1."), std::string::npos) << e;
  // A hidden size the weights do not have.
  e = import_error(edited_checkpoint("qwen2_f32", "intermediate_size", 100));
  EXPECT_NE(e.find("mlp.gate_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("config.json implies [100,"), std::string::npos) << e;
  // Not tied: lm_head.weight is missing.
  e = import_error(edited_checkpoint("qwen2_f32", "tie_word_embeddings", false));
  EXPECT_NE(e.find("lm_head.weight"), std::string::npos) << e;
  exporter::hf::StepOptions bad;
  bad.max_seqs = 8;
  bad.max_tokens = 4;
  e = import_error(std::string(EMBER_LLM_CHECKPOINTS) + "/qwen3_f32", bad);
  EXPECT_NE(e.find("--max-tokens 4 is below --max-seqs 8"), std::string::npos) << e;
  e = import_error(std::string(EMBER_LLM_CHECKPOINTS) + "/no_such_model");
  EXPECT_NE(e.find("no_such_model"), std::string::npos) << e;
}

}  // namespace
}  // namespace ember
