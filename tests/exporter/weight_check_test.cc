// Hostile numbers in the exporter outside the HF importer (tests/exporter/hf_llm_test.cc has those):
// passes/weight_check (NaN / Inf per dtype, shared bytes, quantization scales), the pipeline's
// refusal of non-finite constants (imported and folded) and --allow-non-finite-weights, an ONNX
// initializer with a NaN through the CLI, export-time tensors above kMaxEvaluatedBytes, memory plans
// above 1 TiB, and the CLI's strict numeric flags.
#include "exporter/passes/weight_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "exporter/cli/cli.h"
#include "exporter/importers/builder/graph_builder.h"
#include "exporter/pipeline.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

struct Counted {
  uint64_t count = 0, first = ~uint64_t{0};
  bool operator==(const Counted& o) const { return count == o.count && first == o.first; }
};
std::ostream& operator<<(std::ostream& os, const Counted& c) { return os << c.count << " first " << c.first; }

Counted Count(ScalarType dtype, const std::vector<uint8_t>& bytes, uint64_t n) {
  Counted c;
  c.count = count_non_finite(dtype, bytes.data(), n, &c.first);
  return c;
}

TEST(WeightCheckTest, CountsNonFiniteOfEveryFloatDtype) {
  EXPECT_EQ(Count(ScalarType::F32, Bytes<float>({1, kNaN, -0.0f, kInf, -kInf, 3e38f}), 6), (Counted{3, 1}));
  EXPECT_EQ(Count(ScalarType::F32, Bytes<float>({1, 2, 3}), 3), (Counted{0, ~uint64_t{0}}));  // first untouched
  EXPECT_EQ(Count(ScalarType::F64, Bytes<double>({1e300, -1.0 / 0.0}), 2), (Counted{1, 1}));
  // f16: 0x7bff = 65504 is finite, 0x7c00 = inf, 0xfe00 = NaN.
  EXPECT_EQ(Count(ScalarType::F16, Bytes<uint16_t>({0x7bff, 0x3c00, 0x7c00, 0xfe00}), 4), (Counted{2, 2}));
  // bf16: 0x7f7f = the largest finite, 0xff80 = -inf, 0x7fc1 = NaN.
  EXPECT_EQ(Count(ScalarType::BF16, Bytes<uint16_t>({0x7f7f, 0xff80, 0x7fc1}), 3), (Counted{2, 1}));
  // e4m3fn: no Inf; 0x7e = 448 and 0xfe = -448 are finite, 0x7f / 0xff are NaN.
  EXPECT_EQ(Count(ScalarType::F8E4M3FN, {0x7e, 0xfe, 0x00, 0xff, 0x7f}, 5), (Counted{2, 3}));
  // e5m2: 0x7b = 57344 finite, 0x7c = inf, 0xfd = NaN.
  EXPECT_EQ(Count(ScalarType::F8E5M2, {0x7b, 0x7c, 0xfd}, 3), (Counted{2, 1}));
  EXPECT_EQ(Count(ScalarType::E8M0, {0xfe, 0x7f, 0xff}, 3), (Counted{1, 2}));
  EXPECT_EQ(Count(ScalarType::UE4M3, {0x7e, 0x7f}, 2), (Counted{1, 1}));
  // Integers and f4 hold no NaN, whatever their bits.
  EXPECT_EQ(Count(ScalarType::I32, Bytes<uint32_t>({0x7f800000u, 0xffffffffu}), 2).count, 0u);
  EXPECT_EQ(Count(ScalarType::F4E2M1, {0xff}, 2).count, 0u);
  // Past the 2^20-element chunk of the vectorized count: one NaN near the end of a larger tensor.
  std::vector<float> big((size_t{1} << 20) + 37, 0.5f);
  big[(size_t{1} << 20) + 30] = kNaN;
  EXPECT_EQ(Count(ScalarType::F32, Bytes(big), big.size()), (Counted{1, (uint64_t{1} << 20) + 30}));
}

