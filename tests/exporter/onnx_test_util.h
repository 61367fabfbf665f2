// Building small ONNX models in C++ with the generated protobuf classes (no Python needed).
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "exporter/importers/onnx/onnx_importer.h"
#include "exporter/passes/evaluate.h"
#include "onnx.pb.h"

namespace ember::exporter::testing {

class OnnxModel {
 public:
  explicit OnnxModel(int64_t opset = 13) {
    model_.set_ir_version(8);
    model_.set_producer_name("ember-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    graph_ = model_.mutable_graph();
    graph_->set_name("test");
  }

  onnx::ModelProto& proto() { return model_; }
  onnx::GraphProto& graph() { return *graph_; }

  // dims: "3" = a static size, "batch" = dim_param, "?" = unknown.
  void input(const std::string& name, int32_t elem_type, const std::vector<std::string>& dims) {
    auto* vi = graph_->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const std::string& d : dims) {
      auto* dim = shape->add_dim();
      if (d == "?") continue;
      if (!d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) || d[0] == '-')) {
        dim->set_dim_value(std::stoll(d));
      } else {
        dim->set_dim_param(d);
      }
    }
  }
  void output(const std::string& name, int32_t elem_type = 1) {
    auto* vi = graph_->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
  }

  onnx::TensorProto* init_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& data,
                              bool raw = true) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    if (raw) {
      t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), data.size() * 4));
    } else {
      for (float v : data) t->add_float_data(v);
    }
    return t;
  }
  onnx::TensorProto* init_i64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& data) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : data) t->add_int64_data(v);
    return t;
  }

  onnx::NodeProto& node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& name = "") {
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(graph_->node_size()) : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }

  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
  onnx::GraphProto* graph_;
};

inline void attr_i(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr_f(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void attr_s(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void attr_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline onnx::TensorProto* attr_t(onnx::NodeProto& n, const std::string& name) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::TENSOR);
  return a->mutable_t();
}
// A Constant node holding an int64 vector.
inline void const_i64(OnnxModel& m, const std::string& out, const std::vector<int64_t>& v, bool scalar = false) {
  onnx::NodeProto& n = m.node("Constant", {}, {out}, "const_" + out);
  onnx::TensorProto* t = attr_t(n, "value");
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

inline OnnxImport import_model(OnnxModel& m, std::vector<std::string> shapes = {}, const std::string& dir = ".") {
  OnnxImportOptions options;
  options.input_shapes = parse_input_shapes(shapes);
  return import_onnx_bytes(m.bytes(), dir, options);
}

// Deterministic test data in [-1, 1).
inline std::vector<float> ramp(size_t n, float scale = 1.0f, uint32_t seed = 1) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / 8388608.0f - 1.0f);
  }
  return v;
}

inline std::vector<float> run1(const Graph& g, const std::vector<HostTensor>& inputs) {
  return evaluate(g, inputs).at(0).to_f32();
}

inline int count_ops(const Graph& g, OpCode op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == op;
  return n;
}

inline const Node* find_op(const Graph& g, OpCode op) {
  for (const Node& node : g.nodes) {
    if (node.op == op) return &node;
  }
  return nullptr;
}

}  // namespace ember::exporter::testing
