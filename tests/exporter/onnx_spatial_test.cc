// ONNX Resize, ConvTranspose (1-D, 2-D) and 1-D Conv (issue 17): models from
// tests/exporter/data/onnx/make_spatial_models.py (onnx.helper for every mode and attribute, and
// torch.onnx.export of F.interpolate / ConvTranspose1d / ConvTranspose2d / Conv1d), imported and run
// on the reference evaluator, compared with onnxruntime 1.22's outputs; plus what is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "exporter/importers/onnx/onnx_importer.h"
#include "exporter/passes/evaluate.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

namespace fs = std::filesystem;
using testing::attr_f;
using testing::attr_i;
using testing::attr_ints;
using testing::attr_s;
using testing::import_error;
using testing::kFloat;
using testing::OnnxModel;

// Runs the model script once per test binary with the project venv (onnxruntime); "" on failure.
const std::string& spatial_models_dir() {
  static const std::string dir = [] {
    const fs::path out = fs::temp_directory_path() / ("ember_onnx_spatial_" + std::to_string(::getpid()));
    const std::string python = std::string(EMBER_EXPORTER_TEST_DIR) + "/../../.venv/bin/python";
    if (!fs::exists(python)) return std::string();
    const std::string cmd = python + " " + testing::test_data_path("onnx/make_spatial_models.py") + " " +
                            out.string() + " > " + out.string() + ".log 2>&1";
    if (std::system(cmd.c_str()) != 0) return std::string();
    return out.string();
  }();
  return dir;
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<int64_t> read_shape(const std::string& path) {
  std::ifstream in(path);
  std::vector<int64_t> dims;
  int64_t d;
  while (in >> d) dims.push_back(d);
  return dims;
}

TEST(OnnxSpatialTest, EveryCaseMatchesOnnxRuntime) {
  const std::string& dir = spatial_models_dir();
  ASSERT_FALSE(dir.empty()) << "make_spatial_models.py failed (needs .venv with onnxruntime; see its log in "
                            << fs::temp_directory_path().string() << ")";
  std::ifstream list(dir + "/cases.txt");
  std::string name;
  double tol = 0;
  int cases = 0, torch_cases = 0;
  while (list >> name >> tol) {
    SCOPED_TRACE(name);
    ++cases;
    torch_cases += name.rfind("torch_", 0) == 0;
    const std::string base = dir + "/" + name;
    OnnxImport imp;
    try {
      imp = import_onnx_file(base + ".onnx", OnnxImportOptions{});
    } catch (const ExportError& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    const std::vector<float> x = read_f32(base + ".input.bin"), expected = read_f32(base + ".output.bin");
    const std::vector<int64_t> out_dims = read_shape(base + ".output_shape.txt");
    const std::vector<HostTensor> out = evaluate(imp.graph, {HostTensor::from_f32(read_shape(base + ".input_shape.txt"), x)});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims, out_dims);
    const std::vector<float> actual = out[0].to_f32();
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      const bool ok = tol == 0 ? std::memcmp(&actual[i], &expected[i], 4) == 0
                               : std::fabs(actual[i] - expected[i]) <= tol * (1 + std::fabs(expected[i]));
      if (!ok) {
        ADD_FAILURE() << "first mismatch at " << i << ": " << actual[i] << " vs onnxruntime " << expected[i];
        break;
      }
    }
    // The ops land as themselves: resize / conv_transpose2d / conv2d, 1-D ones between reshapes.
    bool found = false;
    for (const Node& n : imp.graph.nodes) {
      found = found || n.op == OpCode::Resize || n.op == OpCode::ConvTranspose2d || n.op == OpCode::Conv2d;
    }
    EXPECT_TRUE(found);
  }
  EXPECT_GE(cases, 76);
  EXPECT_GE(torch_cases, 20) << "torch.onnx.export cases missing (python3-torch)";
}

