// The ONNX importer's input shapes (--input-shape specs) and symbols: dim_params, shape values
// computed through Shape/Gather/Concat/Reshape, and shape arithmetic folded at export.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "exporter/importers/onnx/input_shape.h"
#include "exporter/importers/onnx/onnx_importer.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_i;
using testing::attr_ints;
using testing::attr_t;
using testing::const_i64;
using testing::expect_close;
using testing::find_op;
using testing::import_error;
using testing::import_model;
using testing::kFloat;
using testing::OnnxModel;
using testing::ramp;
using testing::run1;

// ---- Input shapes -------------------------------------------------------------------------------

TEST(InputShapeTest, ParsesSizesSymbolsAndBareNames) {
  const InputShapeSpec a = parse_input_shape("input=batch:1..8x3x224x224");
  EXPECT_EQ(a.name, "input");
  ASSERT_EQ(a.dims.size(), 4u);
  EXPECT_EQ(a.dims[0].symbol, "batch");
  EXPECT_EQ(a.dims[0].min, 1);
  EXPECT_EQ(a.dims[0].max, 8);
  EXPECT_EQ(a.dims[3].size, 224);
  const InputShapeSpec b = parse_input_shape("x=1x3x224x224");
  EXPECT_EQ(b.dims[0].size, 1);
  const auto both = parse_input_shapes({"ids=batch:4xmax_len:2..128", "mask=batchxmax_len"});
  ASSERT_EQ(both[1].dims.size(), 2u);
  EXPECT_EQ(both[1].dims[0].symbol, "batch");
  EXPECT_EQ(both[1].dims[1].symbol, "max_len");
  EXPECT_EQ(both[0].dims[0].min, 1);
  for (const char* bad : {"noequals", "=3", "x=3x", "x=batch", "x=b:9..2", "x=3xq", "x=b:1..", "x=3y4"}) {
    EXPECT_THROW(parse_input_shape(bad), ExportError) << bad;
  }
  EXPECT_THROW(parse_input_shapes({"x=1", "x=2"}), ExportError);
}

// Issue 17: some exporters write dim_value -1 for a dim they do not know. It is an unknown dim, which
// --input-shape bounds (before, the spec was refused: "the model fixes it to -1").
TEST(InputShapeTest, NegativeDimValueIsAnUnknownDim) {
  OnnxModel m;
  m.input("x", kFloat, {"-1", "3"});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  EXPECT_EQ(import_error(m), "onnx: graph input 'x': dim 0 is unknown (dim_value -1); give its size or bounds, e.g. "
                             "--input-shape x=batch:1..8x...");
  const OnnxImport imported = import_model(m, {"x=batch:1..4x3"});
  ASSERT_EQ(imported.graph.inputs.size(), 1u);
  const Value& x = imported.graph.values[static_cast<size_t>(imported.graph.inputs[0].value)];
  ASSERT_EQ(x.dims.size(), 2u);
  EXPECT_EQ(x.dims[0].max, 4);
  EXPECT_NE(x.dims[0].sym, 0);
  EXPECT_EQ(x.dims[1].max, 3);
  EXPECT_EQ(import_error(m, {"x=2x3"}), "");
}

// ---- Symbols and shape values -------------------------------------------------------------------

