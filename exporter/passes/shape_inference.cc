#include "exporter/passes/shape_inference.h"

#include <algorithm>

#include "runtime/kernel/op_info.h"

namespace ember::exporter {

ShapeInference::ShapeInference(Graph& graph) : graph_(graph) {
  declared_ = graph.symbols.size();
  const size_t s_count = declared_;
  std::vector<int64_t> at_max(s_count), at_min(s_count), below_max(s_count);
  for (size_t s = 0; s < s_count; ++s) {
    const Symbol& sym = graph.symbols[s];
    at_max[s] = sym.max;
    at_min[s] = sym.min;
    below_max[s] = std::max(sym.min, sym.max - 1);
  }
  probe_symbols_.push_back(at_max);  // probe 0: the upper bound
  if (s_count > 0) {
    probe_symbols_.push_back(at_min);
    probe_symbols_.push_back(below_max);
    for (size_t s = 0; s < s_count; ++s) {
      std::vector<int64_t> one_low = at_max;
      one_low[s] = graph.symbols[s].min;
      probe_symbols_.push_back(one_low);
    }
  }
  probe_dims_.resize(graph.values.size());
}

std::vector<int64_t> ShapeInference::dims_in_probe(const std::vector<Dim>& dims, size_t probe) const {
  std::vector<int64_t> out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    out[i] = dims[i].sym == 0 ? dims[i].max : probe_symbols_[probe][dims[i].sym - 1u];
  }
  return out;
}

void ShapeInference::add_source(int value) {
  if (probe_dims_.size() < graph_.values.size()) probe_dims_.resize(graph_.values.size());
  const Value& v = graph_.values[static_cast<size_t>(value)];
  for (const Dim& d : v.dims) {
    if (d.sym > declared_) {
      throw ExportError("value '" + v.name + "' uses a symbol that is not declared (sym " +
                        std::to_string(d.sym) + ")");
    }
  }
  auto& per_probe = probe_dims_[static_cast<size_t>(value)];
  per_probe.clear();
  for (size_t p = 0; p < probe_count(); ++p) per_probe.push_back(dims_in_probe(v.dims, p));
}

const std::vector<int64_t>& ShapeInference::probe_dims(int value, size_t probe) const {
  return probe_dims_.at(static_cast<size_t>(value)).at(probe);
}

std::string ShapeInference::describe_probe(size_t probe) const {
  std::string s;
  for (size_t i = 0; i < declared_; ++i) {
    if (i) s += ", ";
    s += graph_.symbols[i].name + "=" + std::to_string(probe_symbols_[probe][i]);
  }
  return s;
}