TEST(WeightCheckTest, ScansConstantsAndScalesOnceAndFormatsTheFirstOffenders) {
  GraphBuilder b;
  const ValueId a = b.constant_f32("a", {4}, {1, 2, kNaN, kInf});
  b.constant_shared("a_again", ScalarType::F32, {4}, b.graph().values[size_t(a)].data);  // scanned once
  b.constant_f32("fine", {2}, {1, 2});
  auto q = std::make_shared<QuantParams>();
  q->scale_dtype = ScalarType::F32;
  q->block = {1, 4};
  q->scale_dims = {2, 1};
  q->scale = std::make_shared<const std::vector<uint8_t>>(Bytes<float>({0.5f, kNaN}));
  b.constant_quantized("w", ScalarType::F8E4M3FN, {2, 4}, {1, 2, 3, 4, 5, 6, 0x7f, 8}, q);
  b.constant("h", ScalarType::BF16, {2}, Bytes<uint16_t>({0x3f80, 0xff80}));
  std::set<const void*> seen;
  const WeightCheck check = check_weights(b.graph(), &seen);
  EXPECT_EQ(check.tensors_checked, 5u);  // a, fine, w codes, w scale, h
  // No node reads 'a' or 'h' as a weight: only their NaNs count (a mask's -inf fill value is a
  // legitimate constant); the quantized 'w' is a weight, codes and scales.
  ASSERT_EQ(check.tensors.size(), 3u);
  EXPECT_EQ(check.tensors[0].name, "a");
  EXPECT_EQ(check.tensors[0].count, 1u);
  EXPECT_EQ(check.tensors[1].what, "f8_e4m3fn[2, 4]");
  EXPECT_EQ(check.tensors[1].first_value, "NaN code 0x7f");
  EXPECT_EQ(check.format(),
            "'a' f32[4]: 1 of 4 non-finite, first at index 2 (nan); 'w' f8_e4m3fn[2, 4]: 1 of 8 non-finite, first at "
            "index 6 (NaN code 0x7f); 'w' f32[2, 1] scale: 1 of 2 non-finite, first at index 1 (nan)");
  EXPECT_NE(check.format(2).find("; 'w' f8_e4m3fn[2, 4]: 1 of 8 non-finite, first at index 6 (NaN code 0x7f) (3 tensors in all)"),
            std::string::npos)
      << check.format(2);
  // What `seen` holds is not scanned again.
  EXPECT_EQ(check_weights(b.graph(), &seen).tensors_checked, 0u);
}

// An infinity counts in a weight (a Linear's weight and bias here), not in a constant that only
// feeds an Add or a Where (a mask's fill value).
TEST(WeightCheckTest, InfinitiesCountInWeightsOnly) {
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {2, 4});
  const ValueId w = b.constant_f32("w", {2, 4}, {1, 2, 3, kInf, 5, 6, 7, 8});
  const ValueId bias = b.constant_f32("bias", {2}, {-kInf, 0});
  const ValueId mask = b.constant_f32("mask", {2}, {0, -kInf});
  b.output("y", b.add(b.linear(x, w, bias, "fc"), mask, "masked"));
  const WeightCheck check = check_weights(b.graph());
  EXPECT_EQ(check.format(),
            "'w' f32[2, 4]: 1 of 8 non-finite, first at index 3 (inf); 'bias' f32[2]: 1 of 2 non-finite, first at "
            "index 0 (-inf)");
  EXPECT_TRUE(is_weight_input(OpCode::Linear, 1));
  EXPECT_FALSE(is_weight_input(OpCode::Linear, 0));
  EXPECT_TRUE(is_weight_input(OpCode::Embedding, 0));
  EXPECT_FALSE(is_weight_input(OpCode::Add, 1));
  uint64_t first = 0;
  const std::vector<uint8_t> bytes = Bytes<float>({kInf, -kInf, kNaN, 1});
  EXPECT_EQ(count_non_finite(ScalarType::F32, bytes.data(), 4, &first, /*include_inf=*/false), 1u);
  EXPECT_EQ(first, 2u);
  EXPECT_EQ(count_non_finite(ScalarType::F32, bytes.data(), 4, &first), 3u);
  EXPECT_EQ(first, 0u);
  const std::vector<uint8_t> bf = Bytes<uint16_t>({0xff80, 0x7fc1, 0x7f80});  // -inf, nan, inf
  EXPECT_EQ(count_non_finite(ScalarType::BF16, bf.data(), 3, &first, false), 1u);
  EXPECT_EQ(first, 1u);
}