TEST(OnnxImporterTest, SymbolicBatchThroughShapeGatherUnsqueezeConcatReshape) {
  OnnxModel m;
  m.input("x", kFloat, {"N", "3", "4", "4"});
  m.node("Shape", {"x"}, {"shape"}, "shape");
  const_i64(m, "zero", {0}, /*scalar=*/true);
  auto& gather = m.node("Gather", {"shape", "zero"}, {"n"}, "gather");
  attr_i(gather, "axis", 0);
  const_i64(m, "axes0", {0});
  m.node("Unsqueeze", {"n", "axes0"}, {"n1"}, "unsqueeze");
  const_i64(m, "minus1", {-1});
  auto& cat = m.node("Concat", {"n1", "minus1"}, {"target"}, "concat");
  attr_i(cat, "axis", 0);
  m.node("Reshape", {"x", "target"}, {"flat"}, "reshape");
  const auto w = ramp(2 * 48, 0.1f, 31);
  m.init_f32("w", {2, 48}, w);
  auto& gemm = m.node("Gemm", {"flat", "w"}, {"y"}, "fc");
  attr_i(gemm, "transB", 1);
  m.output("y");
  EXPECT_NE(import_error(m).find("--input-shape"), std::string::npos) << import_error(m);
  OnnxImport imp = import_model(m, {"x=batch:1..8x3x4x4"});
  const Node* reshape = find_op(imp.graph, OpCode::Reshape);
  ASSERT_NE(reshape, nullptr);
  const int batch = imp.graph.find_symbol("batch");
  ASSERT_NE(batch, 0);
  EXPECT_EQ(reshape->attrs.count, 2);
  EXPECT_EQ(reshape->attrs.shape_sym[0], batch);
  EXPECT_EQ(reshape->attrs.shape[1], -1);
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[batch<=8, 2]");
  for (int64_t n : {1, 2, 5}) {
    const auto xv = ramp(static_cast<size_t>(n * 48), 1.0f, 32);
    std::vector<double> ref(static_cast<size_t>(n * 2));
    for (int64_t i = 0; i < n; ++i)
      for (int j = 0; j < 2; ++j) {
        double acc = 0;
        for (int k = 0; k < 48; ++k) acc += static_cast<double>(xv[static_cast<size_t>(i * 48 + k)]) * w[static_cast<size_t>(j * 48 + k)];
        ref[static_cast<size_t>(i * 2 + j)] = acc;
      }
    expect_close(run1(imp.graph, {HostTensor::from_f32({n, 3, 4, 4}, xv)}), ref);
  }
}

