#include "exporter/passes/evaluate.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "kernels/reference/register.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/kernel/op_info.h"

namespace ember::exporter {
namespace {

const KernelRegistry& reference_registry() {
  static std::once_flag once;
  static std::unique_ptr<KernelRegistry> registry;
  std::call_once(once, [] {
    registry = std::make_unique<KernelRegistry>();
    const Status status = kernels::register_reference_kernels(*registry);
    if (!status.is_ok()) registry.reset();
  });
  if (!registry) throw ExportError("registering the reference kernels failed");
  return *registry;
}

TensorView view_of(const HostTensor& t) {
  TensorView v;
  v.data = const_cast<uint8_t*>(t.bytes.data());
  v.dtype = t.dtype;
  v.rank = static_cast<uint8_t>(t.dims.size());
  std::copy(t.dims.begin(), t.dims.end(), v.dims);
  return v;
}

std::string describe(const HostTensor& t) {
  std::string s = std::string(to_string(t.dtype)) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}

}  // namespace

HostTensor HostTensor::from_f32(std::vector<int64_t> dims, const std::vector<float>& values) {
  HostTensor t;
  t.dtype = ScalarType::F32;
  t.dims = std::move(dims);
  if (t.numel() != values.size()) throw ExportError("HostTensor::from_f32: element count does not match dims");
  t.bytes.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::vector<float> HostTensor::to_f32() const {
  if (dtype != ScalarType::F32) throw ExportError("HostTensor::to_f32 on a " + std::string(to_string(dtype)) + " tensor");
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<HostTensor> evaluate_node(const Node& node, const std::vector<const HostTensor*>& inputs,
                                      const std::vector<int64_t>& symbols) {
  const OpInfo* info = find_op_info(node.op);
  if (info == nullptr) throw ExportError("evaluate: unknown op in node '" + node.name + "'");
  std::vector<TensorView> ins(inputs.size());
  std::vector<QuantView> quant(inputs.size());
  std::string sig;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] != nullptr) {
      ins[i] = view_of(*inputs[i]);
      if (const QuantParams* q = inputs[i]->quant.get()) {
        if (inputs[i]->dims.size() != 2) throw ExportError("evaluate: quantized input of '" + node.name + "' is not 2-D");
        quant[i].scale_dtype = q->scale_dtype;
        quant[i].scale = q->scale->data();
        quant[i].block[0] = q->block[0];
        quant[i].block[1] = q->block[1];
        quant[i].global_scale = q->has_global_scale ? &q->global_scale : nullptr;
        quant[i].layout = classify_quant(inputs[i]->dtype, q->scale_dtype, inputs[i]->dims[0], inputs[i]->dims[1],
                                         q->block[0], q->block[1], q->has_global_scale);
        ins[i].quant = &quant[i];
      }
    }
    sig += (i ? ", " : "") + (inputs[i] ? describe(*inputs[i]) : std::string("-"));
  }
  std::vector<TensorView> outs(info->outputs);
  ErrorContext ctx;
  const Status status = info->shape(node.attrs, ins.data(), ins.size(), outs.data(), outs.size(),
                                    Span<const int64_t>(symbols.data(), symbols.size()), &ctx);
  if (!status.is_ok()) {
    throw ExportError("evaluate " + std::string(info->name) + " '" + node.name + "' (" + sig + "): " +
                      (ctx.message[0] ? ctx.message : status.what()));
  }
  std::vector<HostTensor> results(info->outputs);
  for (size_t o = 0; o < outs.size(); ++o) {
    if (outs[o].nbytes() > kMaxEvaluatedBytes) {  // before allocating: a bad_alloc would name nothing
      throw ExportError("evaluate " + std::string(info->name) + " '" + node.name + "' (" + sig + "): output " +
                        std::to_string(o) + " would take " + std::to_string(outs[o].nbytes()) +
                        " bytes, above the limit of " + std::to_string(kMaxEvaluatedBytes) +
                        " for a tensor computed at export");
    }
    results[o].dtype = outs[o].dtype;
    results[o].dims.assign(outs[o].dims, outs[o].dims + outs[o].rank);
    // One spare element so a zero-size output still gets a non-null pointer.
    results[o].bytes.resize(outs[o].nbytes() + 8);
    outs[o].data = results[o].bytes.data();
  }
  const KernelKey key = make_kernel_key(node.op, ins.data(), ins.size(), outs.data(), outs.size());
  const KernelRegistry::Entry* entry = reference_registry().find(key);
  if (entry == nullptr) {
    char buf[256];
    throw ExportError("evaluate: no reference kernel for " + std::string(format_key(key, buf, sizeof(buf))) +
                      " (node '" + node.name + "')");
  }
  if (info->check_inputs != nullptr && !info->check_inputs(node.attrs, ins.data(), ins.size(), &ctx).is_ok()) {
    throw InputValueError("evaluate " + std::string(info->name) + " '" + node.name + "' (" + sig + "): " + ctx.message);
  }
  KernelContext kctx;
  std::vector<uint8_t> scratch;
  if (entry->scratch != nullptr) {
    scratch.resize(entry->scratch(node.attrs, ins.data(), ins.size(), outs.data(), outs.size(), 1) + 64);
    kctx.scratch = Span<uint8_t>(scratch.data(), scratch.size());
  }
  entry->fn(kctx, node.attrs, ins.data(), ins.size(), outs.data(), outs.size());
  for (size_t o = 0; o < outs.size(); ++o) results[o].bytes.resize(outs[o].nbytes());
  return results;
}