void ShapeInference::infer_node(int node_index) {
  if (probe_dims_.size() < graph_.values.size()) probe_dims_.resize(graph_.values.size());
  Node& node = graph_.nodes[static_cast<size_t>(node_index)];
  const OpInfo* info = find_op_info(node.op);
  const std::string where = format_node(graph_, node_index);
  if (info == nullptr || info->shape == nullptr) {
    throw ExportError(where + ": op has no shape function (op code " +
                      std::to_string(static_cast<int>(node.op)) + ")");
  }
  const size_t in_count = node.inputs.size();
  if (in_count < info->min_inputs || (info->max_inputs != 255 && in_count > info->max_inputs)) {
    throw ExportError(where + ": takes " + std::to_string(info->min_inputs) + ".." +
                      (info->max_inputs == 255 ? std::string("n") : std::to_string(info->max_inputs)) +
                      " inputs, got " + std::to_string(in_count));
  }
  if (node.outputs.size() != info->outputs) {
    throw ExportError(where + ": has " + std::to_string(info->outputs) + " outputs, got " +
                      std::to_string(node.outputs.size()));
  }
  for (int in : node.inputs) {
    if (in >= 0 && probe_dims_[static_cast<size_t>(in)].empty()) {
      throw ExportError(where + ": input '" + graph_.values[static_cast<size_t>(in)].name +
                        "' has no shape yet (not an input, constant or earlier output)");
    }
  }

  const size_t probes = probe_count();
  const size_t out_count = node.outputs.size();
  // out_dims[o][p]
  std::vector<std::vector<std::vector<int64_t>>> out_dims(out_count, std::vector<std::vector<int64_t>>(probes));
  std::vector<ScalarType> out_dtypes(out_count, ScalarType::Invalid);
  for (size_t p = 0; p < probes; ++p) {
    std::vector<TensorView> ins(in_count);
    for (size_t i = 0; i < in_count; ++i) {
      const int id = node.inputs[i];
      if (id < 0) continue;  // absent optional input: dtype Invalid, rank 0, data null
      const Value& v = graph_.values[static_cast<size_t>(id)];
      const auto& dims = probe_dims_[static_cast<size_t>(id)][p];
      if (dims.size() > static_cast<size_t>(kMaxRank)) {
        throw ExportError(where + ": input '" + v.name + "' has rank " + std::to_string(dims.size()) +
                          " > " + std::to_string(kMaxRank));
      }
      ins[i].dtype = v.dtype;
      ins[i].data = v.is_constant() ? const_cast<uint8_t*>(v.data->data()) : nullptr;
      ins[i].rank = static_cast<uint8_t>(dims.size());
      std::copy(dims.begin(), dims.end(), ins[i].dims);
    }
    std::vector<TensorView> outs(out_count);
    ErrorContext ctx;
    const std::vector<int64_t>& syms = probe_symbols_[p];
    const Status status = info->shape(node.attrs, ins.data(), ins.size(), outs.data(), outs.size(),
                                      Span<const int64_t>(syms.data(), syms.size()), &ctx);
    if (!status.is_ok()) {
      std::string msg = where + ": " + (ctx.message[0] ? std::string(ctx.message) : std::string(status.what()));
      if (p != 0) msg += " (when " + describe_probe(p) + "; it holds at every symbol's max)";
      throw ExportError(msg);
    }
    for (size_t o = 0; o < out_count; ++o) {
      if (p == 0) {
        out_dtypes[o] = outs[o].dtype;
      } else if (outs[o].dtype != out_dtypes[o] || outs[o].rank != out_dims[o][0].size()) {
        throw ExportError(where + ": output dtype or rank changes with the symbols (" + describe_probe(p) + ")");
      }
      out_dims[o][p].assign(outs[o].dims, outs[o].dims + outs[o].rank);
    }
  }

  for (size_t o = 0; o < out_count; ++o) {
    const int out_id = node.outputs[o];
    if (!is_valid(out_dtypes[o])) throw ExportError(where + ": shape function set no output dtype");
    std::vector<Dim> dims(out_dims[o][0].size());
    for (size_t i = 0; i < dims.size(); ++i) {
      std::vector<int64_t> seen(probes);
      for (size_t p = 0; p < probes; ++p) seen[p] = out_dims[o][p][i];
      if (std::all_of(seen.begin(), seen.end(), [&](int64_t v) { return v == seen[0]; })) {
        dims[i] = Dim{seen[0], 0};
        continue;
      }
      size_t match = 0;
      for (size_t s = 0; s < graph_.symbols.size() && match == 0; ++s) {
        bool all = true;
        for (size_t p = 0; p < probes && all; ++p) all = probe_symbols_[p][s] == seen[p];
        if (all) match = s + 1;
      }
      if (match == 0) {
        Symbol sym;
        sym.name = graph_.values[static_cast<size_t>(out_id)].name + ".d" + std::to_string(i);
        sym.min = *std::min_element(seen.begin(), seen.end());
        sym.max = *std::max_element(seen.begin(), seen.end());
        sym.derived = true;
        if (graph_.symbols.size() >= 65535) throw ExportError(where + ": too many symbols");
        graph_.symbols.push_back(sym);
        for (size_t p = 0; p < probes; ++p) probe_symbols_[p].push_back(seen[p]);
        match = graph_.symbols.size();
      }
      dims[i] = Dim{graph_.symbols[match - 1].max, static_cast<uint16_t>(match)};
    }
    Value& out = graph_.values[static_cast<size_t>(out_id)];
    out.dtype = out_dtypes[o];
    out.dims = std::move(dims);
    probe_dims_[static_cast<size_t>(out_id)] = std::move(out_dims[o]);
  }
}

void infer_shapes(Graph& graph) {
  // Derived symbols are recreated in the same order, so ids referenced by attributes stay valid.
  while (!graph.symbols.empty() && graph.symbols.back().derived) graph.symbols.pop_back();
  for (const Symbol& s : graph.symbols) {
    if (s.derived) throw ExportError("derived symbol '" + s.name + "' precedes a declared one");
  }
  ShapeInference inference(graph);
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (graph.values[v].is_constant() || graph.values[v].is_state() || graph.is_input(static_cast<int>(v))) {
      inference.add_source(static_cast<int>(v));
    }
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) inference.infer_node(static_cast<int>(n));
}

}  // namespace ember::exporter
