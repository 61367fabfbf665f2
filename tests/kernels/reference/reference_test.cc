// Runs every golden case (tests/data/golden/manifest.txt, made by make_golden.py) through the
// reference kernel the registry finds for it, after computing the output shape with the op's shape
// function; also checks the registration itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

std::string golden_dir() {
  const char* root = std::getenv("EMBER_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/tests/data/golden/";
}

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
std::vector<GoldenCase> load_manifest() {
  std::vector<GoldenCase> cases;
  std::ifstream in(golden_dir() + "manifest.txt");
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
  static const std::vector<GoldenCase> cases = load_manifest();
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
    ok = ok && copy_ints("axes", attrs->axes, kMaxRank) &&
         copy_ints("starts", attrs->starts, kMaxRank) && copy_ints("ends", attrs->ends, kMaxRank) &&
         copy_ints("steps", attrs->steps, kMaxRank);
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

TEST_P(GoldenTest, MatchesNumpy) {
  const GoldenCase& c = GetParam();
  ASSERT_NE(c.name, "manifest_missing") << "cannot read " << golden_dir() << "manifest.txt";
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
    ASSERT_TRUE(tools::read_npy(golden_dir() + input_files[i], &arrays[i], &error)) << error;
    inputs[i] = view_of(arrays[i]);
  }
  NpyArray expected;
  ASSERT_TRUE(tools::read_npy(golden_dir() + c.fields.at("output"), &expected, &error)) << error;

  TensorView out;
  ErrorContext ctx;
  const Status shaped = info->shape(attrs, inputs.data(), inputs.size(), &out, 1,
                                    Span<const int64_t>(symbols.data(), symbols.size()), &ctx);
  ASSERT_TRUE(shaped.is_ok()) << "shape function failed: " << ctx.message;
  ASSERT_EQ(out.dtype, expected.dtype);
  ASSERT_EQ(out.rank, expected.dims.size());
  for (size_t i = 0; i < expected.dims.size(); ++i) {
    ASSERT_EQ(out.dims[i], expected.dims[i]) << "output dim " << i;
  }

  KernelKey key;
  key.op = op;
  key.arg_count = static_cast<uint8_t>(inputs.size() + 1);
  for (size_t i = 0; i < inputs.size(); ++i) key.dtypes[i] = inputs[i].dtype;
  key.dtypes[inputs.size()] = out.dtype;
  const KernelRegistry::Entry* entry = registry_->find(key);
  char key_text[256];
  ASSERT_NE(entry, nullptr) << "no kernel for " << format_key(key, key_text, sizeof(key_text));

  // Fill the output with a pattern so a kernel that skips elements cannot pass by accident.
  std::vector<uint8_t> buffer(out.nbytes() + 1, 0xA5);
  out.data = buffer.data();
  KernelContext kctx;
  entry->fn(kctx, attrs, inputs.data(), inputs.size(), &out, 1);

  ASSERT_EQ(out.nbytes(), expected.data.size());
  const double rtol = std::strtod(c.fields.at("rtol").c_str(), nullptr);
  const double atol = std::strtod(c.fields.at("atol").c_str(), nullptr);
  const uint64_t numel = out.numel();
  if (rtol == 0.0 && atol == 0.0) {
    const size_t elem = static_cast<size_t>(bits_of(out.dtype) / 8);
    for (uint64_t i = 0; i < numel; ++i) {
      if (std::memcmp(buffer.data() + i * elem, expected.data.data() + i * elem, elem) != 0) {
        FAIL() << "first mismatch at element " << i << " " << index_text(i, expected.dims)
               << " (bytes differ)";
      }
    }
    return;
  }
  ASSERT_EQ(out.dtype, ScalarType::F32);
  const float* actual = reinterpret_cast<const float*>(buffer.data());
  const float* want = reinterpret_cast<const float*>(expected.data.data());
  uint64_t mismatches = 0, first = 0;
  for (uint64_t i = 0; i < numel; ++i) {
    const double a = actual[i], e = want[i];
    const bool same =
        (std::isnan(a) && std::isnan(e)) || std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (!same && mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0u) << "first mismatch at element " << first << " "
                            << index_text(first, expected.dims) << ": got " << actual[first]
                            << ", expected " << want[first] << " (rtol " << rtol << ", atol "
                            << atol << ")";
}

INSTANTIATE_TEST_SUITE_P(Manifest, GoldenTest, ::testing::ValuesIn(manifest()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           return info.param.name;
                         });

TEST(GoldenManifestTest, CoversEveryOp) {
  bool seen[kOpCodeCount] = {false};
  for (const GoldenCase& c : manifest()) {
    if (c.fields.count("op")) seen[static_cast<int>(parse_op(c.fields.at("op")))] = true;
  }
  for (int i = 1; i < kOpCodeCount; ++i) {
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

}  // namespace
}  // namespace ember
