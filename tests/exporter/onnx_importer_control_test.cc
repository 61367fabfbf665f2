// The ONNX importer's control flow (issue 17): an If whose condition is known at export (a shape
// comparison, a constant, an input bound with --input-value) is replaced by the branch it takes;
// one whose condition is computed at run time is refused with what to do.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "exporter/importers/onnx/onnx_importer.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_i;
using testing::const_i64;
using testing::count_ops;
using testing::import_error;
using testing::kFloat;
using testing::OnnxModel;
using testing::run1;

// then: y = Relu(x); else: y = Neg(x) + c (c an initializer of the branch).
void add_if(OnnxModel& m, const std::string& cond, const std::string& out, const std::string& name) {
  onnx::NodeProto& n = m.node("If", {cond}, {out}, name);
  auto* then_attr = n.add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* then_g = then_attr->mutable_g();
  then_g->set_name(name + "_then");
  auto* relu = then_g->add_node();
  relu->set_op_type("Relu");
  relu->set_name(name + "/relu");
  relu->add_input("x");  // outer-scope name
  relu->add_output(name + "_t");
  then_g->add_output()->set_name(name + "_t");
  auto* else_attr = n.add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* else_g = else_attr->mutable_g();
  else_g->set_name(name + "_else");
  onnx::TensorProto* c = else_g->add_initializer();
  c->set_name(name + "_c");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_float_data(10.0f);
  auto* neg = else_g->add_node();
  neg->set_op_type("Neg");
  neg->set_name(name + "/neg");
  neg->add_input("x");
  neg->add_output(name + "_n");
  auto* add = else_g->add_node();
  add->set_op_type("Add");
  add->set_name(name + "/add");
  add->add_input(name + "_n");
  add->add_input(name + "_c");
  add->add_output(name + "_e");
  else_g->add_output()->set_name(name + "_e");
}

OnnxImport import_with(OnnxModel& m, const std::vector<std::string>& values) {
  OnnxImportOptions options;
  for (const std::string& v : values) options.input_values.push_back(parse_input_value(v));
  return import_onnx_bytes(m.bytes(), ".", options);
}

std::string import_with_error(OnnxModel& m, const std::vector<std::string>& values) {
  try {
    import_with(m, values);
  } catch (const ExportError& e) {
    return e.what();
  }
  return "";
}