// The pipeline refuses NaN/Inf constants as imported, and ones constant folding makes (div by 0);
// allow_non_finite_weights exports both, with one warning.
TEST(WeightCheckTest, PipelineRefusesNonFiniteConstantsUnlessAllowed) {
  auto build = [](float a0) {
    GraphBuilder b;
    const ValueId x = b.input("x", ScalarType::F32, {2});
    const ValueId q = b.div(b.constant_f32("a", {2}, {a0, 0}), b.constant_f32("z", {2}, {0, 0}), "q");
    b.output("y", b.add(x, q, "sum"));
    return b.build();
  };
  ExportOptions options;
  std::string stage;
  options.stage = &stage;
  try {
    export_graph(build(1.0f), options);
    ADD_FAILURE() << "expected an ExportError";
  } catch (const ExportError& e) {
    EXPECT_EQ(std::string(e.what()),
              "non-finite weights after folding and quantization: 'q' f32[2]: 1 of 2 non-finite, first at index 1 "
              "(nan) (pass --allow-non-finite-weights to export them anyway)");
    EXPECT_EQ(stage, "checking weights");
  }
  try {
    export_graph(build(kNaN), options);
    ADD_FAILURE() << "expected an ExportError";
  } catch (const ExportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("non-finite weights in the model: 'a' f32[2]: 1 of 2 non-finite, first at "
                                          "index 0 (nan)", 0),
              0u)
        << e.what();
  }
  options.allow_non_finite_weights = true;
  const ExportResult r = export_graph(build(kNaN), options);
  EXPECT_EQ(stage, "serializing");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "exporting non-finite weights (--allow-non-finite-weights): 'a' f32[2]: 1 of 2 non-finite, first at index "
            "0 (nan); 'q' f32[2]: 2 of 2 non-finite, first at index 0 (nan)");
}

struct CliRun {
  int code = 0;
  std::string out, err;
};
CliRun RunCli(std::vector<std::string> args) {
  args.insert(args.begin(), "exporter");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CliRun r;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(WeightCheckTest, OnnxInitializerWithNaNRefusedUnlessAllowed) {
  testing::OnnxModel m;
  m.input("x", testing::kFloat, {"4"});
  m.init_f32("bias", {4}, {1, 2, kNaN, 4});
  m.node("Add", {"x", "bias"}, {"y"}, "add");
  m.output("y");
  const std::string model = testing::temp_path("nan_bias.onnx"), out = testing::temp_path("nan_bias.pte");
  std::ofstream(model, std::ios::binary) << m.bytes();
  std::filesystem::remove(out);
  CliRun r = RunCli({model, "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "exporter: error: onnx: non-finite weights in initializers: 'bias' f32[4]: 1 of 4 non-finite, first at "
            "index 2 (nan) (pass --allow-non-finite-weights to export them anyway)\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  r = RunCli({model, "-o", out, "--allow-non-finite-weights"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("exporter: warning: exporting non-finite weights (--allow-non-finite-weights): 'bias' f32[4]: "
                       "1 of 4 non-finite, first at index 2 (nan)\n"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(std::filesystem::exists(out));
  std::filesystem::remove(model);
  std::filesystem::remove(out);
  // A MatMul weight becomes the transposed constant 'w.T' at import; the error names the
  // initializer and the index as stored ([8, 4]: row 1, column 2).
  testing::OnnxModel mm;
  mm.input("x", testing::kFloat, {"2", "8"});
  std::vector<float> w(32, 0.25f);
  w[6] = -kInf;
  mm.init_f32("w", {8, 4}, w);
  mm.node("MatMul", {"x", "w"}, {"y"}, "mm");
  mm.output("y");
  EXPECT_EQ(testing::import_error(mm),
            "onnx: non-finite weights in initializers: 'w' f32[8, 4]: 1 of 32 non-finite, first at index 6 (-inf) "
            "(pass --allow-non-finite-weights to export them anyway)");
  // A -inf initializer that is not a weight (a mask added to scores) is a legitimate constant.
  testing::OnnxModel mask;
  mask.input("x", testing::kFloat, {"4"});
  mask.init_f32("mask", {4}, {0, 0, -kInf, -kInf});
  mask.node("Add", {"x", "mask"}, {"y"}, "masked");
  mask.output("y");
  EXPECT_EQ(testing::import_error(mask), "");
}

// ONNX shapes that would make the importer materialize terabytes fail naming the node instead of
// ending in std::bad_alloc.
TEST(WeightCheckTest, HugeExportTimeTensorsFailNamingTheNode) {
  {
    testing::OnnxModel m(17);
    m.input("x", testing::kFloat, {"4"});
    testing::const_i64(m, "shape", {int64_t{1} << 40});
    onnx::TensorProto* v = testing::attr_t(m.node("ConstantOfShape", {"shape"}, {"c"}, "fill"), "value");
    v->set_data_type(onnx::TensorProto::FLOAT);
    v->add_dims(1);
    v->add_float_data(1.0f);
    m.node("Add", {"c", "x"}, {"y"}, "add");
    m.output("y");
    const std::string error = testing::import_error(m);
    EXPECT_NE(error.find("ConstantOfShape node 'fill'"), std::string::npos) << error;
    EXPECT_NE(error.find("shape [1099511627776] makes a tensor larger than 256 MiB at export"), std::string::npos)
        << error;
  }
  {
    testing::OnnxModel m(17);
    m.input("x", testing::kFloat, {"4"});
    m.init_f32("one", {1}, {1.0f});
    testing::const_i64(m, "shape", {int64_t{1} << 20, int64_t{1} << 20, 4});
    m.node("Expand", {"one", "shape"}, {"c"}, "expand");
    m.node("Add", {"c", "x"}, {"y"}, "add");
    m.output("y");
    // Imported as an expand node of constants; the pipeline's constant folding evaluates it.
    std::string error;
    try {
      export_graph(testing::import_model(m).graph, ExportOptions{});
    } catch (const ExportError& e) {
      error = e.what();
    }
    EXPECT_NE(error.find("evaluate expand 'expand'"), std::string::npos) << error;
    EXPECT_NE(error.find("would take 17592186044416 bytes, above the limit of 68719476736 for a tensor computed at "
                         "export"),
              std::string::npos)
        << error;
  }
}

TEST(WeightCheckTest, MemoryPlansAboveOneTebibyteFailNamingTheValue) {
  {
    GraphBuilder b;
    b.symbol("batch", 1, int64_t{1} << 48);
    const ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 8});
    b.output("y", b.relu(x, "r"));
    Graph g = b.build();
    try {
      plan_memory(g, portable_partition(g));
      ADD_FAILURE() << "expected an ExportError";
    } catch (const ExportError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("plan_memory: value 'x' f32[batch<=281474976710656, 8] needs "
                                            "9007199254740992 bytes at its symbols' maxima, above the 1 TiB limit",
                                            0),
                0u)
          << e.what();
    }
  }
  {
    // Each tensor is 512 GiB, the io arena (input + output) above 1 TiB.
    GraphBuilder b;
    b.symbol("batch", 1, int64_t{1} << 37);
    const ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch")});
    b.output("y", b.relu(x, "r"));
    Graph g = b.build();
    try {
      plan_memory(g, portable_partition(g));
      ADD_FAILURE() << "expected an ExportError";
    } catch (const ExportError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("plan_memory: the io arena needs 1099511627904 bytes", 0), 0u) << e.what();
    }
  }
}