// Resize to sizes = Shape(x) * [1, 1, 2, 2] on a symbolic height: scale 2 on that dim, the output
// height 2 * h at run time.
TEST(OnnxSpatialTest, ResizeSizesFromShapeArithmetic) {
  OnnxModel m(13);
  m.input("x", kFloat, {"1", "1", "h", "3"});
  m.node("Shape", {"x"}, {"shape"});
  m.init_i64("factor", {4}, {1, 1, 2, 2});
  m.node("Mul", {"shape", "factor"}, {"sizes"});
  onnx::NodeProto& r = m.node("Resize", {"x", "", "", "sizes"}, {"y"});
  attr_s(r, "mode", "nearest");
  m.output("y");
  const OnnxImport imp = testing::import_model(m, {"x=1x1xh:1..8x3"});
  const Node* resize = nullptr;
  for (const Node& n : imp.graph.nodes) resize = n.op == OpCode::Resize ? &n : resize;
  ASSERT_NE(resize, nullptr);
  EXPECT_EQ(resize->attrs.shape[2], -1);
  EXPECT_EQ(resize->attrs.resize_scales[2], 2.0f);
  EXPECT_EQ(resize->attrs.shape[3], 6);
  for (int64_t h : {1, 5}) {
    std::vector<float> x(static_cast<size_t>(h * 3));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
    const HostTensor y = evaluate(imp.graph, {HostTensor::from_f32({1, 1, h, 3}, x)})[0];
    ASSERT_EQ(y.dims, (std::vector<int64_t>{1, 1, 2 * h, 6}));
    const std::vector<float> v = y.to_f32();
    for (int64_t i = 0; i < 2 * h; ++i) {
      for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(v[static_cast<size_t>(i * 6 + j)], x[static_cast<size_t>(i / 2 * 3 + j / 2)]);
    }
  }
}

OnnxModel resize_model(const std::string& coord, const std::string& mode = "linear") {
  OnnxModel m(19);
  m.input("x", kFloat, {"1", "1", "4", "4"});
  m.init_f32("scales", {4}, {1, 1, 2, 2});
  onnx::NodeProto& r = m.node("Resize", {"x", "", "scales"}, {"y"}, "up");
  attr_s(r, "mode", mode);
  attr_s(r, "coordinate_transformation_mode", coord);
  m.output("y");
  return m;
}

TEST(OnnxSpatialTest, ResizeRefusals) {
  OnnxModel crop = resize_model("tf_crop_and_resize");
  EXPECT_NE(import_error(crop).find("Resize node 'up' (opset 19): coordinate_transformation_mode 'tf_crop_and_resize' is not supported"),
            std::string::npos)
      << import_error(crop);
  OnnxModel tf_nn = resize_model("tf_half_pixel_for_nn", "nearest");
  EXPECT_NE(import_error(tf_nn).find("'tf_half_pixel_for_nn' is not supported"), std::string::npos);
  OnnxModel aa = resize_model("half_pixel");
  attr_i(*aa.graph().mutable_node(0), "antialias", 1);
  EXPECT_NE(import_error(aa).find("attribute 'antialias' = 1 is not supported"), std::string::npos) << import_error(aa);
  OnnxModel bad_mode = resize_model("half_pixel", "bilinear");
  EXPECT_NE(import_error(bad_mode).find("attribute 'mode' = 'bilinear' is not supported"), std::string::npos);
  OnnxModel extra = resize_model("half_pixel");
  attr_f(*extra.graph().mutable_node(0), "sharpness", 1.0f);
  EXPECT_NE(import_error(extra).find("attribute 'sharpness' is not supported"), std::string::npos);

  OnnxModel policy(19);
  policy.input("x", kFloat, {"1", "1", "4", "4"});
  policy.init_i64("sizes", {4}, {1, 1, 8, 6});
  onnx::NodeProto& p = policy.node("Resize", {"x", "", "", "sizes"}, {"y"});
  attr_s(p, "keep_aspect_ratio_policy", "not_larger");
  policy.output("y");
  EXPECT_NE(import_error(policy).find("keep_aspect_ratio_policy 'not_larger' is not supported"), std::string::npos);

  OnnxModel runtime_scales(13);
  runtime_scales.input("x", kFloat, {"1", "1", "4", "4"});
  runtime_scales.input("s", kFloat, {"4"});
  runtime_scales.node("Resize", {"x", "", "s"}, {"y"});
  runtime_scales.output("y");
  EXPECT_NE(import_error(runtime_scales).find("scales (input 's') must be a constant"), std::string::npos);

  OnnxModel both(13);
  both.input("x", kFloat, {"1", "1", "4", "4"});
  both.init_f32("scales", {4}, {1, 1, 2, 2});
  both.init_i64("sizes", {4}, {1, 1, 8, 8});
  both.node("Resize", {"x", "", "scales", "sizes"}, {"y"});
  both.output("y");
  EXPECT_NE(import_error(both).find("has both scales and sizes"), std::string::npos);

  // A static size for a run-time dim: the scale would change with the input.
  OnnxModel fixed(13);
  fixed.input("x", kFloat, {"1", "1", "h", "4"});
  fixed.init_i64("sizes", {4}, {1, 1, 8, 8});
  fixed.node("Resize", {"x", "", "", "sizes"}, {"y"});
  fixed.output("y");
  EXPECT_NE(import_error(fixed, {"x=1x1xh:1..8x4"}).find("is not a constant multiple of the input dim h"), std::string::npos)
      << import_error(fixed, {"x=1x1xh:1..8x4"});

  OnnxModel wrong_count = resize_model("half_pixel");
  wrong_count.graph().mutable_initializer(0)->clear_raw_data();
  wrong_count.graph().mutable_initializer(0)->clear_dims();
  wrong_count.graph().mutable_initializer(0)->add_dims(2);
  for (float v : {2.0f, 2.0f}) wrong_count.graph().mutable_initializer(0)->add_float_data(v);
  EXPECT_NE(import_error(wrong_count).find("scales has 2 values for 4 axes"), std::string::npos) << import_error(wrong_count);
}