// Hugging Face's `position_ids[:, :seq]`: a constant buffer sliced by the run-time length.
TEST(OnnxImporterTest, SliceOfAConstantByASymbolicEndStaysARunTimeSlice) {
  OnnxModel m(17);
  m.input("x", kFloat, {"B", "S"});
  std::vector<float> table(12);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.5f;
  m.init_f32("table", {1, 12}, table);
  m.node("Shape", {"x"}, {"shape"});
  const_i64(m, "one", {1}, /*scalar=*/true);
  auto& gather = m.node("Gather", {"shape", "one"}, {"s"});
  attr_i(gather, "axis", 0);
  const_i64(m, "axes0", {0});
  m.node("Unsqueeze", {"s", "axes0"}, {"end"});
  const_i64(m, "start", {0});
  const_i64(m, "axis1", {1});
  m.node("Slice", {"table", "start", "end", "axis1"}, {"pos"}, "slice_pos");
  m.node("Add", {"x", "pos"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m, {"x=batch:1..4xseq:1..12"});
  const Node* slice = find_op(imp.graph, OpCode::Slice);
  ASSERT_NE(slice, nullptr);
  const int seq = imp.graph.find_symbol("seq");
  ASSERT_NE(seq, 0);
  EXPECT_EQ(slice->attrs.ends_sym[0], seq);
  EXPECT_EQ(slice->attrs.ends[0], 12);
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[batch<=4, seq<=12]");
  for (int64_t b : {1, 3}) {
    for (int64_t s : {1, 7, 12}) {
      const auto xv = ramp(static_cast<size_t>(b * s), 1.0f, 5);
      std::vector<double> ref(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) ref[i] = xv[i] + table[i % static_cast<size_t>(s)];
      expect_close(run1(imp.graph, {HostTensor::from_f32({b, s}, xv)}), ref);
    }
  }
  // An end that is a product of symbols cannot be a Slice end.
  OnnxModel bad(17);
  bad.input("x", kFloat, {"B", "S"});
  bad.init_f32("table", {1, 12}, table);
  bad.node("Shape", {"x"}, {"shape"});
  const_i64(bad, "zero", {0}, /*scalar=*/true);
  const_i64(bad, "one", {1}, /*scalar=*/true);
  attr_i(bad.node("Gather", {"shape", "zero"}, {"b"}), "axis", 0);
  attr_i(bad.node("Gather", {"shape", "one"}, {"s"}), "axis", 0);
  bad.node("Mul", {"b", "s"}, {"bs"});
  const_i64(bad, "axes0", {0});
  bad.node("Unsqueeze", {"bs", "axes0"}, {"end"});
  const_i64(bad, "start", {0});
  const_i64(bad, "axis1", {1});
  bad.node("Slice", {"table", "start", "end", "axis1"}, {"y"}, "slice_bs");
  bad.output("y");
  const std::string err = import_error(bad, {"x=batch:1..4xseq:1..3"});
  EXPECT_NE(err.find("Slice node 'slice_bs'"), std::string::npos) << err;
  EXPECT_NE(err.find("batch*seq"), std::string::npos) << err;
}

TEST(OnnxImporterTest, TransformerStyleReshapeKeepsBothSymbols) {
  OnnxModel m;
  m.input("x", kFloat, {"B", "S", "8"});
  m.node("Shape", {"x"}, {"shape"});
  const_i64(m, "i0", {0}, true);
  const_i64(m, "i1", {1}, true);
  const_i64(m, "i2", {2}, true);
  m.node("Gather", {"shape", "i0"}, {"b"});
  m.node("Gather", {"shape", "i1"}, {"s"});
  m.node("Gather", {"shape", "i2"}, {"hidden"});
  const_i64(m, "heads", {2}, true);
  m.node("Div", {"hidden", "heads"}, {"head_dim"});
  const_i64(m, "ax", {0});
  m.node("Unsqueeze", {"b", "ax"}, {"b1"});
  m.node("Unsqueeze", {"s", "ax"}, {"s1"});
  m.node("Unsqueeze", {"heads", "ax"}, {"h1"});
  m.node("Unsqueeze", {"head_dim", "ax"}, {"d1"});
  auto& cat = m.node("Concat", {"b1", "s1", "h1", "d1"}, {"target"});
  attr_i(cat, "axis", 0);
  m.node("Reshape", {"x", "target"}, {"r"}, "split_heads");
  auto& tr = m.node("Transpose", {"r"}, {"t"});
  attr_ints(tr, "perm", {0, 2, 1, 3});
  // Merge back: [B, S, H*D] via Mul of shape values (B*S would be a product: use 0 and -1).
  const_i64(m, "merge", {0, 0, -1});
  auto& tr2 = m.node("Transpose", {"t"}, {"t2"});
  attr_ints(tr2, "perm", {0, 2, 1, 3});
  m.node("Reshape", {"t2", "merge"}, {"y"}, "merge_heads");
  m.output("y");
  OnnxImport imp = import_model(m, {"x=batch:1..4xseq:1..16x8"});
  const Value& t = imp.graph.values[static_cast<size_t>(imp.graph.find_value("t"))];
  EXPECT_EQ(format_dims(imp.graph, t.dims), "[batch<=4, 2, seq<=16, 4]");
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[batch<=4, seq<=16, 8]");
  const auto xv = ramp(3 * 5 * 8, 1.0f, 33);
  const auto out = run1(imp.graph, {HostTensor::from_f32({3, 5, 8}, xv)});
  expect_close(out, std::vector<double>(xv.begin(), xv.end()), 0);
}

TEST(OnnxImporterTest, FlattenAndSqueezeUnsqueezeWithSymbols) {
  OnnxModel m;
  m.input("x", kFloat, {"N", "3", "2", "2"});
  auto& fl = m.node("Flatten", {"x"}, {"f"});
  attr_i(fl, "axis", 1);
  const_i64(m, "ax", {1});
  m.node("Unsqueeze", {"f", "ax"}, {"u"});  // [N, 1, 12]
  m.node("Squeeze", {"u", "ax"}, {"y"});    // [N, 12]
  m.output("y");
  OnnxImport imp = import_model(m, {"x=n:2..6x3x2x2"});
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[n<=6, 12]");
  OnnxModel bad;
  bad.input("x", kFloat, {"N", "3"});
  bad.node("Squeeze", {"x"}, {"y"}, "sq");
  bad.output("y");
  EXPECT_NE(import_error(bad, {"x=n:1..4x3"}).find("ambiguous"), std::string::npos);
}

TEST(OnnxImporterTest, DimParamSharedByTwoInputsTakesOneSymbol) {
  OnnxModel m;
  m.input("a", kFloat, {"N", "4"});
  m.input("b", kFloat, {"N", "4"});
  m.node("Add", {"a", "b"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m, {"a=batch:1..3x4"});
  ASSERT_EQ(imp.graph.inputs.size(), 2u);
  const Value& b = imp.graph.values[static_cast<size_t>(imp.graph.inputs[1].value)];
  EXPECT_EQ(format_dims(imp.graph, b.dims), "[batch<=3, 4]");
  EXPECT_NE(import_error(m, {"a=1x5"}).find("fixes it to 4"), std::string::npos);
  EXPECT_NE(import_error(m, {"c=1x4"}).find("the model's inputs are: a, b"), std::string::npos);
}

TEST(OnnxImporterTest, ShapeArithmeticFoldsAtExport) {
  REQUIRE_OP(OpCode::Expand);
  // torch's x.expand(-1, 4, -1) pattern: Where(Equal(shape, -1), ones, shape) over shape values,
  // with ConstantOfShape, Range and a Shape slice (opset 15 start/end).
  OnnxModel m(15);
  m.input("x", kFloat, {"N", "1", "3"});
  const_i64(m, "target", {-1, 4, -1});
  const_i64(m, "len", {3});
  auto& cos = m.node("ConstantOfShape", {"len"}, {"ones"});
  onnx::TensorProto* v = attr_t(cos, "value");
  v->set_data_type(onnx::TensorProto::INT64);
  v->add_dims(1);
  v->add_int64_data(1);
  const_i64(m, "neg1", {-1}, true);
  m.node("Equal", {"target", "neg1"}, {"is_neg"});
  m.node("Where", {"is_neg", "ones", "target"}, {"shape"});
  m.node("Expand", {"x", "shape"}, {"e"}, "expand");
  // Range(0, 3, 1) as a Gather index list, and Shape(start=1) for a reshape target.
  const_i64(m, "r0", {0}, true);
  const_i64(m, "r1", {3}, true);
  const_i64(m, "r2", {1}, true);
  m.node("Range", {"r0", "r1", "r2"}, {"range"});
  auto& sh = m.node("Shape", {"e"}, {"tail"});
  attr_i(sh, "start", 1);
  m.node("ReduceProd", {"tail"}, {"inner"});  // keepdims=1 -> [12]
  m.node("Shape", {"e"}, {"all"});
  const_i64(m, "first", {0});
  m.node("Gather", {"all", "first"}, {"n"});
  auto& cat = m.node("Concat", {"n", "inner"}, {"target2"});
  attr_i(cat, "axis", 0);
  m.node("Reshape", {"e", "target2"}, {"y"}, "flatten");
  m.output("y");
  OnnxImport imp = import_model(m, {"x=batch:1..4x1x3"});
  const Node* expand = find_op(imp.graph, OpCode::Expand);
  ASSERT_NE(expand, nullptr);
  EXPECT_EQ(expand->attrs.count, 3);
  EXPECT_EQ(expand->attrs.shape_sym[0], imp.graph.find_symbol("batch"));
  EXPECT_EQ(expand->attrs.shape[1], 4);
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[batch<=4, 12]");
  const auto xv = ramp(6, 1.0f, 40);
  std::vector<double> ref;
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < 4; ++r)
      for (int k = 0; k < 3; ++k) ref.push_back(xv[static_cast<size_t>(b * 3 + k)]);
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 1, 3}, xv)}), ref, 0);
}