TEST(WeightCheckTest, CliNumericFlagsAreStrict) {
  const std::string out = testing::temp_path("strict.pte");
  const std::string manifest = testing::test_data_path("test_manifest.json");
  struct Case {
    std::vector<std::string> flags;
    const char* expect;
  };
  const Case cases[] = {
      {{"--seed", "-1"}, "exporter: error: --seed '-1': not an integer (expected 0 to 18446744073709551615)"},
      {{"--seed", "18446744073709551616"}, "exporter: error: --seed 18446744073709551616: above the limit 18446744073709551615"},
      {{"--seed", "7x"}, "exporter: error: --seed '7x': not an integer"},
      {{"--quantize", "fp8", "--quantize-samples", "5000"}, "exporter: error: --quantize-samples 5000: above the limit 1024"},
      {{"--quantize", "fp8", "--quantize-min-size", "-1"}, "exporter: error: --quantize-min-size -1: below the minimum 0"},
      {{"--quantize", "fp8", "--quantize-min-size", "1.5"}, "exporter: error: --quantize-min-size '1.5': not an integer"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--example", "mlp", "-o", out, "--manifest", manifest};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const CliRun r = RunCli(args);
    EXPECT_EQ(r.code, 1) << c.expect;
    EXPECT_EQ(r.err.rfind(c.expect, 0), 0u) << c.expect << " -> " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // The largest seed is a seed.
  EXPECT_EQ(RunCli({"--example", "mlp", "-o", out, "--manifest", manifest, "--seed", "18446744073709551615"}).code, 0);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace ember::exporter
