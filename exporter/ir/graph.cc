#include "exporter/ir/graph.h"

#include <algorithm>
#include <sstream>

#include "runtime/kernel/op_info.h"

namespace ember::exporter {

int Graph::add_value(Value value) {
  values.push_back(std::move(value));
  return static_cast<int>(values.size()) - 1;
}

int Graph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int Graph::find_symbol(const std::string& name) const {
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (symbols[i].name == name) return static_cast<int>(i) + 1;
  }
  return 0;
}

bool Graph::is_input(int value) const {
  return std::any_of(inputs.begin(), inputs.end(), [&](const NamedValue& nv) { return nv.value == value; });
}

bool Graph::is_output(int value) const {
  return std::any_of(outputs.begin(), outputs.end(), [&](const NamedValue& nv) { return nv.value == value; });
}

std::vector<std::vector<int>> Graph::users() const {
  std::vector<std::vector<int>> result(values.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int in : nodes[n].inputs) {
      if (in < 0) continue;
      auto& list = result[static_cast<size_t>(in)];
      if (list.empty() || list.back() != static_cast<int>(n)) list.push_back(static_cast<int>(n));
    }
  }
  return result;
}

void Graph::check_structure() const {
  const int count = static_cast<int>(values.size());
  std::vector<char> defined(values.size(), 0);
  for (const NamedValue& in : inputs) {
    if (in.value < 0 || in.value >= count) throw ExportError("graph input '" + in.name + "' has a bad value id");
    defined[static_cast<size_t>(in.value)] = 1;
  }
  for (int v = 0; v < count; ++v) {
    const Value& value = values[static_cast<size_t>(v)];
    if (value.is_state()) {
      if (value.is_constant() || value.quant || is_input(v)) {
        throw ExportError("state value '" + value.name + "' is also a constant or a graph input");
      }
      defined[static_cast<size_t>(v)] = 1;
    }
    if (value.is_constant()) {
      defined[static_cast<size_t>(v)] = 1;
      if (value.data->size() != nbytes_max(value)) {
        throw ExportError("constant '" + value.name + "' holds " + std::to_string(value.data->size()) +
                          " bytes, its shape needs " + std::to_string(nbytes_max(value)));
      }
    }
    if (value.quant) {
      const QuantParams& q = *value.quant;
      uint64_t scales = 1;
      for (int64_t d : q.scale_dims) scales *= static_cast<uint64_t>(d);
      if (!value.is_constant() || value.dims.size() != 2 || q.block.size() != 2 || q.scale_dims.size() != 2 || !q.scale ||
          q.scale->size() != nbytes_of(q.scale_dtype, scales)) {
        throw ExportError("quantized value '" + value.name + "' has inconsistent quantization parameters");
      }
    }
    for (const Dim& d : value.dims) {
      if (d.sym > symbols.size()) throw ExportError("value '" + value.name + "' names an unknown symbol");
    }
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const OpInfo* info = find_op_info(node.op);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int in = node.inputs[i];
      if (in == -1) continue;
      if (in < 0 || in >= count || !defined[static_cast<size_t>(in)]) {
        throw ExportError("node '" + node.name + "' reads a value that is not defined before it");
      }
      if (info != nullptr && i < 32 && (info->state_inputs >> i) & 1 && !values[static_cast<size_t>(in)].is_state()) {
        throw ExportError("node '" + node.name + "': input " + std::to_string(i) + " ('" +
                          values[static_cast<size_t>(in)].name + "') is written in place and must be program state");
      }
    }
    for (int out : node.outputs) {
      if (out < 0 || out >= count) throw ExportError("node '" + node.name + "' writes a bad value id");
      if (defined[static_cast<size_t>(out)]) {
        throw ExportError("value '" + values[static_cast<size_t>(out)].name + "' is written twice (node '" +
                          node.name + "')");
      }
      if (values[static_cast<size_t>(out)].is_state()) {
        throw ExportError("node '" + node.name + "' writes state value '" + values[static_cast<size_t>(out)].name +
                          "' as an output (state is written in place through OpInfo::state_inputs)");
      }
      defined[static_cast<size_t>(out)] = 1;
    }
  }
  for (const NamedValue& out : outputs) {
    if (out.value < 0 || out.value >= count || !defined[static_cast<size_t>(out.value)]) {
      throw ExportError("graph output '" + out.name + "' is never written");
    }
  }
}

uint64_t numel_max(const std::vector<Dim>& dims) {
  uint64_t n = 1;
  for (const Dim& d : dims) n *= static_cast<uint64_t>(d.max);
  return n;
}

QuantLayout quant_layout(const Value& value) {
  if (!value.quant || value.dims.size() != 2 || value.quant->block.size() != 2) return QuantLayout::None;
  return classify_quant(value.dtype, value.quant->scale_dtype, value.dims[0].max, value.dims[1].max,
                        value.quant->block[0], value.quant->block[1], value.quant->has_global_scale);
}

uint64_t nbytes_max(const Value& value) { return nbytes_of(value.dtype, numel_max(value.dims)); }

std::string format_dims(const Graph& graph, const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    const Dim& d = dims[i];
    if (d.sym != 0 && d.sym <= graph.symbols.size()) {
      s += graph.symbols[d.sym - 1u].name + "<=" + std::to_string(d.max);
    } else {
      s += std::to_string(d.max);
    }
  }
  return s + "]";
}

std::string format_value(const Graph& graph, int value) {
  if (value < 0) return "-";
  const Value& v = graph.values[static_cast<size_t>(value)];
  return v.name + ": " + to_string(v.dtype) + format_dims(graph, v.dims);
}

std::string format_node(const Graph& graph, int node) {
  const Node& n = graph.nodes[static_cast<size_t>(node)];
  std::string s = std::string(to_string(n.op)) + " '" + n.name + "' (";
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (i) s += ", ";
    s += format_value(graph, n.inputs[i]);
  }
  return s + ")";
}

ScalarType parse_dtype(const std::string& name) {
  for (int t = 1; t < kScalarTypeCount; ++t) {
    if (name == to_string(static_cast<ScalarType>(t))) return static_cast<ScalarType>(t);
  }
  throw ExportError("unknown dtype '" + name + "'");
}

OpCode parse_op(const std::string& name) {
  for (int op = 1; op < kOpCodeCount; ++op) {
    if (name == to_string(static_cast<OpCode>(op))) return static_cast<OpCode>(op);
  }
  throw ExportError("unknown op '" + name + "'");
}

}  // namespace ember::exporter
