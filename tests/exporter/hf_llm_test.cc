// exporter/importers/hf_llm: the safetensors reader (the generated tiny checkpoints, single and
// sharded, and hand-made hostile files), config.json parsing with RoPE inverse frequencies, and the
// step graph's outputs with and without logits (StepOptions::emit_logits, the CLI's --emit-logits).
// Hostile numbers: flags and config fields out of their bounds (overflowing ones included), an FP8
// weight_block_size of 2^63 - 1, and NaN / Inf weights (refused unless --allow-non-finite-weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporter/cli/cli.h"
#include "exporter/importers/hf_llm/config.h"
#include "exporter/importers/hf_llm/safetensors.h"
#include "exporter/importers/hf_llm/step_graph.h"
#include "runtime/program/program_file.h"
#include "schema/program_generated.h"

namespace ember::exporter::hf {
namespace {

namespace fs = std::filesystem;

std::string Checkpoints() { return EMBER_LLM_CHECKPOINTS; }

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("hf_llm_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A safetensors file with the given header JSON and `data` bytes after it.
void WriteSafetensors(const fs::path& path, const std::string& header, size_t data, int64_t length = -1) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = length >= 0 ? uint64_t(length) : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << header;
  for (size_t i = 0; i < data; ++i) out.put(static_cast<char>(i));
}

// The message of the runtime_error that fn throws ("" if none).
template <class Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsTest, ReadsTheGeneratedCheckpoints) {
  // Sharded (llama_f32: two files and an index) and single-file checkpoints.
  for (const char* name : {"llama_f32", "qwen2_bf16", "qwen3_fp8"}) {
    SCOPED_TRACE(name);
    Checkpoint ckpt = Checkpoint::open(Checkpoints() + "/" + name);
    const LlmConfig config = load_config(Checkpoints() + "/" + name);
    const SafeTensor& embed = ckpt.take("model.embed_tokens.weight");
    EXPECT_EQ(embed.shape, (std::vector<int64_t>{config.vocab_size, config.hidden_size}));
    EXPECT_EQ(int64_t(embed.nbytes), embed.numel() * (embed.dtype == ScalarType::F32 ? 4 : 2));
    const SafeTensor* q = ckpt.find("model.layers.0.self_attn.q_proj.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->shape, (std::vector<int64_t>{config.num_heads * config.head_dim, config.hidden_size}));
    EXPECT_EQ(ckpt.leftovers().size(), ckpt.size() - 1);
    EXPECT_NE(ErrorOf([&] { ckpt.take("model.embed_tokens.weight"); }).find("taken twice"), std::string::npos);
    EXPECT_NE(ErrorOf([&] { ckpt.take("no.such.tensor"); }).find("no.such.tensor"), std::string::npos);
  }
  Checkpoint fp8 = Checkpoint::open(Checkpoints() + "/qwen3_fp8");
  const SafeTensor* w = fp8.find("model.layers.0.mlp.down_proj.weight");
  const SafeTensor* s = fp8.find("model.layers.0.mlp.down_proj.weight_scale_inv");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(w->dtype, ScalarType::F8E4M3FN);
  EXPECT_EQ(s->shape, (std::vector<int64_t>{(w->shape[0] + 127) / 128, (w->shape[1] + 127) / 128}));
}

TEST(SafetensorsTest, RefusesHostileFiles) {
  const fs::path dir = TempDir("hostile");
  struct Case {
    const char* what;
    std::string header;
    size_t data;
    int64_t length;
    const char* expect;
  };
  const Case cases[] = {
      {"empty header", "", 0, 0, "not valid JSON"},
      {"length past the end", "{}", 0, 1000, "exceeds the file"},
      {"not JSON", "{\"a\":", 0, -1, "not valid JSON"},
      {"not an object", "[1,2]", 0, -1, "not a JSON object"},
      {"fields", R"({"t":{"dtype":"F32","shape":[1]}})", 4, -1, "needs dtype"},
      {"dtype", R"({"t":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", 16, -1, "unsupported dtype F128"},
      {"negative dim", R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, -1, "not a dimension"},
      {"offsets past data", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, -1, "outside the 4"},
      {"reversed offsets", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4, -1, "outside"},
      {"byte count", R"({"t":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4, -1, "needs 6"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, -1, "overlap"},
      {"metadata", R"({"__metadata__":{"format":1}})", 0, -1, "not a string"},
  };
  for (const Case& c : cases) {
    const fs::path path = dir / "model.safetensors";
    WriteSafetensors(path, c.header, c.data, c.length);
    const std::string error = ErrorOf([&] { SafetensorsFile::open(path.string()); });
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.what << ": " << error;
    EXPECT_NE(error.find(path.string()), std::string::npos) << c.what << ": the message names the file";
  }
  {
    std::ofstream(dir / "model.safetensors", std::ios::binary) << "abc";
    const std::string error = ErrorOf([&] { SafetensorsFile::open((dir / "model.safetensors").string()); });
    EXPECT_NE(error.find("shorter than the 8-byte header length"), std::string::npos) << error;
  }
  // A good file reads.
  WriteSafetensors(dir / "model.safetensors",
                   R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F8_E4M3","shape":[2,3],"data_offsets":[0,6]}})", 6);
  Checkpoint ok = Checkpoint::open(dir.string());
  EXPECT_EQ(ok.take("w").nbytes, 6u);
  EXPECT_TRUE(ok.leftovers().empty());
  EXPECT_NE(ErrorOf([&] { Checkpoint::open(TempDir("empty").string()); }).find("neither model.safetensors"),
            std::string::npos);
}

TEST(SafetensorsTest, RefusesInconsistentShardIndex) {
  const fs::path dir = TempDir("shards");
  WriteSafetensors(dir / "a.safetensors",
                   R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  auto index = [&](const std::string& map) {
    std::ofstream(dir / "model.safetensors.index.json") << R"({"metadata":{},"weight_map":)" << map << "}";
  };
  index(R"({"x":"a.safetensors","y":"a.safetensors"})");
  EXPECT_EQ(Checkpoint::open(dir.string()).size(), 2u);
  index(R"({"x":"a.safetensors"})");
  EXPECT_NE(ErrorOf([&] { Checkpoint::open(dir.string()); }).find("'y' of a.safetensors is not mapped"),
            std::string::npos);
  index(R"({"x":"a.safetensors","y":"a.safetensors","z":"a.safetensors"})");
  EXPECT_NE(ErrorOf([&] { Checkpoint::open(dir.string()); }).find("'z' is not in a.safetensors"), std::string::npos);
  index(R"({"x":"../a.safetensors"})");
  EXPECT_NE(ErrorOf([&] { Checkpoint::open(dir.string()); }).find("names '../a.safetensors' leaves the model's folder"),
            std::string::npos);
  index(R"({"x":"b.safetensors"})");
  EXPECT_NE(ErrorOf([&] { Checkpoint::open(dir.string()); }).find("names 'b.safetensors': '" + (dir / "b.safetensors").string() +
                                                                    "' does not exist"),
            std::string::npos);
}

TEST(LlmConfigTest, ReadsTheThreeFamilies) {
  const LlmConfig llama = load_config(Checkpoints() + "/llama_f32");
  EXPECT_EQ(llama.family, Family::Llama);
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_FALSE(llama.attention_bias);
  EXPECT_EQ(llama.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(llama.num_kv_heads, 2);
  EXPECT_FALSE(llama.eos_token_ids.empty());
  const LlmConfig qwen2 = load_config(Checkpoints() + "/qwen2_bf16");
  EXPECT_EQ(qwen2.family, Family::Qwen2);
  EXPECT_TRUE(qwen2.attention_bias);
  EXPECT_TRUE(qwen2.tie_word_embeddings);
  EXPECT_EQ(qwen2.torch_dtype, "bfloat16");
  EXPECT_EQ(qwen2.eos_token_ids.size(), 2u);  // generation_config.json's list wins over config.json's id
  EXPECT_EQ(qwen2.top_k, 20);
  const LlmConfig qwen3 = load_config(Checkpoints() + "/qwen3_fp8");
  EXPECT_EQ(qwen3.family, Family::Qwen3);
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_TRUE(qwen3.fp8);
  EXPECT_EQ(qwen3.fp8_block_n, 128);
  EXPECT_EQ(qwen3.fp8_block_k, 128);
  const LlmConfig mistral = load_config(Checkpoints() + "/mistral_f32");
  EXPECT_EQ(mistral.family, Family::Mistral);
  EXPECT_EQ(mistral.sliding_window, 8);
  EXPECT_EQ(llama.sliding_window, 0);
  EXPECT_EQ(qwen2.sliding_window, 0);  // the field is null there, and use_sliding_window false
  const LlmConfig qwen3_f32 = load_config(Checkpoints() + "/qwen3_f32");
  EXPECT_EQ(qwen3_f32.head_dim, 64);  // explicit head_dim != hidden / heads
  EXPECT_NE(qwen3_f32.head_dim * qwen3_f32.num_heads, qwen3_f32.hidden_size);
}

// The llama3 rule in double from its definition (transformers' _compute_llama3_parameters).
std::vector<double> Llama3InvFreq(const LlmConfig& c) {
  std::vector<double> out;
  const RopeScaling& r = c.rope_scaling;
  const double old_len = double(r.original_max_position_embeddings);
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    const double f = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(c.head_dim));
    const double wavelen = 2 * M_PI / f;
    if (wavelen < old_len / r.high_freq_factor) {
      out.push_back(f);
    } else if (wavelen > old_len / r.low_freq_factor) {
      out.push_back(f / r.factor);
    } else {
      const double smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      out.push_back((1 - smooth) * f / r.factor + smooth * f);
    }
  }
  return out;
}

TEST(LlmConfigTest, RopeInverseFrequencies) {
  const LlmConfig llama = load_config(Checkpoints() + "/llama_f32");
  const std::vector<float> inv = rope_inv_freq(llama);
  const std::vector<double> expected = Llama3InvFreq(llama);
  ASSERT_EQ(inv.size(), expected.size());
  int kept = 0, divided = 0, smoothed = 0;
  for (size_t i = 0; i < inv.size(); ++i) {
    EXPECT_NEAR(inv[i], expected[i], 4e-7 * expected[i]) << i;
    const double plain = 1.0 / std::pow(llama.rope_theta, double(2 * i) / double(llama.head_dim));
    if (std::fabs(expected[i] - plain) < 1e-12 * plain) ++kept;
    else if (std::fabs(expected[i] - plain / llama.rope_scaling.factor) < 1e-12 * plain) ++divided;
    else ++smoothed;
  }
  // The tiny checkpoint's original context (64) puts its 16 frequencies in all three regimes.
  EXPECT_EQ(kept, 2);
  EXPECT_EQ(smoothed, 1);
  EXPECT_EQ(divided, 13);
  LlmConfig plain = llama;
  plain.rope_scaling = RopeScaling{};
  const std::vector<float> base = rope_inv_freq(plain);
  EXPECT_EQ(base[0], 1.0f);
  EXPECT_NEAR(base[1], 1.0 / std::pow(500000.0, 2.0 / 32.0), 1e-7);
}

TEST(LlmConfigTest, RefusesWhatItCannotImport) {
  const fs::path dir = TempDir("config");
  auto write = [&](const std::string& body) { std::ofstream(dir / "config.json") << body; };
  const std::string base =
      R"("vocab_size":100,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":256)";
  struct Case {
    std::string body;
    const char* expect;
  };
  const Case cases[] = {
      {"{" + base + R"(,"model_type":"gpt2"})", "model_type 'gpt2' is not supported"},
      {"{" + base + R"(,"model_type":"llama","rope_scaling":{"rope_type":"yarn","factor":4}})", "'yarn' is not supported"},
      {"{" + base + R"(,"model_type":"llama","hidden_act":"gelu"})", "hidden_act 'gelu'"},
      {"{" + base + R"(,"model_type":"llama","partial_rotary_factor":0.5})", "partial_rotary_factor"},
      {"{" + base + R"(,"model_type":"qwen3","quantization_config":{"quant_method":"gptq"}})", "'gptq' is not supported"},
      {R"({"model_type":"llama","vocab_size":100})", "hidden_size is missing"},
      {"{" + base + R"(,"model_type":"llama","num_key_value_heads":3})", "not a multiple of num_key_value_heads"},
      {"{" + base + R"(,"model_type":"llama","eos_token_id":1000})", "eos token id 1000 outside"},
      {"{" + base + R"(,"model_type":"llama","head_dim":33})", "head_dim = 33 is odd"},
      {"{", "not valid JSON"},
      // Issue 17: what a family's graph does not build is refused by name, never ignored.
      {"{" + base + R"(,"model_type":"llama","sliding_window":4096})",
       "sliding_window = 4096 on a llama config: Ember's llama has no sliding window"},
      {"{" + base + R"(,"model_type":"qwen2","use_sliding_window":true,"sliding_window":64})",
       "use_sliding_window = true is not supported for qwen2"},
      {"{" + base + R"(,"model_type":"mistral","attn_logit_softcapping":50.0})",
       "attn_logit_softcapping is set, which Ember does not implement for mistral"},
      {"{" + base + R"(,"model_type":"llama","final_logit_softcapping":30.0})", "final_logit_softcapping is set"},
      {"{" + base + R"(,"model_type":"mistral","sliding_window":16,"layer_types":["sliding_attention","full_attention"]})",
       "layer_types[1] = \"full_attention\": every layer must be 'sliding_attention'"},
      {"{" + base + R"(,"model_type":"mistral","sliding_window":0})", "sliding_window"},
  };
  for (const Case& c : cases) {
    write(c.body);
    const std::string error = ErrorOf([&] { load_config(dir.string()); });
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.body << " -> " << error;
  }
}

std::vector<std::string> OutputNames(const Graph& graph) {
  std::vector<std::string> names;
  for (const NamedValue& o : graph.outputs) names.push_back(o.name);
  return names;
}

// Without emit_logits the lm_head's output feeds only `sample`; with it, it is also the third
// output, `logits` [S, vocab] f32.
// --no-logprobs (StepOptions::emit_logprobs = false): next_ids is the only output; `sample` still
// computes its logprobs, they just do not leave the graph.
TEST(StepGraphTest, EmitLogprobsTogglesTheLogprobsOutput) {
  StepOptions options;
  options.max_seqs = 2;
  options.max_tokens = 8;
  options.max_context = 32;
  options.block_size = 4;
  EXPECT_TRUE(options.emit_logprobs);  // the default
  for (bool logits : {false, true}) {
    SCOPED_TRACE(logits ? "emit_logits" : "default");
    options.emit_logits = logits;
    options.emit_logprobs = false;
    const StepImport imported = import_step(Checkpoints() + "/qwen2_f32", options);
    std::vector<std::string> expected = {"next_ids"};
    if (logits) expected.push_back("logits");
    EXPECT_EQ(OutputNames(imported.graph), expected);
    EXPECT_NE(imported.summary.find(logits ? "outputs next_ids, logits\n" : "outputs next_ids\n"), std::string::npos)
        << imported.summary;
  }
}

TEST(StepGraphTest, EmitLogitsTogglesTheLogitsOutput) {
  for (const char* name : {"llama_f32", "qwen3_fp8"}) {
    SCOPED_TRACE(name);
    StepOptions options;
    options.max_seqs = 2;
    options.max_tokens = 8;
    options.max_context = 32;
    options.block_size = 4;
    EXPECT_FALSE(options.emit_logits);  // the default
    for (bool emit : {false, true}) {
      SCOPED_TRACE(emit ? "emit_logits" : "default");
      options.emit_logits = emit;
      const StepImport imported = import_step(Checkpoints() + "/" + name, options);
      const Graph& g = imported.graph;
      std::vector<std::string> expected = {"next_ids", "logprobs"};
      if (emit) expected.push_back("logits");
      EXPECT_EQ(OutputNames(g), expected);
      const Node* head = nullptr;
      const Node* sample = nullptr;
      for (const Node& n : g.nodes) {
        if (n.name == "lm_head") head = &n;
        if (n.op == OpCode::Sample) sample = &n;
      }
      ASSERT_NE(head, nullptr);
      ASSERT_NE(sample, nullptr);
      EXPECT_EQ(sample->inputs.at(0), head->outputs.at(0));  // sample still reads the lm_head
      EXPECT_EQ(g.is_output(head->outputs.at(0)), emit);
      if (emit) {
        const Value& logits = g.values[size_t(g.outputs[2].value)];
        EXPECT_EQ(g.outputs[2].value, head->outputs.at(0));
        EXPECT_EQ(logits.dtype, ScalarType::F32);
        ASSERT_EQ(logits.dims.size(), 2u);
        EXPECT_EQ(logits.dims[0].max, 2);
        EXPECT_EQ(logits.dims[1].max, imported.config.vocab_size);
      }
      EXPECT_NE(imported.summary.find(emit ? "outputs next_ids, logprobs, logits\n" : "outputs next_ids, logprobs\n"),
                std::string::npos)
          << imported.summary;
    }
  }
}

// The output names of the `step` method in a .pte file.
std::vector<std::string> StepOutputs(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FileHeader header;
  ErrorContext ctx;
  EXPECT_TRUE(decode_header(file.data(), file.size(), file.size(), true, &header, &ctx).is_ok()) << ctx.message;
  if (header.flatbuffer_offset + header.flatbuffer_size > file.size()) return {};
  const uint8_t* bytes = file.data() + header.flatbuffer_offset;
  flatbuffers::Verifier verifier(bytes, header.flatbuffer_size);
  EXPECT_TRUE(fb::VerifyProgramBuffer(verifier));
  std::vector<std::string> names;
  for (const fb::Method* m : *fb::GetProgram(bytes)->methods()) {
    if (m->name()->str() != "step") continue;
    for (const fb::NamedValue* o : *m->graph()->outputs()) names.push_back(o->name()->str());
  }
  return names;
}

TEST(StepGraphTest, CliEmitLogitsFlagAddsTheLogitsOutput) {
  const fs::path dir = TempDir("cli");
  auto run = [](std::vector<std::string> args, std::string* err) {
    args.insert(args.begin(), "exporter");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    std::ostringstream out, error;
    const int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, error);
    *err = error.str();
    return code;
  };
  const std::vector<std::string> common = {Checkpoints() + "/qwen2_bf16", "--max-seqs", "2", "--max-tokens", "8",
                                           "--max-context", "32", "--backends", "portable"};
  std::string err;
  std::vector<std::string> args = common;
  args.insert(args.end(), {"-o", (dir / "plain.pte").string()});
  ASSERT_EQ(run(args, &err), 0) << err;
  EXPECT_EQ(StepOutputs(dir / "plain.pte"), (std::vector<std::string>{"next_ids", "logprobs"}));
  args = common;
  args.insert(args.end(), {"-o", (dir / "logits.pte").string(), "--emit-logits"});
  ASSERT_EQ(run(args, &err), 0) << err;
  EXPECT_EQ(StepOutputs(dir / "logits.pte"), (std::vector<std::string>{"next_ids", "logprobs", "logits"}));
  // The flag is for checkpoint folders only.
  EXPECT_EQ(run({"--example", "mlp", "-o", (dir / "mlp.pte").string(), "--emit-logits"}, &err), 1);
  EXPECT_NE(err.find("--emit-logits applies to Hugging Face checkpoint folders only"), std::string::npos) << err;
  // --help describes it.
  std::ostringstream help, none;
  const char* help_argv[] = {"exporter", "--help"};
  ASSERT_EQ(run_cli(2, help_argv, help, none), 0);
  EXPECT_NE(help.str().find("--emit-logits"), std::string::npos);
}


// run_cli in-process: the exit code, stdout and stderr.
struct Cli {
  int code = 0;
  std::string out, err;
};
Cli RunCli(std::vector<std::string> args) {
  args.insert(args.begin(), "exporter");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Cli r;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// A copy of a generated checkpoint folder to edit.
fs::path CopyCheckpoint(const std::string& name, const std::string& as) {
  const fs::path dir = TempDir(as);
  fs::copy(Checkpoints() + "/" + name, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return dir;
}

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Overwrites element `index` of tensor `name` in a single-file checkpoint with `bits` (the raw
// element, 2 or 4 bytes little-endian as the tensor's dtype has).
void PoisonElement(const fs::path& file, const std::string& name, size_t index, uint32_t bits) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= uint64_t(uint8_t(f.get())) << (8 * i);
  std::string text(header, '\0');
  f.read(text.data(), std::streamsize(header));
  const nlohmann::json j = nlohmann::json::parse(text);
  const size_t size = j.at(name).at("dtype") == "F32" ? 4 : 2;
  const uint64_t begin = j.at(name).at("data_offsets")[0].get<uint64_t>();
  f.seekp(std::streamoff(8 + header + begin + index * size));
  for (size_t i = 0; i < size; ++i) f.put(char(bits >> (8 * i)));
  ASSERT_TRUE(f.good());
}

// Every bound of StepOptions fails naming the flag and the value, before any size is derived from
// it (2^63 - 1 used to wrap max_context's rounding and max_seqs x max_blocks).
TEST(StepGraphTest, OptionsOutsideTheirBoundsFailNamingTheFlag) {
  struct Case {
    StepOptions options;
    const char* expect;
  };
  auto with = [](auto set) {
    StepOptions o;
    o.max_seqs = 2;
    o.max_tokens = 8;
    o.max_context = 32;
    o.block_size = 4;
    set(o);
    return o;
  };
  const Case cases[] = {
      {with([](StepOptions& o) { o.max_context = INT64_MAX; }), "hf_llm: --max-context 9223372036854775807: above the limit 1048576"},
      {with([](StepOptions& o) { o.block_size = INT64_MAX; }), "hf_llm: --block-size 9223372036854775807: above the limit 65536"},
      {with([](StepOptions& o) { o.max_seqs = int64_t{1} << 62; }), "hf_llm: --max-seqs 4611686018427387904: above the limit 65536"},
      {with([](StepOptions& o) { o.max_tokens = INT64_MAX; }), "hf_llm: --max-tokens 9223372036854775807: above the limit 1048576"},
      {with([](StepOptions& o) { o.max_seqs = 0; }), "hf_llm: --max-seqs 0: below the minimum 1"},
      {with([](StepOptions& o) { o.block_size = -16; }), "hf_llm: --block-size -16: below the minimum 1"},
      {with([](StepOptions& o) { o.max_context = -1; }), "hf_llm: --max-context -1: below the minimum 1"},
      {with([](StepOptions& o) { o.max_seqs = 16; }), "hf_llm: --max-tokens 8 is below --max-seqs 16"},
      {with([](StepOptions& o) { o.kv_scale = std::nanf(""); }), "hf_llm: --kv-scale nan: must be finite and > 0"},
      {with([](StepOptions& o) { o.kv_scale = 0; }), "hf_llm: --kv-scale 0: must be finite and > 0"},
      // Both within their bounds, but 65536 x 2^20 KV slots do not fit the i32 slot_mapping.
      {with([](StepOptions& o) {
         o.max_seqs = kMaxStepSeqs;
         o.max_tokens = kMaxStepSeqs;
         o.max_context = kMaxStepContext;
       }),
       "hf_llm: --max-seqs 65536 x --max-context 1048576 = 68719476736 KV slots exceeds the int32 slot_mapping"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorOf([&] { import_step(Checkpoints() + "/qwen2_f32", c.options); });
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.expect << " -> " << error;
  }
  // Within the bounds: the KV cache bytes at the largest num_blocks (8 x 16384 / 16 = 8192 blocks
  // of 16 tokens x 2 kv heads x head_dim 32 x f32, for K and V of 2 layers).
  StepOptions fits = with([](StepOptions& o) {
    o.max_seqs = 8;
    o.max_context = 16384;
    o.block_size = 16;
  });
  const StepImport imported = import_step(Checkpoints() + "/qwen2_f32", fits);
  EXPECT_EQ(imported.max_num_blocks, 8 * 16384 / 16);
  EXPECT_EQ(imported.kv_cache_bytes, uint64_t(8192) * 16 * 2 * 32 * 4 * 2 * 2);
}

// The CLI parses numbers strictly: garbage, signs, overflow and out-of-bounds values are one error
// line naming the flag and the text, exit code 1, no file written.
TEST(StepGraphTest, CliNumericFlagsAreStrict) {
  const fs::path dir = TempDir("strict_flags");
  const std::string out = (dir / "out.pte").string();
  struct Case {
    std::vector<std::string> flags;
    const char* expect;
  };
  const Case cases[] = {
      {{"--max-context", "9223372036854775807"}, "exporter: error: --max-context 9223372036854775807: above the limit 1048576"},
      {{"--block-size", "9223372036854775807"}, "exporter: error: --block-size 9223372036854775807: above the limit 65536"},
      {{"--max-seqs", "4611686018427387904"}, "exporter: error: --max-seqs 4611686018427387904: above the limit 65536"},
      {{"--max-seqs", "99999999999999999999"}, "exporter: error: --max-seqs 99999999999999999999: above the limit 65536"},
      {{"--max-tokens", "-99999999999999999999"}, "exporter: error: --max-tokens -99999999999999999999: below the minimum 1"},
      {{"--max-seqs", "12abc"}, "exporter: error: --max-seqs '12abc': not an integer (expected 1 to 65536)"},
      {{"--max-seqs", "-1"}, "exporter: error: --max-seqs -1: below the minimum 1"},
      {{"--max-seqs", "+4"}, "exporter: error: --max-seqs '+4': not an integer"},
      {{"--max-tokens", "1e3"}, "exporter: error: --max-tokens '1e3': not an integer"},
      {{"--max-context", "0"}, "exporter: error: --max-context 0: below the minimum 1"},
      {{"--max-context", ""}, "exporter: error: --max-context '': not an integer"},
      {{"--block-size", ""}, "exporter: error: --block-size '': not an integer"},
      {{"--kv-scale", "nan"}, "exporter: error: --kv-scale nan: must be a finite number > 0"},
      {{"--kv-scale", "1e999"}, "exporter: error: --kv-scale 1e999: must be a finite number > 0"},
      {{"--kv-scale", "-2"}, "exporter: error: --kv-scale -2: must be a finite number > 0"},
      {{"--kv-scale", "0.5x"}, "exporter: error: --kv-scale '0.5x': not a number"},
      {{"--max-seqs", "65536", "--max-tokens", "65536", "--max-context", "1048576"},
       "exporter: error: hf_llm: --max-seqs 65536 x --max-context 1048576 = 68719476736 KV slots exceeds the int32"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {Checkpoints() + "/qwen2_f32", "-o", out, "--backends", "portable"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const Cli r = RunCli(args);
    EXPECT_EQ(r.code, 1) << c.expect;
    EXPECT_EQ(r.err.rfind(c.expect, 0), 0u) << c.expect << " -> " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.expect;
  }
}

TEST(LlmConfigTest, RefusesOutOfRangeFields) {
  const fs::path dir = TempDir("config_ranges");
  const std::string base =
      R"("model_type":"llama","vocab_size":100,"intermediate_size":128,"num_hidden_layers":2,)"
      R"("max_position_embeddings":256)";
  const std::string heads = R"(,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2)";
  struct Case {
    std::string config, generation;
    const char* expect;
  };
  const Case cases[] = {
      {base + R"(,"hidden_size":1099511627776,"num_attention_heads":4)", "",
       "config.json: hidden_size = 1099511627776 outside [1, 2147483647]"},
      {base + heads + R"(,"vocab_size":18446744073709551615)", "", "vocab_size = 18446744073709551615 outside [1, 2147483647]"},
      {base + heads + R"(,"vocab_size":-5)", "", "vocab_size = -5 outside [1, 2147483647]"},
      {base + heads + R"(,"num_hidden_layers":0)", "", "num_hidden_layers = 0 outside [1, 4096]"},
      {base + heads + R"(,"intermediate_size":"128")", "", "intermediate_size = \"128\": expected an integer, got string"},
      {base + R"(,"hidden_size":66,"num_attention_heads":4)", "",
       "hidden_size = 66 is not a multiple of num_attention_heads = 4"},
      // No head_dim field: hidden / heads would be a 2^20-wide head (and a 2 MiB RoPE table per ...).
      {base + R"(,"hidden_size":1048576,"num_attention_heads":1)", "",
       "head_dim = hidden_size / num_attention_heads = 1048576 outside [2, 4096]"},
      {base + heads + R"(,"num_key_value_heads":0)", "", "num_key_value_heads = 0 outside [1, 4]"},
      {base + heads + R"(,"rms_norm_eps":0)", "", "rms_norm_eps = 0 outside (0, 1]"},
      {base + heads + R"(,"rms_norm_eps":-1e-6)", "", "rms_norm_eps = -1e-06 outside (0, 1]"},
      {base + heads + R"(,"rms_norm_eps":1e-60)", "", "rms_norm_eps = 1e-60 outside (0, 1] (it is used as an f32)"},
      {base + heads + R"(,"rope_theta":1e300)", "", "rope_theta = 1e+300 must be > 1 and finite as an f32"},
      {base + heads + R"(,"rope_scaling":{"rope_type":"llama3","factor":1e300,"low_freq_factor":1,"high_freq_factor":4,)"
                      R"("original_max_position_embeddings":64})",
       "", "rope_scaling"},
      {base + heads + R"(,"bos_token_id":100)", "", "bos token id 100 outside the vocabulary"},
      {base + heads + R"(,"quantization_config":{"quant_method":"fp8","weight_block_size":[9223372036854775807,128]})", "",
       "quantization_config.weight_block_size[0] = 9223372036854775807 outside [1, 65536]"},
      {base + heads + R"(,"quantization_config":{"quant_method":"fp8","weight_block_size":[128,0]})", "",
       "quantization_config.weight_block_size[1] = 0 outside [1, 65536]"},
      {base + heads + R"(,"quantization_config":{"quant_method":"fp8","weight_block_size":[128,"128"]})", "",
       "quantization_config.weight_block_size[1] = \"128\" is not an integer"},
      {base + heads, R"({"temperature":-1})", "generation_config.json: temperature = -1 must be >= 0"},
      {base + heads, R"({"top_p":0})", "generation_config.json: top_p = 0 outside (0, 1]"},
      {base + heads, R"({"top_k":-3})", "generation_config.json: top_k = -3 outside [0, 2147483647]"},
      {base + heads, R"({"top_k":4294967296})", "generation_config.json: top_k = 4294967296 outside [0, 2147483647]"},
      {base + heads, R"({"repetition_penalty":0})", "generation_config.json: repetition_penalty = 0 must be > 0"},
  };
  for (const Case& c : cases) {
    std::ofstream(dir / "config.json") << "{" << c.config << "}";
    if (c.generation.empty()) {
      fs::remove(dir / "generation_config.json");
    } else {
      std::ofstream(dir / "generation_config.json") << c.generation;
    }
    const std::string error = ErrorOf([&] { load_config(dir.string()); });
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.config << " " << c.generation << " -> " << error;
  }
  // The same fields at sane values load.
  std::ofstream(dir / "config.json") << "{" << base << heads << R"(,"rms_norm_eps":1e-5,"bos_token_id":99})";
  std::ofstream(dir / "generation_config.json") << R"({"temperature":0.7,"top_p":0.9,"top_k":40})";
  const LlmConfig c = load_config(dir.string());
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.top_k, 40);
  EXPECT_EQ(c.bos_token_id, 99);
}

// An FP8 checkpoint whose weight_block_size is 2^63 - 1 (UBSan: signed overflow in the scale dims'
// (n + bn - 1) / bn) fails naming the field, from the CLI too.
TEST(StepGraphTest, Fp8WeightBlockSizeOverflowFailsNamingTheField) {
  const fs::path dir = CopyCheckpoint("qwen3_fp8", "fp8_block");
  nlohmann::json config = ReadJson(dir / "config.json");
  for (int entry : {0, 1}) {
    nlohmann::json edited = config;
    edited["quantization_config"]["weight_block_size"][entry] = INT64_MAX;
    std::ofstream(dir / "config.json") << edited.dump();
    const Cli r = RunCli({dir.string(), "-o", (dir / "out.pte").string(), "--backends", "portable"});
    EXPECT_EQ(r.code, 1);
    const std::string expect = "config.json: quantization_config.weight_block_size[" + std::to_string(entry) +
                               "] = 9223372036854775807 outside [1, 65536]";
    EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// A NaN norm weight used to export, and the program then generated token 0 at every step. Now the
// export fails naming the tensor, the count and the first index; --allow-non-finite-weights exports
// it with a warning. f32 (norm, as stored) and bf16 (a linear kept in bf16) checkpoints.
TEST(StepGraphTest, NonFiniteWeightsRefusedUnlessAllowed) {
  struct Case {
    const char* checkpoint;
    const char* tensor;
    size_t index;
    uint32_t bits;
    const char* expect;
  };
  const Case cases[] = {
      {"qwen2_f32", "model.norm.weight", 5, 0x7fc00000u,
       "'model.norm.weight' f32[128]: 1 of 128 non-finite, first at index 5 (nan)"},
      {"qwen2_bf16", "model.layers.1.mlp.down_proj.weight", 300, 0xff80u,
       "'model.layers.1.mlp.down_proj.weight' bf16[128, 256]: 1 of 32768 non-finite, first at index 300 (-inf)"},
      {"qwen2_bf16", "model.layers.0.input_layernorm.weight", 0, 0x7f80u,
       "'model.layers.0.input_layernorm.weight' f32[128]: 1 of 128 non-finite, first at index 0 (inf)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    const fs::path dir = CopyCheckpoint(c.checkpoint, "nan_weights");
    PoisonElement(dir / "model.safetensors", c.tensor, c.index, c.bits);
    const fs::path out = dir / "out.pte";
    const std::vector<std::string> args = {dir.string(), "-o", out.string(), "--backends", "portable",
                                           "--max-seqs", "2", "--max-tokens", "8", "--max-context", "32"};
    Cli r = RunCli(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, std::string("exporter: error: non-finite weights in the model: ") + c.expect +
                         " (pass --allow-non-finite-weights to export them anyway)\n");
    EXPECT_FALSE(fs::exists(out));
    std::vector<std::string> allowed = args;
    allowed.push_back("--allow-non-finite-weights");
    r = RunCli(allowed);
    ASSERT_EQ(r.code, 0) << r.err;
    // (A build without capabilities.json adds its own warning line.)
    EXPECT_NE(r.err.find(std::string("exporter: warning: exporting non-finite weights (--allow-non-finite-weights): ") +
                         c.expect + "\n"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(fs::exists(out));
  }
}

}  // namespace
}  // namespace ember::exporter::hf