TEST(OnnxImporterTest, OpsetDependentAxesForms) {
  // Opset 11: Squeeze/Unsqueeze/ReduceSum axes are attributes; opset 18: ReduceMean axes is an input
  // and Split takes num_outputs.
  OnnxModel a(11);
  a.input("x", kFloat, {"2", "3"});
  auto& u = a.node("Unsqueeze", {"x"}, {"u"});
  attr_ints(u, "axes", {0});
  auto& sq = a.node("Squeeze", {"u"}, {"s"});
  attr_ints(sq, "axes", {0});
  auto& rs = a.node("ReduceSum", {"s"}, {"y"});
  attr_ints(rs, "axes", {1});
  attr_i(rs, "keepdims", 0);
  a.output("y");
  OnnxImport ia = import_model(a);
  expect_close(run1(ia.graph, {HostTensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})}), {6, 15});

  OnnxModel b(18);
  b.input("x", kFloat, {"2", "4"});
  auto& sp = b.node("Split", {"x"}, {"p", "q"});
  attr_i(sp, "axis", 1);
  attr_i(sp, "num_outputs", 2);
  const_i64(b, "ax", {1});
  b.node("ReduceMean", {"q", "ax"}, {"y"});
  b.output("y");
  OnnxImport ib = import_model(b);
  expect_close(run1(ib.graph, {HostTensor::from_f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}), {3.5, 7.5});
}

}  // namespace
}  // namespace ember::exporter
