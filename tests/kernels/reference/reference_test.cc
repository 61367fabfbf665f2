// Runs every golden case (tests/data/golden/manifest.txt, made by make_golden.py) through the
// reference kernel the registry finds for it, after computing the output shape with the op's shape
// function; also checks the registration itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/reference/ops.h"
#include "kernels/reference/register.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/kernel/op_info.h"
#include "tools/common/npy.h"

namespace ember {
namespace {

using tools::NpyArray;

std::string data_dir(const char* name) {
  const char* root = std::getenv("EMBER_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/tests/data/" + name + "/";
}
std::string golden_dir() { return data_dir("golden"); }
// NaN / ±Inf / ±0 cases from PyTorch and onnxruntime (make_special_golden.py).
std::string special_dir() { return data_dir("golden_special"); }

struct GoldenCase {
  std::string name;
  std::map<std::string, std::string> fields;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (text.back() == sep) parts.push_back("");
  return parts;
}

// The manifest's cases; a single case named "manifest_missing" when it cannot be read, so the
// failure shows up as a test failure instead of an empty suite.
std::vector<GoldenCase> load_manifest(const std::string& dir) {
  std::vector<GoldenCase> cases;
  std::ifstream in(dir + "manifest.txt");
  if (!in) {
    cases.push_back(GoldenCase{"manifest_missing", {}});
    return cases;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    GoldenCase c;
    std::istringstream tokens(line);
    std::string token;
    while (tokens >> token) {
      const size_t eq = token.find('=');
      if (eq == std::string::npos) continue;
      c.fields[token.substr(0, eq)] = token.substr(eq + 1);
    }
    c.name = c.fields["name"];
    cases.push_back(c);
  }
  return cases;
}

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

const std::vector<GoldenCase>& manifest() {
  static const std::vector<GoldenCase> cases = load_manifest(golden_dir());
  return cases;
}

const std::vector<GoldenCase>& special_manifest() {
  static const std::vector<GoldenCase> cases = load_manifest(special_dir());
  return cases;
}

std::vector<int64_t> parse_ints(const std::string& text) {
  std::vector<int64_t> values;
  for (const std::string& part : split(text, ','))
    values.push_back(std::strtoll(part.c_str(), nullptr, 10));
  return values;
}

OpCode parse_op(const std::string& name) {
  for (int i = 1; i < kOpCodeCount; ++i) {
    if (name == to_string(static_cast<OpCode>(i))) return static_cast<OpCode>(i);
  }
  return OpCode::Invalid;
}

// Fills OpAttrs from the case's attribute tokens; false (with a message) on an unknown value.
bool parse_attrs(const GoldenCase& c, const OpInfo& info, OpAttrs* attrs,
                 std::vector<int64_t>* symbols, std::string* error) {
  attrs->kind = info.attr_kind;
  auto has = [&](const char* key) { return c.fields.count(key) != 0; };
  auto ints = [&](const char* key) { return parse_ints(c.fields.at(key)); };
  auto copy_ints = [&](const char* key, auto* dst, size_t capacity) -> bool {
    const std::vector<int64_t> v = ints(key);
    if (v.size() > capacity) return false;
    for (size_t i = 0; i < v.size(); ++i)
      dst[i] = static_cast<std::remove_pointer_t<decltype(dst)>>(v[i]);
    return true;
  };
  if (has("axis")) attrs->axis = static_cast<int32_t>(ints("axis").at(0));
  if (has("epsilon")) attrs->epsilon = std::strtof(c.fields.at("epsilon").c_str(), nullptr);
  if (has("approx")) {
    const std::string& a = c.fields.at("approx");
    if (a == "none") {
      attrs->gelu_approx = GeluApprox::None;
    } else if (a == "tanh") {
      attrs->gelu_approx = GeluApprox::Tanh;
    } else {
      *error = "unknown approx " + a;
      return false;
    }
  }
  bool ok = true;
  if (has("kernel")) ok = ok && copy_ints("kernel", attrs->kernel, 2);
  if (has("stride")) ok = ok && copy_ints("stride", attrs->stride, 2);
  if (has("padding")) ok = ok && copy_ints("padding", attrs->padding, 4);
  if (has("dilation")) ok = ok && copy_ints("dilation", attrs->dilation, 2);
  if (has("groups")) attrs->groups = static_cast<int32_t>(ints("groups").at(0));
  if (has("ceil_mode")) attrs->ceil_mode = ints("ceil_mode").at(0) != 0;
  if (has("count_include_pad")) attrs->count_include_pad = ints("count_include_pad").at(0) != 0;
  if (has("shape")) {
    attrs->count = static_cast<uint8_t>(ints("shape").size());
    ok = ok && copy_ints("shape", attrs->shape, kMaxRank) &&
         copy_ints("shape_sym", attrs->shape_sym, kMaxRank);
  }
  if (has("symbols")) *symbols = ints("symbols");
  if (has("perm")) {
    attrs->count = static_cast<uint8_t>(ints("perm").size());
    ok = ok && copy_ints("perm", attrs->perm, kMaxRank);
  }
  if (has("axes")) {
    attrs->count = static_cast<uint8_t>(ints("axes").size());
    ok = ok && copy_ints("axes", attrs->axes, kMaxRank);
  }
  if (has("starts")) {  // slice; a reduction lists axes alone
    ok = ok && copy_ints("starts", attrs->starts, kMaxRank) &&
         copy_ints("ends", attrs->ends, kMaxRank) && copy_ints("steps", attrs->steps, kMaxRank);
  }
  auto real = [&](const char* key) { return std::strtof(c.fields.at(key).c_str(), nullptr); };
  if (has("clip_min")) attrs->clip_min = real("clip_min");
  if (has("clip_max")) attrs->clip_max = real("clip_max");
  if (has("alpha")) attrs->alpha = real("alpha");
  if (has("beta")) attrs->beta = real("beta");
  if (has("keepdims")) attrs->keepdims = ints("keepdims").at(0) != 0;
  if (has("select_last_index")) attrs->select_last_index = ints("select_last_index").at(0) != 0;
  if (has("k")) attrs->k = ints("k").at(0);
  if (has("largest")) attrs->largest = ints("largest").at(0) != 0;
  if (has("sorted")) attrs->sorted = ints("sorted").at(0) != 0;
  if (has("exclusive")) attrs->exclusive = ints("exclusive").at(0) != 0;
  if (has("reverse")) attrs->reverse = ints("reverse").at(0) != 0;
  if (has("pads")) {
    const size_t n = ints("pads").size();
    attrs->count = static_cast<uint8_t>(n / 2);
    ok = ok && copy_ints("pads", attrs->pads, 2 * kMaxRank);
  }
  if (has("pad_value")) attrs->pad_value = real("pad_value");
  if (has("mode")) {
    const std::string& m = c.fields.at("mode");
    if (m == "constant") {
      attrs->pad_mode = PadMode::Constant;
    } else if (m == "reflect") {
      attrs->pad_mode = PadMode::Reflect;
    } else if (m == "edge") {
      attrs->pad_mode = PadMode::Edge;
    } else {
      *error = "unknown mode " + m;
      return false;
    }
  }
  if (has("to")) {
    attrs->cast_to = ScalarType::Invalid;
    for (int t = 1; t < kScalarTypeCount; ++t) {
      if (c.fields.at("to") == to_string(static_cast<ScalarType>(t))) {
        attrs->cast_to = static_cast<ScalarType>(t);
      }
    }
    if (attrs->cast_to == ScalarType::Invalid) {
      *error = "unknown dtype " + c.fields.at("to");
      return false;
    }
  }
  // lstm / gru (RnnAttrs): activations by name, their alpha / beta, per direction in ONNX order.
  if (has("direction")) {
    const std::string& v = c.fields.at("direction");
    attrs->rnn_direction = v == "forward" ? RnnDirection::Forward
                           : v == "reverse" ? RnnDirection::Reverse
                           : v == "bidirectional" ? RnnDirection::Bidirectional
                                                  : RnnDirection::Invalid;
    if (attrs->rnn_direction == RnnDirection::Invalid) {
      *error = "unknown direction " + v;
      return false;
    }
  }
  if (has("hidden_size")) attrs->hidden_size = static_cast<int32_t>(ints("hidden_size").at(0));
  if (has("activations")) {
    static const char* const kNames[] = {"Sigmoid", "Tanh", "Relu", "HardSigmoid", "LeakyRelu", "ThresholdedRelu",
                                         "ScaledTanh", "Affine", "Elu", "Softsign", "Softplus"};
    const std::vector<std::string> names = split(c.fields.at("activations"), ',');
    const std::vector<std::string> alphas = split(c.fields.at("rnn_alpha"), ',');
    const std::vector<std::string> betas = split(c.fields.at("rnn_beta"), ',');
    if (names.size() > static_cast<size_t>(kMaxRnnActivations) || alphas.size() != names.size() ||
        betas.size() != names.size()) {
      *error = "activations, rnn_alpha and rnn_beta must have equal lengths <= 6";
      return false;
    }
    attrs->rnn_act_count = static_cast<uint8_t>(names.size());
    for (size_t k = 0; k < names.size(); ++k) {
      attrs->rnn_act[k] = RnnActivation::Invalid;
      for (int a = 0; a < 11; ++a) {
        if (names[k] == kNames[a]) attrs->rnn_act[k] = static_cast<RnnActivation>(a + 1);
      }
      if (attrs->rnn_act[k] == RnnActivation::Invalid) {
        *error = "unknown activation " + names[k];
        return false;
      }
      attrs->rnn_alpha[k] = std::strtof(alphas[k].c_str(), nullptr);
      attrs->rnn_beta[k] = std::strtof(betas[k].c_str(), nullptr);
    }
  }
  if (has("clip")) attrs->rnn_clip = real("clip");
  if (has("linear_before_reset")) attrs->linear_before_reset = ints("linear_before_reset").at(0) != 0;
  if (has("input_forget")) attrs->input_forget = ints("input_forget").at(0) != 0;
  // [issue 17: resize, conv_transpose2d]
  if (has("output_padding")) ok = ok && copy_ints("output_padding", attrs->output_padding, 2);
  if (has("resize_mode")) {
    const std::string& m = c.fields.at("resize_mode");
    attrs->resize_mode = m == "nearest" ? ResizeMode::Nearest
                         : m == "linear" ? ResizeMode::Linear
                         : m == "cubic"  ? ResizeMode::Cubic
                                         : ResizeMode::Invalid;
    const std::string& t = c.fields.at("coord");
    attrs->resize_coord = t == "half_pixel"             ? ResizeCoord::HalfPixel
                          : t == "align_corners"        ? ResizeCoord::AlignCorners
                          : t == "asymmetric"           ? ResizeCoord::Asymmetric
                          : t == "pytorch_half_pixel"   ? ResizeCoord::PytorchHalfPixel
                          : t == "half_pixel_symmetric" ? ResizeCoord::HalfPixelSymmetric
                                                        : ResizeCoord::Invalid;
    const std::string& n = c.fields.at("nearest_mode");
    attrs->resize_nearest = n == "round_prefer_floor"  ? ResizeNearest::RoundPreferFloor
                            : n == "round_prefer_ceil" ? ResizeNearest::RoundPreferCeil
                            : n == "floor"             ? ResizeNearest::Floor
                            : n == "ceil"              ? ResizeNearest::Ceil
                                                       : ResizeNearest::Invalid;
    if (attrs->resize_mode == ResizeMode::Invalid || attrs->resize_coord == ResizeCoord::Invalid ||
        attrs->resize_nearest == ResizeNearest::Invalid) {
      *error = "unknown resize mode " + m + " / " + t + " / " + n;
      return false;
    }
    attrs->cubic_a = real("cubic_a");
    attrs->exclude_outside = ints("exclude_outside").at(0) != 0;
    const std::vector<std::string> scales = split(c.fields.at("scales"), ',');
    ok = ok && scales.size() <= static_cast<size_t>(kMaxRank);
    for (size_t i = 0; ok && i < scales.size(); ++i) attrs->resize_scales[i] = std::strtof(scales[i].c_str(), nullptr);
  }

  if (!ok) *error = "attribute list longer than its field";
  return ok;
}

TensorView view_of(NpyArray& array) {
  TensorView v;
  v.dtype = array.dtype;
  v.rank = static_cast<uint8_t>(array.dims.size());
  for (size_t i = 0; i < array.dims.size() && i < static_cast<size_t>(kMaxRank); ++i)
    v.dims[i] = array.dims[i];
  // Empty tensors still get a non-null pointer: null means "absent optional input".
  if (array.data.empty()) array.data.resize(1);
  v.data = array.data.data();
  return v;
}

std::string index_text(uint64_t flat, const std::vector<int64_t>& dims) {
  std::string text;
  for (size_t i = dims.size(); i-- > 0;) {
    const uint64_t d = static_cast<uint64_t>(dims[i]);
    text = std::to_string(flat % d) + (text.empty() ? "" : ", ") + text;
    flat /= d;
  }
  return "[" + text + "]";
}

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {
 protected:
  static void SetUpTestSuite() {
    registry_ = std::make_unique<KernelRegistry>();
    ASSERT_TRUE(kernels::register_reference_kernels(*registry_).is_ok());
  }
  static void TearDownTestSuite() { registry_.reset(); }
  static std::unique_ptr<KernelRegistry> registry_;
};
std::unique_ptr<KernelRegistry> GoldenTest::registry_;

// Special-value comparison (SpecialValues suite): NaN matches any NaN, an infinity only the same
// infinity, an expected zero a zero of the same sign (or a nonzero value within tolerance), anything
// else within atol + rtol |expected|.
bool same_special(double a, double e, double rtol, double atol) {
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e);
  if (std::isinf(a) || std::isinf(e)) return a == e;
  if (a == 0.0 && e == 0.0) return std::signbit(a) == std::signbit(e);
  return std::fabs(a - e) <= atol + rtol * std::fabs(e);
}

// Runs case c from `dir` through the reference kernel; `special` selects same_special for f32.
void run_golden_case(const GoldenCase& c, const std::string& dir, bool special,
                     const KernelRegistry& registry) {
  ASSERT_NE(c.name, "manifest_missing") << "cannot read " << dir << "manifest.txt";
  const OpCode op = parse_op(c.fields.at("op"));
  const OpInfo* info = find_op_info(op);
  ASSERT_NE(info, nullptr) << "unknown op " << c.fields.at("op");

  OpAttrs attrs;
  std::vector<int64_t> symbols;
  std::string error;
  ASSERT_TRUE(parse_attrs(c, *info, &attrs, &symbols, &error)) << error;

  const std::vector<std::string> input_files = split(c.fields.at("inputs"), ',');
  std::vector<NpyArray> arrays(input_files.size());
  std::vector<TensorView> inputs(input_files.size());
  for (size_t i = 0; i < input_files.size(); ++i) {
    if (input_files[i] == "-") continue;  // absent optional input: data null, dtype Invalid
    ASSERT_TRUE(tools::read_npy(dir + input_files[i], &arrays[i], &error)) << error;
    inputs[i] = view_of(arrays[i]);
  }
  // output=<f> or, for ops with several outputs (lstm, gru), output=<f0>,<f1>,...
  const std::vector<std::string> output_files = split(c.fields.at("output"), ',');
  const size_t output_count = output_files.size();
  std::vector<NpyArray> expected(output_count);
  for (size_t o = 0; o < output_count; ++o) {
    ASSERT_TRUE(tools::read_npy(dir + output_files[o], &expected[o], &error)) << error;
  }

  std::vector<TensorView> outs(output_count);
  ErrorContext ctx;
  const Status shaped = info->shape(attrs, inputs.data(), inputs.size(), outs.data(), output_count,
                                    Span<const int64_t>(symbols.data(), symbols.size()), &ctx);
  ASSERT_TRUE(shaped.is_ok()) << "shape function failed: " << ctx.message;
  for (size_t o = 0; o < output_count; ++o) {
    ASSERT_EQ(outs[o].dtype, expected[o].dtype) << "output " << o;
    ASSERT_EQ(outs[o].rank, expected[o].dims.size()) << "output " << o;
    for (size_t i = 0; i < expected[o].dims.size(); ++i) {
      ASSERT_EQ(outs[o].dims[i], expected[o].dims[i]) << "output " << o << " dim " << i;
    }
  }

  KernelKey key;
  key.op = op;
  key.arg_count = static_cast<uint8_t>(inputs.size() + output_count);
  for (size_t i = 0; i < inputs.size(); ++i) key.dtypes[i] = inputs[i].dtype;
  for (size_t o = 0; o < output_count; ++o) key.dtypes[inputs.size() + o] = outs[o].dtype;
  const KernelRegistry::Entry* entry = registry.find(key);
  char key_text[256];
  ASSERT_NE(entry, nullptr) << "no kernel for " << format_key(key, key_text, sizeof(key_text));

  // Fill the outputs with a pattern so a kernel that skips elements cannot pass by accident.
  std::vector<std::vector<uint8_t>> buffers(output_count);
  for (size_t o = 0; o < output_count; ++o) {
    buffers[o].assign(outs[o].nbytes() + 1, 0xA5);
    outs[o].data = buffers[o].data();
  }
  KernelContext kctx;
  std::vector<uint8_t> scratch;
  if (entry->scratch != nullptr) {
    scratch.resize(entry->scratch(attrs, inputs.data(), inputs.size(), outs.data(), output_count, 1));
    kctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  }
  entry->fn(kctx, attrs, inputs.data(), inputs.size(), outs.data(), output_count);

  const double rtol = std::strtod(c.fields.at("rtol").c_str(), nullptr);
  const double atol = std::strtod(c.fields.at("atol").c_str(), nullptr);
  for (size_t o = 0; o < output_count; ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    const TensorView& out = outs[o];
    const std::vector<uint8_t>& buffer = buffers[o];
    ASSERT_EQ(out.nbytes(), expected[o].data.size());
    const uint64_t numel = out.numel();
    const std::vector<int64_t>& dims = expected[o].dims;
    if (special && out.dtype == ScalarType::F32) {
      const float* actual = reinterpret_cast<const float*>(buffer.data());
      const float* want = reinterpret_cast<const float*>(expected[o].data.data());
      for (uint64_t i = 0; i < numel; ++i) {
        EXPECT_TRUE(same_special(actual[i], want[i], rtol, atol))
            << "element " << i << " " << index_text(i, dims) << ": got " << actual[i]
            << (std::signbit(actual[i]) ? " (sign set)" : "") << ", expected " << want[i]
            << (std::signbit(want[i]) ? " (sign set)" : "");
      }
      continue;
    }
    if (rtol == 0.0 && atol == 0.0) {
      const size_t elem = static_cast<size_t>(bits_of(out.dtype) / 8);
      for (uint64_t i = 0; i < numel; ++i) {
        if (std::memcmp(buffer.data() + i * elem, expected[o].data.data() + i * elem, elem) != 0) {
          FAIL() << "first mismatch at element " << i << " " << index_text(i, dims) << " (bytes differ)";
        }
      }
      continue;
    }
    ASSERT_EQ(out.dtype, ScalarType::F32);
    const float* actual = reinterpret_cast<const float*>(buffer.data());
    const float* want = reinterpret_cast<const float*>(expected[o].data.data());
    uint64_t mismatches = 0, first = 0;
    for (uint64_t i = 0; i < numel; ++i) {
      const double a = actual[i], e = want[i];
      const bool same =
          (std::isnan(a) && std::isnan(e)) || std::fabs(a - e) <= atol + rtol * std::fabs(e);
      if (!same && mismatches++ == 0) first = i;
    }
    EXPECT_EQ(mismatches, 0u) << "first mismatch at element " << first << " " << index_text(first, dims)
                              << ": got " << actual[first] << ", expected " << want[first] << " (rtol "
                              << rtol << ", atol " << atol << ")";
  }
}

TEST_P(GoldenTest, MatchesNumpy) { run_golden_case(GetParam(), golden_dir(), false, *registry_); }

INSTANTIATE_TEST_SUITE_P(Manifest, GoldenTest, ::testing::ValuesIn(manifest()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           return info.param.name;
                         });

// NaN, ±Inf, ±0, huge and tiny inputs: PyTorch / onnxruntime results (make_special_golden.py; the
// per-op choices are in kernels/reference/README.md), compared by same_special.
using SpecialValuesTest = GoldenTest;
TEST_P(SpecialValuesTest, MatchesTorchOrOnnxruntime) {
  run_golden_case(GetParam(), special_dir(), true, *registry_);
}
INSTANTIATE_TEST_SUITE_P(SpecialValues, SpecialValuesTest, ::testing::ValuesIn(special_manifest()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           return info.param.name;
                         });

TEST(GoldenManifestTest, CoversEveryOp) {
  bool seen[kOpCodeCount] = {false};
  for (const GoldenCase& c : manifest()) {
    if (c.fields.count("op")) seen[static_cast<int>(parse_op(c.fields.at("op")))] = true;
  }
  for (int i = 1; i < kOpCodeCount; ++i) {
    // sample has two outputs and a random draw: llm_test.cc checks it against an oracle instead.
    if (static_cast<OpCode>(i) == OpCode::Sample) continue;
    // paged_attention writes program state: paged_attention_test.cc checks it against a dense
    // double-precision oracle, tests/runtime/executor/paged_attention_op_test.cc as an op (with
    // logits_gather, against rows gathered by the test).
    if (static_cast<OpCode>(i) == OpCode::PagedAttention || static_cast<OpCode>(i) == OpCode::LogitsGather) continue;
    EXPECT_TRUE(seen[i]) << "no golden case for " << to_string(static_cast<OpCode>(i));
  }
}

// ---- Registration -------------------------------------------------------------------------------

KernelKey make_key(OpCode op, std::initializer_list<ScalarType> dtypes) {
  KernelKey key;
  key.op = op;
  key.arg_count = static_cast<uint8_t>(dtypes.size());
  int i = 0;
  for (ScalarType t : dtypes) key.dtypes[i++] = t;
  return key;
}

TEST(RegisterReferenceTest, RegistersOptionalInputForms) {
  auto registry = std::make_unique<KernelRegistry>();
  ASSERT_TRUE(kernels::register_reference_kernels(*registry).is_ok());
  constexpr ScalarType F = ScalarType::F32, X = ScalarType::Invalid;
  EXPECT_NE(registry->find(make_key(OpCode::Linear, {F, F, F, F})), nullptr);
  EXPECT_NE(registry->find(make_key(OpCode::Linear, {F, F, X, F})), nullptr);
  EXPECT_NE(registry->find(make_key(OpCode::Conv2d, {F, F, X, F})), nullptr);
  EXPECT_NE(registry->find(make_key(OpCode::LayerNorm, {F, X, X, F})), nullptr);
  EXPECT_NE(registry->find(make_key(OpCode::LayerNorm, {F, X, F, F})), nullptr);
  EXPECT_NE(registry->find(make_key(OpCode::LayerNorm, {F, F, X, F})), nullptr);
  EXPECT_EQ(registry->find(make_key(OpCode::Add, {F, ScalarType::F16, F})), nullptr);
  EXPECT_EQ(registry->find(make_key(OpCode::Reshape, {ScalarType::F4E2M1, ScalarType::F4E2M1})),
            nullptr);
  for (ScalarType t :
       {ScalarType::BF16, ScalarType::F8E4M3FN, ScalarType::UE4M3, ScalarType::Bool}) {
    EXPECT_NE(registry->find(make_key(OpCode::Transpose, {t, t})), nullptr) << to_string(t);
    KernelKey concat;
    concat.op = OpCode::Concat;
    concat.arg_count = 16;
    for (int i = 0; i < 16; ++i) concat.dtypes[i] = t;
    EXPECT_NE(registry->find(concat), nullptr) << to_string(t);
  }
  for (size_t i = 0; i < registry->size(); ++i) {
    EXPECT_STREQ(registry->entry(i).library, "reference");
  }
}

TEST(RegisterReferenceTest, OnlyMissingSkipsPresentKeys) {
  auto registry = std::make_unique<KernelRegistry>();
  ASSERT_TRUE(kernels::register_reference_kernels(*registry).is_ok());
  const size_t count = registry->size();
  EXPECT_EQ(kernels::register_reference_kernels(*registry).code(), Error::InvalidArgument);
  EXPECT_TRUE(kernels::register_reference_kernels(*registry, /*only_missing=*/true).is_ok());
  EXPECT_EQ(registry->size(), count);
}

TEST(ReferenceKernelTest, ReshapeInPlace) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  TensorView in;
  in.data = data;
  in.dtype = ScalarType::F32;
  in.rank = 2;
  in.dims[0] = 2;
  in.dims[1] = 3;
  TensorView out = in;
  out.rank = 1;
  out.dims[0] = 6;
  KernelContext ctx;
  OpAttrs attrs;
  kernels::reference::reshape(ctx, attrs, &in, 1, &out, 1);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(data[i], static_cast<float>(i + 1));
}

TEST(ReferenceKernelTest, MaxPoolPropagatesNan) {
  float data[4] = {1.0f, NAN, 3.0f, 2.0f};
  float result = 0.0f;
  TensorView in;
  in.data = data;
  in.dtype = ScalarType::F32;
  in.rank = 4;
  in.dims[0] = in.dims[1] = 1;
  in.dims[2] = in.dims[3] = 2;
  TensorView out = in;
  out.data = &result;
  out.dims[2] = out.dims[3] = 1;
  OpAttrs attrs;
  attrs.kernel[0] = attrs.kernel[1] = 2;
  attrs.stride[0] = attrs.stride[1] = 2;
  KernelContext ctx;
  kernels::reference::max_pool2d(ctx, attrs, &in, 1, &out, 1);
  EXPECT_TRUE(std::isnan(result));
}

// conv2d's output clamp (the exporter's fused relu / clip): after the bias, on the f32 result, with
// clip's selects: NaN stays NaN, ±inf is clamped, min == max gives that value.
TEST(ReferenceKernelTest, Conv2dOutputClampIsClipAfterTheBias) {
  const float inf = std::numeric_limits<float>::infinity();
  // A 1x1 conv of weight 2 and bias 0.5 over one row: y = 2 x + 0.5.
  float x[6] = {-3.0f, 1.0f, NAN, inf, 5.0f, -inf};
  float w = 2.0f, b = 0.5f, y[6] = {};
  TensorView in[3];
  in[0].data = x;
  in[0].dtype = ScalarType::F32;
  in[0].rank = 4;
  in[0].dims[0] = in[0].dims[1] = in[0].dims[2] = 1;
  in[0].dims[3] = 6;
  in[1] = in[0];
  in[1].data = &w;
  in[1].dims[3] = 1;
  in[2].data = &b;
  in[2].dtype = ScalarType::F32;
  in[2].rank = 1;
  in[2].dims[0] = 1;
  TensorView out = in[0];
  out.data = y;
  KernelContext ctx;
  struct Case {
    float lo, hi;
    float expected[6];
  } cases[] = {
      {-inf, inf, {-5.5f, 2.5f, NAN, inf, 10.5f, -inf}},  // no clamp
      {0.0f, inf, {0.0f, 2.5f, NAN, inf, 10.5f, 0.0f}},   // relu
      {0.0f, 6.0f, {0.0f, 2.5f, NAN, 6.0f, 6.0f, 0.0f}},  // relu6
      {-1.0f, 2.0f, {-1.0f, 2.0f, NAN, 2.0f, 2.0f, -1.0f}},
      {3.0f, 3.0f, {3.0f, 3.0f, NAN, 3.0f, 3.0f, 3.0f}},
  };
  for (const Case& c : cases) {
    OpAttrs attrs;
    attrs.kind = AttrKind::Conv2d;
    attrs.out_min = c.lo;
    attrs.out_max = c.hi;
    EXPECT_EQ(conv2d_has_clamp(attrs), c.lo != -inf || c.hi != inf);
    kernels::reference::conv2d(ctx, attrs, in, 3, &out, 1);
    for (int i = 0; i < 6; ++i) {
      if (std::isnan(c.expected[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << "clamp [" << c.lo << ", " << c.hi << "] element " << i << ": " << y[i];
      } else {
        EXPECT_EQ(y[i], c.expected[i]) << "clamp [" << c.lo << ", " << c.hi << "] element " << i;
      }
    }
  }
}

// The shape function refuses the bounds the validator refuses (kernels called directly: the
// exporter's evaluator), naming them.
TEST(ReferenceKernelTest, Conv2dOutputClampBoundsAreChecked) {
  const OpInfo* info = find_op_info(OpCode::Conv2d);
  ASSERT_NE(info, nullptr);
  TensorView in[2];
  for (TensorView& t : in) {
    t.dtype = ScalarType::F32;
    t.rank = 4;
    t.dims[0] = t.dims[1] = t.dims[2] = t.dims[3] = 1;
  }
  in[0].dims[2] = in[0].dims[3] = 4;
  const float bad[][2] = {{NAN, 1.0f}, {0.0f, NAN}, {2.0f, 1.0f}};
  for (const auto& b : bad) {
    OpAttrs attrs;
    attrs.out_min = b[0];
    attrs.out_max = b[1];
    TensorView out;
    ErrorContext ctx;
    const Status s = info->shape(attrs, in, 2, &out, 1, Span<const int64_t>(), &ctx);
    EXPECT_EQ(s.code(), Error::InvalidArgument);
    EXPECT_NE(std::string(ctx.message).find("conv2d: output clamp ["), std::string::npos) << ctx.message;
  }
  OpAttrs ok;
  ok.out_min = ok.out_max = 1.0f;
  TensorView out;
  ErrorContext ctx;
  EXPECT_TRUE(info->shape(ok, in, 2, &out, 1, Span<const int64_t>(), &ctx).is_ok()) << ctx.message;
}

TEST(RegisterReferenceTest, RegistersImporterOps) {
  auto registry = std::make_unique<KernelRegistry>();
  ASSERT_TRUE(kernels::register_reference_kernels(*registry).is_ok());
  constexpr ScalarType F = ScalarType::F32, B = ScalarType::Bool, I32 = ScalarType::I32,
                       I64 = ScalarType::I64;
  for (OpCode op : {OpCode::Clip, OpCode::HardSigmoid, OpCode::HardSwish, OpCode::Erf,
                    OpCode::Sqrt, OpCode::Exp, OpCode::Neg, OpCode::ReduceMean, OpCode::ReduceSum}) {
    EXPECT_NE(registry->find(make_key(op, {F, F})), nullptr) << to_string(op);
  }
  EXPECT_NE(registry->find(make_key(OpCode::Pow, {F, F, F})), nullptr);
  EXPECT_NE(registry->find(make_key(OpCode::BatchNorm, {F, F, F, F, F, F})), nullptr);
  for (ScalarType t : {F, I32, I64, B}) {
    EXPECT_NE(registry->find(make_key(OpCode::Equal, {t, t, B})), nullptr) << to_string(t);
  }
  const ScalarType cast_types[] = {F,  ScalarType::F16, ScalarType::BF16, ScalarType::I8,
                                   ScalarType::U8, ScalarType::I16, I32, I64, B};
  for (ScalarType from : cast_types) {
    EXPECT_NE(registry->find(make_key(OpCode::Pad, {from, from})), nullptr) << to_string(from);
    for (ScalarType to : cast_types) {
      EXPECT_NE(registry->find(make_key(OpCode::Cast, {from, to})), nullptr)
          << to_string(from) << " -> " << to_string(to);
    }
  }
  for (ScalarType t : {F, ScalarType::BF16, ScalarType::F8E4M3FN, ScalarType::UE4M3, B, I64}) {
    EXPECT_NE(registry->find(make_key(OpCode::Where, {B, t, t, t})), nullptr) << to_string(t);
    EXPECT_NE(registry->find(make_key(OpCode::Expand, {t, t})), nullptr) << to_string(t);
    EXPECT_NE(registry->find(make_key(OpCode::Gather, {t, I32, t})), nullptr) << to_string(t);
    EXPECT_NE(registry->find(make_key(OpCode::Gather, {t, I64, t})), nullptr) << to_string(t);
  }
  EXPECT_EQ(registry->find(make_key(OpCode::Where, {ScalarType::U8, F, F, F})), nullptr);
  EXPECT_EQ(registry->find(make_key(OpCode::Pad, {ScalarType::F8E4M3FN, ScalarType::F8E4M3FN})),
            nullptr);
  EXPECT_EQ(registry->find(make_key(OpCode::Equal, {F, F, F})), nullptr);
}

TensorView view(void* data, ScalarType dtype, std::initializer_list<int64_t> dims) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<uint8_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) v.dims[i++] = d;
  return v;
}

uint32_t bits_of_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// bf16 has no numpy dtype, so its conversions are checked here.
TEST(ReferenceKernelTest, CastToBf16RoundsToNearestEven) {
  const float in[] = {1.0f,        1.00390625f, 1.01171875f, -2.5f,    3.4028235e38f,
                      -0.0f,       NAN,         INFINITY,    1e-40f,   65504.0f};
  const uint16_t want[] = {0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80,
                           0x8000, 0,      0x7F80, 0x0001, 0x4780};
  uint16_t out[10] = {0};
  TensorView x = view(const_cast<float*>(in), ScalarType::F32, {10});
  TensorView y = view(out, ScalarType::BF16, {10});
  OpAttrs attrs;
  attrs.cast_to = ScalarType::BF16;
  KernelContext ctx;
  kernels::reference::cast(ctx, attrs, &x, 1, &y, 1);
  for (int i = 0; i < 10; ++i) {
    if (i == 6) {
      EXPECT_EQ(out[i] & 0x7F80, 0x7F80);  // NaN stays NaN
      EXPECT_NE(out[i] & 0x007F, 0);
      continue;
    }
    EXPECT_EQ(out[i], want[i]) << i;
  }
  // And back: bf16 -> f32 is exact, bf16 -> i32 truncates.
  float back[10];
  TensorView z = view(back, ScalarType::F32, {10});
  attrs.cast_to = ScalarType::F32;
  kernels::reference::cast(ctx, attrs, &y, 1, &z, 1);
  EXPECT_EQ(back[2], 1.015625f);
  EXPECT_EQ(back[3], -2.5f);
  EXPECT_TRUE(std::isnan(back[6]));
  int32_t ints[10];
  TensorView w = view(ints, ScalarType::I32, {10});
  attrs.cast_to = ScalarType::I32;
  kernels::reference::cast(ctx, attrs, &y, 1, &w, 1);
  EXPECT_EQ(ints[3], -2);
  EXPECT_EQ(ints[4], std::numeric_limits<int32_t>::max());  // inf saturates
  EXPECT_EQ(ints[6], 0);                                     // NaN -> 0
  EXPECT_EQ(ints[9], 65536);  // 65504 rounds up to 2^16 in bf16
}

// int64 -> bf16 must round once: 2^40 + 2^32 + 1 is just above the midpoint between bf16
// neighbours 2^40 and 2^40 + 2^33, though an f32 intermediate would land exactly on it.
TEST(ReferenceKernelTest, CastFromInt64RoundsOnce) {
  const int64_t in[] = {(1ll << 40) + (1ll << 32) + 1, (1ll << 40) + (1ll << 32),
                        -((1ll << 40) + (1ll << 32) + 1), (1ll << 24) + 1,
                        std::numeric_limits<int64_t>::min()};
  uint16_t bf[5], hf[5];
  TensorView x = view(const_cast<int64_t*>(in), ScalarType::I64, {5});
  TensorView yb = view(bf, ScalarType::BF16, {5});
  TensorView yh = view(hf, ScalarType::F16, {5});
  OpAttrs attrs;
  KernelContext ctx;
  attrs.cast_to = ScalarType::BF16;
  kernels::reference::cast(ctx, attrs, &x, 1, &yb, 1);
  attrs.cast_to = ScalarType::F16;
  kernels::reference::cast(ctx, attrs, &x, 1, &yh, 1);
  EXPECT_EQ(bf[0], 0x5381);  // up
  EXPECT_EQ(bf[1], 0x5380);  // tie to even
  EXPECT_EQ(bf[2], 0xD381);
  EXPECT_EQ(bf[4], static_cast<uint16_t>(bits_of_float(-9.223372036854775808e18f) >> 16));
  EXPECT_EQ(hf[3], 0x7C00);  // beyond f16's range: inf
  EXPECT_EQ(hf[4], 0xFC00);
}

// Out-of-range gather indices cannot fail at run time; they produce zero slices.
TEST(ReferenceKernelTest, GatherOutOfRangeWritesZeros) {
  const float data[6] = {1, 2, 3, 4, 5, 6};  // [3, 2]
  const int64_t idx[4] = {-1, 3, std::numeric_limits<int64_t>::min(), -4};
  float out[8];
  std::memset(out, 0xA5, sizeof(out));
  TensorView in[2] = {view(const_cast<float*>(data), ScalarType::F32, {3, 2}),
                      view(const_cast<int64_t*>(idx), ScalarType::I64, {4})};
  TensorView y = view(out, ScalarType::F32, {4, 2});
  OpAttrs attrs;
  KernelContext ctx;
  kernels::reference::gather(ctx, attrs, in, 2, &y, 1);
  const float want[8] = {5, 6, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

// Hostile but valid pads (begin INT64_MIN + ...): the kernel's index arithmetic must not overflow.
TEST(ReferenceKernelTest, PadWithExtremePads) {
  const float data[3] = {1, 2, 3};
  float out[2] = {0, 0};
  TensorView x = view(const_cast<float*>(data), ScalarType::F32, {3});
  OpAttrs attrs;
  attrs.count = 1;
  attrs.pads[0] = std::numeric_limits<int64_t>::min();
  attrs.pads[1] = std::numeric_limits<int64_t>::max();
  attrs.pad_value = 9.0f;
  TensorView y;
  ErrorContext ectx;
  ASSERT_TRUE(find_op_info(OpCode::Pad)->shape(attrs, &x, 1, &y, 1, {}, &ectx).is_ok())
      << ectx.message;
  ASSERT_EQ(y.dims[0], 2);
  y.data = out;
  KernelContext ctx;
  kernels::reference::pad(ctx, attrs, &x, 1, &y, 1);
  EXPECT_EQ(out[0], 9.0f);
  EXPECT_EQ(out[1], 9.0f);
  attrs.pads[0] = -2;
  attrs.pads[1] = 1;
  attrs.pad_mode = PadMode::Edge;
  ASSERT_TRUE(find_op_info(OpCode::Pad)->shape(attrs, &x, 1, &y, 1, {}, &ectx).is_ok());
  y.data = out;
  kernels::reference::pad(ctx, attrs, &x, 1, &y, 1);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], 3.0f);
}

TEST(ReferenceKernelTest, WhereInPlace) {
  uint8_t cond[4] = {1, 0, 0, 1};
  float x[4] = {1, 2, 3, 4};
  const float y[4] = {10, 20, 30, 40};
  TensorView in[3] = {view(cond, ScalarType::Bool, {4}), view(x, ScalarType::F32, {4}),
                      view(const_cast<float*>(y), ScalarType::F32, {4})};
  TensorView out = in[1];
  OpAttrs attrs;
  KernelContext ctx;
  kernels::reference::where(ctx, attrs, in, 3, &out, 1);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 20.0f);
  EXPECT_EQ(x[2], 30.0f);
  EXPECT_EQ(x[3], 4.0f);
}

}  // namespace
}  // namespace ember