std::vector<std::shared_ptr<const HostTensor>> evaluate_all(const Graph& graph, const std::vector<HostTensor>& inputs,
                                                             const EvaluateOptions& options) {
  if (inputs.size() != graph.inputs.size()) {
    throw ExportError("evaluate: " + std::to_string(inputs.size()) + " inputs given, the graph has " +
                      std::to_string(graph.inputs.size()));
  }
  std::vector<int64_t> symbols(graph.symbols.size(), -1);
  std::vector<std::shared_ptr<const HostTensor>> slots(graph.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = graph.values[static_cast<size_t>(graph.inputs[i].value)];
    const HostTensor& t = inputs[i];
    const std::string where = "evaluate: input '" + graph.inputs[i].name + "' (" + describe(t) + ", expected " +
                              format_value(graph, graph.inputs[i].value) + ")";
    if (t.dtype != v.dtype || t.dims.size() != v.dims.size()) throw ExportError(where + ": dtype or rank differs");
    for (size_t d = 0; d < v.dims.size(); ++d) {
      const Dim& dim = v.dims[d];
      if (dim.sym == 0) {
        if (t.dims[d] != dim.max) throw ExportError(where + ": dim " + std::to_string(d) + " differs");
        continue;
      }
      const Symbol& sym = graph.symbols[dim.sym - 1u];
      if (t.dims[d] < sym.min || t.dims[d] > sym.max) {
        throw ExportError(where + ": " + sym.name + "=" + std::to_string(t.dims[d]) + " is outside [" +
                          std::to_string(sym.min) + ", " + std::to_string(sym.max) + "]");
      }
      int64_t& bound = symbols[dim.sym - 1u];
      if (bound >= 0 && bound != t.dims[d]) throw ExportError(where + ": symbol " + sym.name + " bound twice differently");
      bound = t.dims[d];
    }
    if (t.bytes.size() != nbytes_of(t.dtype, t.numel())) throw ExportError(where + ": byte count does not match dims");
    slots[static_cast<size_t>(graph.inputs[i].value)] = std::make_shared<const HostTensor>(t);
  }
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const Value& value = graph.values[v];
    if (!value.is_constant()) continue;
    if (options.constants != nullptr) {
      const auto replaced = options.constants->find(static_cast<int>(v));
      if (replaced != options.constants->end()) {
        slots[v] = std::make_shared<const HostTensor>(replaced->second);
        continue;
      }
    }
    auto t = std::make_shared<HostTensor>();
    t->dtype = value.dtype;
    for (const Dim& d : value.dims) t->dims.push_back(d.max);
    t->bytes = *value.data;
    t->quant = value.quant;
    slots[v] = std::move(t);
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    std::vector<const HostTensor*> ins;
    for (int in : node.inputs) {
      if (in < 0) {
        ins.push_back(nullptr);
        continue;
      }
      if (slots[static_cast<size_t>(in)] == nullptr) {
        throw ExportError("evaluate: node '" + node.name + "' reads '" + graph.values[static_cast<size_t>(in)].name +
                          "' before it is computed");
      }
      ins.push_back(slots[static_cast<size_t>(in)].get());
    }
    std::vector<HostTensor> keep;
    keep.reserve(ins.size());
    if (options.before_node) options.before_node(n, ins, keep);
    std::vector<HostTensor> outs = evaluate_node(node, ins, symbols);
    for (size_t o = 0; o < outs.size(); ++o) {
      const int id = node.outputs[o];
      const Value& value = graph.values[static_cast<size_t>(id)];
      // Bind derived symbols from the computed dims, so later reshapes can use them.
      for (size_t d = 0; d < value.dims.size() && d < outs[o].dims.size(); ++d) {
        if (value.dims[d].sym != 0 && symbols[value.dims[d].sym - 1u] < 0) {
          symbols[value.dims[d].sym - 1u] = outs[o].dims[d];
        }
      }
      slots[static_cast<size_t>(id)] = std::make_shared<const HostTensor>(std::move(outs[o]));
    }
  }
  return slots;
}

std::vector<HostTensor> evaluate(const Graph& graph, const std::vector<HostTensor>& inputs) {
  const std::vector<std::shared_ptr<const HostTensor>> slots = evaluate_all(graph, inputs);
  std::vector<HostTensor> results;
  for (const NamedValue& out : graph.outputs) {
    const HostTensor* t = slots[static_cast<size_t>(out.value)].get();
    if (t == nullptr) throw ExportError("evaluate: output '" + out.name + "' was never computed");
    results.push_back(*t);
  }
  return results;
}

}  // namespace ember::exporter