TEST(OnnxSpatialTest, ConvRefusals) {
  for (const char* op : {"Conv", "ConvTranspose"}) {
    OnnxModel m(13);
    m.input("x", kFloat, {"1", "2", "3", "4", "5"});
    m.init_f32("w", {2, 2, 1, 1, 1}, {1, 2, 3, 4});
    m.node(op, {"x", "w"}, {"y"}, "c3d");
    m.output("y");
    EXPECT_NE(import_error(m).find(std::string(op) + " node 'c3d' (opset 13): 3-D " + op +
                                   " (input rank 5) is not supported yet"),
              std::string::npos)
        << import_error(m);
  }
  auto conv_t = [](std::vector<std::pair<std::string, std::vector<int64_t>>> int_lists) {
    OnnxModel m(17);
    m.input("x", kFloat, {"1", "2", "3", "3"});
    m.init_f32("w", {2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    onnx::NodeProto& n = m.node("ConvTranspose", {"x", "w"}, {"y"});
    for (auto& [name, v] : int_lists) attr_ints(n, name, v);
    m.output("y");
    return m;
  };
  OnnxModel big = conv_t({{"strides", {2, 2}}, {"output_shape", {9, 7}}});
  EXPECT_NE(import_error(big).find("attribute 'output_shape' 9 is larger than the full output 6"), std::string::npos)
      << import_error(big);
  OnnxModel mixed = conv_t({{"output_shape", {3, 3}}, {"pads", {0, 0, 1, 1}}});
  EXPECT_NE(import_error(mixed).find("attribute 'pads' together with 'output_shape' is not supported"), std::string::npos)
      << import_error(mixed);
  OnnxModel neg = conv_t({{"output_padding", {-1, 0}}});
  EXPECT_NE(import_error(neg).find("attribute 'output_padding' value -1 is out of range"), std::string::npos);
  OnnxModel wrong = conv_t({{"strides", {2}}});
  EXPECT_NE(import_error(wrong).find("attribute 'strides' has 1 values; 2-D needs 2"), std::string::npos)
      << import_error(wrong);
  OnnxModel ks = conv_t({{"kernel_shape", {3, 3}}});
  EXPECT_NE(import_error(ks).find("'kernel_shape' does not match"), std::string::npos);
}

// 1-D Conv with a symbolic length stays symbolic through its reshapes.
TEST(OnnxSpatialTest, Conv1dSymbolicLength) {
  OnnxModel m(13);
  m.input("x", kFloat, {"1", "2", "len"});
  m.init_f32("w", {3, 2, 3}, testing::ramp(18));
  onnx::NodeProto& n = m.node("Conv", {"x", "w"}, {"y"});
  attr_ints(n, "pads", {1, 1});
  m.output("y");
  const OnnxImport imp = testing::import_model(m, {"x=1x2xlen:2..64"});
  const std::vector<float> w = testing::ramp(18);
  for (int64_t len : {2, 9}) {
    const std::vector<float> x = testing::ramp(static_cast<size_t>(2 * len), 1.0f, 3);
    const HostTensor y = evaluate(imp.graph, {HostTensor::from_f32({1, 2, len}, x)})[0];
    ASSERT_EQ(y.dims, (std::vector<int64_t>{1, 3, len}));
    std::vector<double> expected;
    for (int64_t o = 0; o < 3; ++o) {
      for (int64_t t = 0; t < len; ++t) {
        double acc = 0;
        for (int64_t c = 0; c < 2; ++c) {
          for (int64_t k = 0; k < 3; ++k) {
            const int64_t i = t - 1 + k;
            if (i >= 0 && i < len) acc += double(x[size_t(c * len + i)]) * w[size_t((o * 2 + c) * 3 + k)];
          }
        }
        expected.push_back(acc);
      }
    }
    testing::expect_close(y.to_f32(), expected);
  }
}

}  // namespace
}  // namespace ember::exporter