HostTensor f32(const std::vector<float>& v) {
  HostTensor t;
  t.dtype = ScalarType::F32;
  t.dims = {static_cast<int64_t>(v.size())};
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// if flag == 1: relu(x) else 10 - x, with `flag` an int64 scalar input.
OnnxModel flag_model() {
  OnnxModel m(16);
  m.input("x", kFloat, {"3"});
  m.input("flag", onnx::TensorProto::INT64, {});
  const_i64(m, "one", {1}, /*scalar=*/true);
  m.node("Equal", {"flag", "one"}, {"cond"}, "eq");
  add_if(m, "cond", "y", "if0");
  m.output("y");
  return m;
}

// A condition computed at run time: both branches run and a where selects each output, so both
// flag values give the taken branch's values exactly.
TEST(OnnxControlFlowTest, RunTimeConditionSelectsBetweenBothBranches) {
  OnnxModel m = flag_model();
  const OnnxImport r = import_with(m, {});
  EXPECT_EQ(r.stats.selected_ifs, 1);
  EXPECT_EQ(r.stats.folded_ifs, 0);
  ASSERT_EQ(r.graph.inputs.size(), 2u);
  EXPECT_EQ(count_ops(r.graph, OpCode::Where), 1);
  EXPECT_EQ(count_ops(r.graph, OpCode::Relu), 1);
  EXPECT_EQ(count_ops(r.graph, OpCode::Neg), 1);
  for (const int64_t flag : {1, 0, 7}) {
    HostTensor f;
    f.dtype = ScalarType::I64;
    f.bytes.resize(8);
    std::memcpy(f.bytes.data(), &flag, 8);
    const std::vector<float> y = run1(r.graph, {f32({-2.0f, 0.5f, 3.0f}), f});
    const std::vector<float> want = flag == 1 ? std::vector<float>{0.0f, 0.5f, 3.0f}
                                              : std::vector<float>{12.0f, 9.5f, 7.0f};
    EXPECT_EQ(y, want) << "flag " << flag;
  }
}

// Branches whose outputs differ in dims cannot be selected element by element.
TEST(OnnxControlFlowTest, RunTimeConditionNeedsBranchesOfTheSameShape) {
  OnnxModel m(16);
  m.input("x", kFloat, {"3"});
  m.input("c", onnx::TensorProto::BOOL, {});
  onnx::NodeProto& n = m.node("If", {"c"}, {"y"}, "if_shapes");
  for (const char* which : {"then_branch", "else_branch"}) {
    auto* a = n.add_attribute();
    a->set_name(which);
    a->set_type(onnx::AttributeProto::GRAPH);
    const std::string out = std::string(which) + "_out";
    if (std::string(which) == "then_branch") {
      auto* id = a->mutable_g()->add_node();
      id->set_op_type("Identity");
      id->add_input("x");
      id->add_output(out);
    } else {
      onnx::TensorProto* t = a->mutable_g()->add_initializer();
      t->set_name("two");
      t->set_data_type(onnx::TensorProto::FLOAT);
      t->add_dims(2);
      t->add_float_data(1.0f);
      t->add_float_data(2.0f);
      auto* id = a->mutable_g()->add_node();
      id->set_op_type("Relu");
      id->add_input("two");
      id->add_output(out);
    }
    a->mutable_g()->add_output()->set_name(out);
  }
  m.output("y");
  EXPECT_EQ(import_error(m),
            "onnx: If node 'if_shapes' (opset 16): output 0: the branches' dims differ at dim 0 (a run-time If "
            "needs the same dims)");
}

TEST(OnnxControlFlowTest, InputValueTakesTheBranchAtExport) {
  for (const int flag : {1, 0}) {
    OnnxModel m = flag_model();
    const OnnxImport r = import_with(m, {"flag=" + std::to_string(flag)});
    ASSERT_EQ(r.graph.inputs.size(), 1u);  // flag is no longer an input
    EXPECT_EQ(r.graph.inputs[0].name, "x");
    EXPECT_EQ(r.stats.folded_ifs, 1);
    EXPECT_EQ(r.stats.bound_inputs, 1);
    EXPECT_EQ(count_ops(r.graph, OpCode::Relu), flag == 1 ? 1 : 0);
    EXPECT_EQ(count_ops(r.graph, OpCode::Neg), flag == 1 ? 0 : 1);
    const std::vector<float> y = run1(r.graph, {f32({-2.0f, 0.5f, 3.0f})});
    const std::vector<float> want = flag == 1 ? std::vector<float>{0.0f, 0.5f, 3.0f}
                                              : std::vector<float>{12.0f, 9.5f, 7.0f};
    EXPECT_EQ(y, want) << "flag " << flag;
  }
}

TEST(OnnxControlFlowTest, ShapeConditionsAndNestedIfsFoldWithoutBinding) {
  // cond = Shape(x)[0] == 3 (known once x's shape is): then relu; the else branch holds an If too.
  OnnxModel m(16);
  m.input("x", kFloat, {"3"});
  m.node("Shape", {"x"}, {"s"}, "shape");
  const_i64(m, "three", {3});
  m.node("Equal", {"s", "three"}, {"eq1"}, "eq");
  const_i64(m, "zero", {0}, /*scalar=*/true);
  m.node("Squeeze", {"eq1", "zero"}, {"cond"}, "squeeze");
  add_if(m, "cond", "y", "outer");
  m.output("y");
  const OnnxImport r = import_with(m, {});
  EXPECT_EQ(r.stats.folded_ifs, 1);
  EXPECT_EQ(count_ops(r.graph, OpCode::Relu), 1);
  EXPECT_EQ(run1(r.graph, {f32({-1.0f, 2.0f, -3.0f})}), (std::vector<float>{0.0f, 2.0f, 0.0f}));

  // A nested If inside the taken branch is taken too.
  OnnxModel n(16);
  n.input("x", kFloat, {"3"});
  const_i64(n, "f", {0}, /*scalar=*/true);
  attr_i(n.node("Cast", {"f"}, {"cond"}, "cast"), "to", onnx::TensorProto::BOOL);
  onnx::NodeProto& outer = n.node("If", {"cond"}, {"y"}, "outer");
  auto* then_attr = outer.add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* id = then_attr->mutable_g()->add_node();
  id->set_op_type("Identity");
  id->add_input("x");
  id->add_output("t");
  then_attr->mutable_g()->add_output()->set_name("t");
  auto* else_attr = outer.add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  OnnxModel inner_holder(16);  // builds the inner If node, then moves it into the else branch
  inner_holder.input("x", kFloat, {"3"});
  add_if(inner_holder, "cond", "e", "inner");
  *else_attr->mutable_g()->add_node() = inner_holder.graph().node(0);
  else_attr->mutable_g()->add_output()->set_name("e");
  n.output("y");
  const OnnxImport rn = import_with(n, {});
  EXPECT_EQ(rn.stats.folded_ifs, 2);
  EXPECT_EQ(run1(rn.graph, {f32({-1.0f, 2.0f, 4.0f})}), (std::vector<float>{11.0f, 8.0f, 6.0f}));
}

TEST(OnnxControlFlowTest, InputValueErrorsNameTheTextAndTheInput) {
  OnnxModel m = flag_model();
  EXPECT_EQ(import_with_error(m, {"nope=1"}), "--input-value names input 'nope', but the model's inputs are: x, flag");
  EXPECT_EQ(import_with_error(m, {"flag=1.5"}),
            "--input-value 'flag=1.5': value 0 does not fit input 'flag' (i64)");
  EXPECT_EQ(import_with_error(m, {"flag=1,2"}), "--input-value 'flag=1,2': input 'flag' holds 1 elements, 2 value(s) given");
  for (const char* bad : {"flag", "=1", "flag=", "flag=x", "flag=1,,2", "flag=nan", "flag=inf"}) {
    EXPECT_THROW(parse_input_value(bad), ExportError) << bad;
  }
  EXPECT_EQ(parse_input_value("a=1,-2.5,3e2").values, (std::vector<double>{1.0, -2.5, 300.0}));
}

}  // namespace
}  // namespace ember::exporter
