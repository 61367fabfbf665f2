// The exporter's parser fuzz entry points (fuzz_exporter.h) in the default suite: seeds are accepted,
// every file under regressions/<harness>/ (curated seeds and crash reproducers) is replayed with the
// outcome it must have, and a few thousand deterministic mutations of the seeds run through each
// entry point (under the ASan build that is where a regression shows). Also writes the libFuzzer
// seed corpus to <build>/tests/fuzz/corpus-exporter/<harness>/: ONNX models built here with the protobuf
// classes, the curated seeds, and tests/data/llm's tokenizer files.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "exporter/importers/onnx/model_proto.h"
#include "tests/exporter/onnx_test_util.h"
#include "tests/fuzz/fuzz_exporter.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using exporter::testing::attr_i;
using exporter::testing::attr_ints;
using exporter::testing::attr_t;
using exporter::testing::const_i64;
using exporter::testing::OnnxModel;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
using Bytes = std::string;
using Entry = int (*)(const uint8_t*, size_t);

int RunInput(Entry entry, const Bytes& input) {
  return entry(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

Bytes ReadFile(const fs::path& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  Bytes out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
  std::fclose(f);
  return out;
}

std::vector<fs::path> FilesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const fs::path kRegressions = EMBER_FUZZ_REGRESSIONS_DIR;
const fs::path kSource = fs::path(EMBER_FUZZ_REGRESSIONS_DIR).parent_path().parent_path().parent_path();

// ---- ONNX seeds, built with the protobuf classes ------------------------------------------------

Bytes MlpModel() {
  OnnxModel m(17);
  m.input("x", kFloat, {"2", "4"});
  m.init_f32("w", {3, 4}, exporter::testing::ramp(12));
  m.init_f32("b", {3}, {0.5f, -0.5f, 0.25f}, /*raw=*/false);
  onnx::NodeProto& gemm = m.node("Gemm", {"x", "w", "b"}, {"h"});
  attr_i(gemm, "transB", 1);
  m.node("Relu", {"h"}, {"y"});
  m.output("y");
  return m.bytes();
}

Bytes ConvModel() {
  OnnxModel m(13);
  m.input("x", kFloat, {"1", "2", "6", "6"});
  m.init_f32("w", {4, 2, 3, 3}, exporter::testing::ramp(72));
  onnx::NodeProto& conv = m.node("Conv", {"x", "w"}, {"c"});
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_ints(conv, "kernel_shape", {3, 3});
  m.init_f32("scale", {4}, {1, 2, 3, 4});
  m.init_f32("bias", {4}, {0, 0, 0, 0});
  m.init_f32("mean", {4}, {0.1f, 0.2f, 0.3f, 0.4f});
  m.init_f32("var", {4}, {1, 1, 1, 1});
  m.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"});
  m.node("Relu", {"n"}, {"r"});
  onnx::NodeProto& pool = m.node("MaxPool", {"r"}, {"p"});
  attr_ints(pool, "kernel_shape", {2, 2});
  attr_ints(pool, "strides", {2, 2});
  m.node("GlobalAveragePool", {"p"}, {"g"});
  onnx::NodeProto& flat = m.node("Flatten", {"g"}, {"y"});
  attr_i(flat, "axis", 1);
  m.output("y");
  return m.bytes();
}

// Shape arithmetic evaluated at export, ConstantOfShape, Range, Expand, Slice, Concat, Transpose.
Bytes ShapeModel() {
  OnnxModel m(13);
  m.input("x", kFloat, {"2", "3", "4"});
  m.node("Shape", {"x"}, {"s"});
  const_i64(m, "idx", {0}, /*scalar=*/true);
  m.node("Gather", {"s", "idx"}, {"b"});
  const_i64(m, "axes0", {0});
  m.node("Unsqueeze", {"b", "axes0"}, {"b1"});
  const_i64(m, "minus1", {-1});
  onnx::NodeProto& cat = m.node("Concat", {"b1", "minus1"}, {"target"});
  attr_i(cat, "axis", 0);
  m.node("Reshape", {"x", "target"}, {"flat"});
  const_i64(m, "shape12", {1, 12});
  onnx::NodeProto& cos = m.node("ConstantOfShape", {"shape12"}, {"ones"});
  onnx::TensorProto* one = attr_t(cos, "value");
  one->set_data_type(onnx::TensorProto::FLOAT);
  one->add_dims(1);
  one->add_float_data(1.0f);
  m.node("Add", {"flat", "ones"}, {"sum"});
  const_i64(m, "start", {0}, true);
  const_i64(m, "limit", {12}, true);
  const_i64(m, "delta", {1}, true);
  m.node("Range", {"start", "limit", "delta"}, {"r"});
  onnx::NodeProto& cast = m.node("Cast", {"r"}, {"rf"});
  attr_i(cast, "to", onnx::TensorProto::FLOAT);
  m.node("Mul", {"sum", "rf"}, {"prod"});
  const_i64(m, "sl_start", {0});
  const_i64(m, "sl_end", {6});
  const_i64(m, "sl_axes", {1});
  m.node("Slice", {"prod", "sl_start", "sl_end", "sl_axes"}, {"half"});
  onnx::NodeProto& tr = m.node("Transpose", {"half"}, {"y"});
  attr_ints(tr, "perm", {1, 0});
  m.output("y");
  return m.bytes();
}

// A model-local function (what dynamo exports write) and an initializer in external data
// (fuzz_exporter.h: the scratch folder holds weights.bin).
Bytes FunctionModel() {
  OnnxModel m(17);
  onnx::OperatorSetIdProto* local = m.proto().add_opset_import();
  local->set_domain("local");
  local->set_version(1);
  onnx::FunctionProto* f = m.proto().add_functions();
  f->set_name("AddRelu");
  f->set_domain("local");
  f->add_input("a");
  f->add_input("b");
  f->add_output("c");
  onnx::OperatorSetIdProto* fo = f->add_opset_import();
  fo->set_domain("");
  fo->set_version(17);
  onnx::NodeProto* add = f->add_node();
  add->set_op_type("Add");
  add->add_input("a");
  add->add_input("b");
  add->add_output("t");
  onnx::NodeProto* relu = f->add_node();
  relu->set_op_type("Relu");
  relu->add_input("t");
  relu->add_output("c");
  m.input("x", kFloat, {"4", "4"});
  onnx::TensorProto* w = m.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  auto* len = w->add_external_data();
  len->set_key("length");
  len->set_value("64");
  onnx::NodeProto& call = m.node("AddRelu", {"x", "w"}, {"y"});
  call.set_domain("local");
  m.output("y");
  return m.bytes();
}

// An If whose branch graphs nest `depth` deep (refused: If is not supported; deep ones also by the
// parser's recursion limit).
Bytes NestedIfModel(int depth) {
  onnx::GraphProto inner;
  inner.set_name("leaf");
  for (int i = 0; i < depth; ++i) {
    onnx::GraphProto outer;
    outer.set_name("level" + std::to_string(i));
    onnx::NodeProto* node = outer.add_node();
    node->set_op_type("If");
    node->add_input("cond");
    node->add_output("out");
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->Swap(&inner);  // not a copy: building 10,000 levels stays linear
    inner.Swap(&outer);
  }
  OnnxModel m(17);
  m.input("cond", onnx::TensorProto::BOOL, {"1"});
  *m.graph().add_node() = inner.node(0);
  m.output("out");
  return m.bytes();
}

std::vector<std::pair<std::string, Bytes>> OnnxSeeds() {
  return {{"mlp.onnx", MlpModel()}, {"conv.onnx", ConvModel()}, {"shape.onnx", ShapeModel()},
          {"function_external.onnx", FunctionModel()}, {"nested_if.onnx", NestedIfModel(3)}};
}

// ---- Seeds of each harness ---------------------------------------------------------------------

struct Harness {
  const char* name;
  Entry entry;
  const fuzz::ParserStats& (*stats)();
};
const Harness kHarnesses[] = {
    {"onnx", fuzz::onnx_one, fuzz::onnx_stats},
    {"safetensors", fuzz::safetensors_one, fuzz::safetensors_stats},
    {"hf_config", fuzz::hf_config_one, fuzz::hf_config_stats},
    {"tokenizer", fuzz::tokenizer_one, fuzz::tokenizer_stats},
};

// tests/data/llm/<family>/tokenizer.json NUL tokenizer_config.json.
std::vector<std::pair<std::string, Bytes>> TokenizerSeeds() {
  std::vector<std::pair<std::string, Bytes>> out;
  for (const char* family : {"llama3", "qwen2", "llama2", "mistral", "gemma", "smollm", "gpt2"}) {
    const fs::path dir = kSource / "tests/data/llm" / family;
    const Bytes tokenizer = ReadFile(dir / "tokenizer.json");
    const Bytes config = ReadFile(dir / "tokenizer_config.json");
    if (tokenizer.empty() || config.empty()) continue;
    out.emplace_back(std::string(family) + "_with_config", tokenizer + '\0' + config);
    out.emplace_back(std::string(family), tokenizer);
  }
  return out;
}

// The generated seeds plus the curated ones (regressions/<harness>/seed_*).
std::vector<std::pair<std::string, Bytes>> Seeds(const std::string& harness) {
  std::vector<std::pair<std::string, Bytes>> out;
  if (harness == "onnx") out = OnnxSeeds();
  if (harness == "tokenizer") out = TokenizerSeeds();
  for (const fs::path& p : FilesIn(kRegressions / harness)) {
    if (p.filename().string().rfind("seed_", 0) == 0) out.emplace_back(p.filename().string(), ReadFile(p));
  }
  return out;
}

TEST(FuzzExporterReplayTest, SeedsAreAccepted) {
  for (const Harness& h : kHarnesses) {
    const auto seeds = Seeds(h.name);
    EXPECT_GE(seeds.size(), 2u) << h.name;
    for (const auto& [name, bytes] : seeds) {
      // Refused on purpose: If (a seed for the nesting), and a header whose data was cut.
      const bool refused = name == "nested_if.onnx" || name == "seed_qwen3_fp8_header_cut.safetensors";
      const fuzz::ParserStats before = h.stats();
      RunInput(h.entry, bytes);
      const fuzz::ParserStats after = h.stats();
      EXPECT_EQ(after.inputs, before.inputs + 1);
      EXPECT_EQ(after.accepted, before.accepted + (refused ? 0 : 1)) << h.name << " " << name << ": " << fuzz::last_error();
      EXPECT_EQ(after.rejected, before.rejected + (refused ? 1 : 0)) << h.name << " " << name;
    }
  }
}

TEST(FuzzExporterReplayTest, RefusedSeedsSayWhy) {
  RunInput(fuzz::onnx_one, NestedIfModel(3));  // an If without else_branch
  EXPECT_NE(fuzz::last_error().find("needs then_branch and else_branch graphs"), std::string::npos) << fuzz::last_error();
  EXPECT_NE(fuzz::last_error().find("If"), std::string::npos) << fuzz::last_error();
  RunInput(fuzz::onnx_one, NestedIfModel(40));  // 1 + 40 * 3 levels > 100
  EXPECT_NE(fuzz::last_error().find("nest deeper than 100"), std::string::npos) << fuzz::last_error();
  RunInput(fuzz::safetensors_one, ReadFile(kRegressions / "safetensors/seed_qwen3_fp8_header_cut.safetensors"));
  EXPECT_NE(fuzz::last_error().find("outside the 256 data bytes"), std::string::npos) << fuzz::last_error();
}

// Crash reproducers found by libFuzzer (regressions/<harness>/crash_*, each named after what it
// did): every one is now refused with a message. Under the ASan build a regression is a report.
//   onnx/crash_node_without_outputs.onnx: an Unsqueeze that lists no outputs; its handler read
//   output(0) past the end of the protobuf list (UBSan: null Rep in RepeatedPtrField::Get).
const std::pair<const char*, const char*> kExpectedErrors[] = {
    {"crash_node_without_outputs.onnx", "the node has no outputs"},
};

TEST(FuzzExporterReplayTest, RegressionInputsAreRefused) {
  size_t replayed = 0;
  for (const Harness& h : kHarnesses) {
    for (const fs::path& p : FilesIn(kRegressions / h.name)) {
      if (p.filename().string().rfind("seed_", 0) == 0) continue;
      const fuzz::ParserStats before = h.stats();
      RunInput(h.entry, ReadFile(p));
      EXPECT_EQ(h.stats().rejected, before.rejected + 1) << p << " (last error: " << fuzz::last_error() << ")";
      EXPECT_FALSE(fuzz::last_error().empty()) << p;
      for (const auto& [file, message] : kExpectedErrors) {
        if (p.filename() == file) {
          EXPECT_NE(fuzz::last_error().find(message), std::string::npos) << fuzz::last_error();
        }
      }
      ++replayed;
    }
  }
  std::printf("replayed %zu regression inputs\n", replayed);
}

// Byte-level mutations (flips, interesting values, truncations, duplicated or deleted ranges,
// splices with another seed) through each entry point; only crashes and sanitizer reports fail.
Bytes Mutate(const Bytes& base, const Bytes& other, std::mt19937_64& rng) {
  Bytes f = base.empty() ? Bytes(1, '\0') : base;
  auto uniform = [&](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  auto position = [&] { return uniform(0, f.size() - 1); };
  const int steps = static_cast<int>(uniform(1, 3));
  for (int step = 0; step < steps && !f.empty(); ++step) {
    switch (uniform(0, 6)) {
      case 0: {
        const size_t n = uniform(1, 4);
        for (size_t i = 0; i < n; ++i) f[position()] ^= static_cast<char>(uniform(1, 255));
        break;
      }
      case 1: {
        static const char* const kValues[] = {"\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "\x00", "\x7f", "-1", "1e308",
                                              "18446744073709551615", "[[[[", "\"", "{}", "null"};
        const char* v = kValues[uniform(0, sizeof(kValues) / sizeof(kValues[0]) - 1)];
        const size_t len = std::max<size_t>(1, std::strlen(v));
        f.replace(position(), std::min(len, f.size()), v, len);
        break;
      }
      case 2:
        f.resize(position());
        break;
      case 3: {
        const size_t at = position(), len = std::min(uniform(1, 64), f.size() - at);
        f.insert(uniform(0, f.size()), f.substr(at, len));
        break;
      }
      case 4: {
        const size_t at = position();
        f.erase(at, std::min(uniform(1, 32), f.size() - at));
        break;
      }
      case 5: {
        if (other.empty()) break;
        const size_t src = uniform(0, other.size() - 1), len = std::min(uniform(1, 256), other.size() - src);
        f.replace(position(), std::min(len, f.size()), other, src, len);
        break;
      }
      default:
        f.insert(position(), 1, static_cast<char>(uniform(0, 255)));
        break;
    }
    if (f.empty()) break;
  }
  return f;
}

TEST(FuzzExporterReplayTest, DeterministicMutationsNeverCrash) {
  constexpr int kPerSeed = 150;
  std::mt19937_64 rng(20261126);
  for (const Harness& h : kHarnesses) {
    const auto seeds = Seeds(h.name);
    ASSERT_FALSE(seeds.empty()) << h.name;
    const fuzz::ParserStats before = h.stats();
    for (size_t s = 0; s < seeds.size(); ++s) {
      const Bytes& other = seeds[(s + 1) % seeds.size()].second;
      for (int i = 0; i < kPerSeed; ++i) RunInput(h.entry, Mutate(seeds[s].second, other, rng));
    }
    const fuzz::ParserStats after = h.stats();
    const uint64_t inputs = after.inputs - before.inputs;
    EXPECT_EQ(inputs, seeds.size() * kPerSeed) << h.name;
    EXPECT_EQ(after.accepted - before.accepted + after.rejected - before.rejected + after.unclear - before.unclear, inputs);
    std::printf("%s: %llu mutations, %llu accepted, %llu refused, %llu with a library message\n", h.name,
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(after.accepted - before.accepted),
                static_cast<unsigned long long>(after.rejected - before.rejected),
                static_cast<unsigned long long>(after.unclear - before.unclear));
  }
}

// ember_fuzz_onnx's structure-aware mutator (onnx_mutate) on the ONNX seeds, its fallback a byte flip.
size_t FlipOneByte(uint8_t* data, size_t size, size_t) {
  if (size > 0) data[size / 2] ^= 0x5a;
  return size;
}

TEST(FuzzExporterReplayTest, StructuredOnnxMutationsNeverCrash) {
  constexpr int kPerSeed = 200;
  const fuzz::ParserStats before = fuzz::onnx_stats();
  unsigned seed = 1;
  for (const auto& [name, bytes] : Seeds("onnx")) {
    for (int i = 0; i < kPerSeed; ++i) {
      std::vector<uint8_t> buffer(bytes.size() * 2 + 4096);
      std::memcpy(buffer.data(), bytes.data(), bytes.size());
      const size_t n = fuzz::onnx_mutate(buffer.data(), bytes.size(), buffer.size(), seed++, FlipOneByte);
      ASSERT_LE(n, buffer.size());
      fuzz::onnx_one(buffer.data(), n);
    }
  }
  const fuzz::ParserStats after = fuzz::onnx_stats();
  // Some edits keep the model importable (a new dim on an unused initializer, a reordered pair).
  EXPECT_GT(after.accepted, before.accepted);
  std::printf("onnx structured: %llu mutations, %llu accepted\n", static_cast<unsigned long long>(after.inputs - before.inputs),
              static_cast<unsigned long long>(after.accepted - before.accepted));
}

TEST(FuzzExporterReplayTest, TinyAndDegenerateInputs) {
  const std::vector<Bytes> inputs = {"", Bytes(1, '\0'), "{", "[]", "null", Bytes(8, '\0'), Bytes(8, '\xff'),
                                     Bytes("\x08\x00\x00\x00\x00\x00\x00\x00{}", 10), Bytes(64, '\x0a')};
  for (const Harness& h : kHarnesses) {
    const fuzz::ParserStats before = h.stats();
    for (const Bytes& in : inputs) RunInput(h.entry, in);
    EXPECT_EQ(h.stats().accepted, before.accepted) << h.name;
  }
  RunInput(fuzz::onnx_one, "");
  EXPECT_EQ(fuzz::last_error(), "onnx: fuzz input: empty file, not an ONNX model");
}

// Seed corpus for the libFuzzer targets: corpus-exporter/<harness>/<name>.
TEST(FuzzExporterReplayTest, WritesSeedCorpus) {
  size_t written = 0;
  for (const Harness& h : kHarnesses) {
    const fs::path dir = fs::path(EMBER_FUZZ_CORPUS_DIR) / h.name;
    fs::create_directories(dir);
    for (const auto& [name, bytes] : Seeds(h.name)) {
      FILE* f = std::fopen((dir / name).c_str(), "wb");
      ASSERT_NE(f, nullptr) << dir / name;
      written += std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
      std::fclose(f);
    }
  }
  EXPECT_GE(written, 4u * 2u);
}

}  // namespace
}  // namespace ember
