#include "exporter/passes/batch_norm_folding.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "exporter/passes/constant_folding.h"

namespace ember::exporter {
namespace {

std::vector<float> f32_data(const Value& v) {
  std::vector<float> out(v.data->size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), v.data->data(), out.size() * sizeof(float));
  return out;
}

bool is_f32_constant(const Graph& graph, int id) {
  return id >= 0 && graph.values[static_cast<size_t>(id)].is_constant() &&
         graph.values[static_cast<size_t>(id)].dtype == ScalarType::F32;
}

int add_f32_constant(Graph& graph, const std::string& name, std::vector<Dim> dims, const std::vector<float>& data) {
  Value v;
  std::string unique = name;
  for (int i = 1; graph.find_value(unique) >= 0; ++i) unique = name + "." + std::to_string(i);
  v.name = unique;
  v.dtype = ScalarType::F32;
  v.dims = std::move(dims);
  auto bytes = std::make_shared<std::vector<uint8_t>>(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(bytes->data(), data.data(), bytes->size());
  v.data = std::move(bytes);
  return graph.add_value(std::move(v));
}

}  // namespace

bool batch_norm_params(const Graph& graph, const Node& node, BatchNormParams* out) {
  if (node.inputs.size() != 5) return false;
  std::vector<double>* dst[4] = {&out->scale, &out->bias, &out->mean, &out->var};
  int64_t channels = -1;
  for (int i = 0; i < 4; ++i) {
    const int id = node.inputs[static_cast<size_t>(i) + 1];
    if (!is_f32_constant(graph, id)) return false;
    const Value& v = graph.values[static_cast<size_t>(id)];
    if (v.dims.size() != 1) return false;
    if (channels >= 0 && v.dims[0].max != channels) return false;
    channels = v.dims[0].max;
    const std::vector<float> data = f32_data(v);
    dst[i]->assign(data.begin(), data.end());
  }
  out->epsilon = node.attrs.epsilon;
  return true;
}

bool fold_batch_norm_into(Graph& graph, int producer, const BatchNormParams& p) {
  if (producer < 0 || static_cast<size_t>(producer) >= graph.nodes.size()) return false;
  const Node& node = graph.nodes[static_cast<size_t>(producer)];
  if (node.op != OpCode::Conv2d && node.op != OpCode::Linear) return false;
  if (node.inputs.size() < 2 || node.outputs.size() != 1) return false;
  const int w_id = node.inputs[1];
  const int b_id = node.inputs.size() > 2 ? node.inputs[2] : -1;
  if (!is_f32_constant(graph, w_id) || (b_id >= 0 && !is_f32_constant(graph, b_id))) return false;
  const Value& out = graph.values[static_cast<size_t>(node.outputs[0])];
  // Channel axis 1 of the output: conv2d [N, O, H, W]; linear only when its output is [M, N].
  if (out.dims.size() < 2 || (node.op == OpCode::Linear && out.dims.size() != 2)) return false;
  const Value& w = graph.values[static_cast<size_t>(w_id)];
  if (w.dims.empty()) return false;
  const int64_t channels = w.dims[0].max;
  if (out.dims[1].sym != 0 || out.dims[1].max != channels) return false;
  const size_t c = static_cast<size_t>(channels);
  if (p.scale.size() != c || p.bias.size() != c || p.mean.size() != c || p.var.size() != c) return false;
  if (b_id >= 0) {
    const Value& b = graph.values[static_cast<size_t>(b_id)];
    if (b.dims.size() != 1 || b.dims[0].max != channels) return false;
  }

  const std::vector<float> weight = f32_data(w);
  const std::vector<float> bias = b_id >= 0 ? f32_data(graph.values[static_cast<size_t>(b_id)]) : std::vector<float>(c, 0.0f);
  const size_t per_channel = c == 0 ? 0 : weight.size() / c;
  std::vector<float> new_w(weight.size()), new_b(c);
  for (size_t o = 0; o < c; ++o) {
    const double denom = std::sqrt(p.var[o] + p.epsilon);
    if (!(denom > 0.0)) {
      throw ExportError("batch norm folding into '" + node.name + "': var + epsilon <= 0 for channel " + std::to_string(o));
    }
    const double s = p.scale[o] / denom;
    for (size_t k = 0; k < per_channel; ++k) {
      new_w[o * per_channel + k] = static_cast<float>(static_cast<double>(weight[o * per_channel + k]) * s);
    }
    new_b[o] = static_cast<float>((static_cast<double>(bias[o]) - p.mean[o]) * s + p.bias[o]);
  }
  const std::string base = node.name;
  const std::vector<Dim> w_dims = w.dims;
  const int new_w_id = add_f32_constant(graph, base + ".weight_bn", w_dims, new_w);
  const int new_b_id = add_f32_constant(graph, base + ".bias_bn", {Dim{channels, 0}}, new_b);
  Node& target = graph.nodes[static_cast<size_t>(producer)];  // graph.values grew; nodes did not
  target.inputs[1] = new_w_id;
  if (target.inputs.size() < 3) target.inputs.resize(3, -1);
  target.inputs[2] = new_b_id;
  return true;
}

int fold_batch_norms(Graph& graph) {
  int folded = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& bn = graph.nodes[n];
    if (bn.op != OpCode::BatchNorm || bn.inputs.empty() || bn.outputs.size() != 1) continue;
    const int x = bn.inputs[0];
    if (x < 0 || graph.is_output(x)) continue;
    const int producer = graph.values[static_cast<size_t>(x)].producer;
    if (producer < 0) continue;
    const auto users = graph.users();
    if (users[static_cast<size_t>(x)].size() != 1) continue;
    BatchNormParams params;
    if (!batch_norm_params(graph, bn, &params)) continue;
    if (!fold_batch_norm_into(graph, producer, params)) continue;
    const int y = graph.nodes[n].outputs[0];
    for (Node& other : graph.nodes) {
      for (int& in : other.inputs) {
        if (in == y) in = x;
      }
    }
    for (NamedValue& nv : graph.outputs) {
      if (nv.value == y) nv.value = x;
    }
    ++folded;
  }
  if (folded > 0) remove_dead_code(graph);
  return folded;
}

}  // namespace ember::exporter
