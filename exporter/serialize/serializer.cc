#include "exporter/serialize/serializer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "runtime/core/hash.h"
#include "runtime/kernel/op_info.h"
#include "runtime/program/program_file.h"
#include "schema/program_generated.h"

namespace ember::exporter {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::vector<fb::Dim> to_fb_dims(const std::vector<Dim>& dims) {
  std::vector<fb::Dim> out;
  for (const Dim& d : dims) out.emplace_back(d.max, d.sym);
  return out;
}

std::vector<std::unique_ptr<fb::SymbolT>> to_fb_symbols(const Graph& graph) {
  std::vector<std::unique_ptr<fb::SymbolT>> out;
  for (const Symbol& s : graph.symbols) {
    auto t = std::make_unique<fb::SymbolT>();
    t->name = s.name;
    t->min = s.min;
    t->max = s.max;
    out.push_back(std::move(t));
  }
  return out;
}

fb::AttributesUnion to_fb_attrs(const Node& node) {
  const OpInfo* info = find_op_info(node.op);
  if (info == nullptr) throw ExportError("serialize: unknown op in node '" + node.name + "'");
  const OpAttrs& a = node.attrs;
  fb::AttributesUnion u;
  switch (info->attr_kind) {
    case AttrKind::None: break;
    case AttrKind::Gelu: {
      fb::GeluAttrsT t;
      t.approximate = static_cast<fb::GeluApprox>(a.gelu_approx);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Axis: {
      fb::AxisAttrsT t;
      t.axis = a.axis;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Linear: {
      fb::LinearAttrsT t;
      t.activation_quant = static_cast<fb::ActivationQuant>(a.activation_quant);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Conv2d: {
      fb::Conv2dAttrsT t;
      t.stride.assign(a.stride, a.stride + 2);
      t.padding.assign(a.padding, a.padding + 4);
      t.dilation.assign(a.dilation, a.dilation + 2);
      t.groups = a.groups;
      t.out_min = a.out_min;  // ±inf (none) is the default, so a plain conv writes no field
      t.out_max = a.out_max;
      if (node.op == OpCode::ConvTranspose2d) t.output_padding.assign(a.output_padding, a.output_padding + 2);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Pool2d: {
      fb::Pool2dAttrsT t;
      t.kernel.assign(a.kernel, a.kernel + 2);
      t.stride.assign(a.stride, a.stride + 2);
      t.padding.assign(a.padding, a.padding + 4);
      t.dilation.assign(a.dilation, a.dilation + 2);
      t.ceil_mode = a.ceil_mode;
      t.count_include_pad = a.count_include_pad;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Norm: {
      fb::NormAttrsT t;
      t.axis = a.axis;
      t.epsilon = a.epsilon;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Reshape: {
      fb::ReshapeAttrsT t;
      for (int i = 0; i < a.count; ++i) t.dims.emplace_back(a.shape[i], a.shape_sym[i]);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Permute: {
      fb::PermuteAttrsT t;
      t.perm.assign(a.perm, a.perm + a.count);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Slice: {
      fb::SliceAttrsT t;
      t.axes.assign(a.axes, a.axes + a.count);
      t.starts.assign(a.starts, a.starts + a.count);
      t.ends.assign(a.ends, a.ends + a.count);
      t.steps.assign(a.steps, a.steps + a.count);
      if (std::any_of(a.ends_sym, a.ends_sym + a.count, [](uint16_t s) { return s != 0; })) {
        t.ends_sym.assign(a.ends_sym, a.ends_sym + a.count);
      }
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Clip: {
      fb::ClipAttrsT t;
      t.min = a.clip_min;
      t.max = a.clip_max;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Arg: {
      fb::ArgAttrsT t;
      t.axis = a.axis;
      t.keepdims = a.keepdims;
      t.select_last_index = a.select_last_index;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::TopK: {
      fb::TopKAttrsT t;
      t.axis = a.axis;
      t.k = a.k;
      t.largest = a.largest;
      t.sorted = a.sorted;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::CumSum: {
      fb::CumSumAttrsT t;
      t.axis = a.axis;
      t.exclusive = a.exclusive;
      t.reverse = a.reverse;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::GroupNorm: {
      fb::GroupNormAttrsT t;
      t.groups = a.groups;
      t.epsilon = a.epsilon;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Resize: {
      fb::ResizeAttrsT t;
      t.mode = static_cast<fb::ResizeMode>(a.resize_mode);
      t.coord = static_cast<fb::ResizeCoord>(a.resize_coord);
      t.nearest = static_cast<fb::ResizeNearest>(a.resize_nearest);
      t.cubic_a = a.cubic_a;
      t.exclude_outside = a.exclude_outside;
      t.scales.assign(a.resize_scales, a.resize_scales + a.count);
      t.sizes.assign(a.shape, a.shape + a.count);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Rnn: {
      fb::RnnAttrsT t;
      t.direction = static_cast<fb::RnnDirection>(a.rnn_direction);
      t.hidden_size = a.hidden_size;
      for (int k = 0; k < a.rnn_act_count; ++k) {
        t.activations.push_back(static_cast<fb::RnnActivation>(a.rnn_act[k]));
        t.activation_alpha.push_back(a.rnn_alpha[k]);
        t.activation_beta.push_back(a.rnn_beta[k]);
      }
      t.clip = a.rnn_clip;
      t.linear_before_reset = a.linear_before_reset;
      t.input_forget = a.input_forget;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::HardSigmoid: {
      fb::HardSigmoidAttrsT t;
      t.alpha = a.alpha;
      t.beta = a.beta;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Reduce: {
      fb::ReduceAttrsT t;
      t.axes.assign(a.axes, a.axes + a.count);
      t.keepdims = a.keepdims;
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Pad: {
      fb::PadAttrsT t;  // ONNX order: the begins of every dim, then the ends
      t.pads.assign(a.pads, a.pads + 2 * a.count);
      t.value = a.pad_value;
      t.mode = static_cast<fb::PadMode>(a.pad_mode);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Cast: {
      fb::CastAttrsT t;
      t.to = static_cast<fb::ScalarType>(a.cast_to);
      u.Set(std::move(t));
      break;
    }
    case AttrKind::Attention: {
      fb::AttentionAttrsT t;
      t.scale = a.attn_scale;
      t.kv_scale = a.kv_scale;
      t.sliding_window = a.attn_window;
      t.softcap = a.attn_softcap;
      u.Set(std::move(t));
      break;
    }
  }
  return u;
}

struct ConstantLayout {
  std::map<int, uint64_t> offsets;  // value id -> offset in the Constants segment
  std::map<int, uint64_t> scale_offsets;   // quantized value id -> offset of its scale tensor
  std::map<int, uint64_t> global_offsets;  // quantized value id -> offset of its f32 global scale
  std::vector<uint8_t> bytes;
  uint64_t payload_bytes = 0;

  uint64_t append(const uint8_t* data, size_t size) {
    const uint64_t offset = align_up(bytes.size(), kTensorAlignment);
    bytes.resize(offset + size);
    if (size) std::memcpy(bytes.data() + offset, data, size);
    payload_bytes += size;
    return offset;
  }
};

// What each tensor's storage is, given a graph value id.
struct StorageContext {
  const Graph& graph;
  const MemoryPlan& plan;
  const ConstantLayout& constants;
  uint32_t constant_segment = 0;
};

std::unique_ptr<fb::TensorT> make_tensor(const StorageContext& ctx, int id, bool with_storage) {
  const Value& v = ctx.graph.values[static_cast<size_t>(id)];
  auto t = std::make_unique<fb::TensorT>();
  t->dtype = static_cast<fb::ScalarType>(v.dtype);
  t->dims = to_fb_dims(v.dims);
  t->dim_order = fb::DimOrder::Contiguous;
  t->nbytes = nbytes_max(v);
  if (!with_storage) return t;
  if (v.is_state()) {
    fb::StateStorageT s;
    s.name = v.state;
    t->storage.Set(std::move(s));
  } else if (v.is_constant()) {
    fb::ConstantStorageT s;
    s.segment = ctx.constant_segment;
    s.offset = ctx.constants.offsets.at(id);
    t->storage.Set(std::move(s));
  } else {
    const Placement& p = ctx.plan.values.at(static_cast<size_t>(id));
    if (p.arena < 0) throw ExportError("serialize: value '" + v.name + "' has no planned storage");
    fb::PlannedStorageT s;
    s.arena = static_cast<uint32_t>(p.arena);
    s.offset = p.offset;
    t->storage.Set(std::move(s));
  }
  return t;
}

// A quantized constant's QuantInfo. Its scale (and NVFP4 global scale) become constants of their
// own, appended to `g` after the graph's values, at the Constants segment offsets serialize_program
// stored them at: a delegate payload references the very bytes the Method would, never a copy.
std::unique_ptr<fb::QuantInfoT> make_quant_info(const StorageContext& ctx, int id, uint32_t last, fb::GraphT& g) {
  const QuantParams& q = *ctx.graph.values[static_cast<size_t>(id)].quant;
  auto add_constant = [&](ScalarType dtype, std::vector<Dim> dims, uint64_t offset) {
    auto t = std::make_unique<fb::TensorT>();
    t->dtype = static_cast<fb::ScalarType>(dtype);
    t->dims = to_fb_dims(dims);
    t->dim_order = fb::DimOrder::Contiguous;
    t->nbytes = nbytes_of(dtype, numel_max(dims));
    fb::ConstantStorageT s;
    s.segment = ctx.constant_segment;
    s.offset = offset;
    t->storage.Set(std::move(s));
    g.values.push_back(std::move(t));
    g.lifetimes.emplace_back(0, last);
    return static_cast<uint32_t>(g.values.size() - 1);
  };
  auto info = std::make_unique<fb::QuantInfoT>();
  info->scale_dtype = static_cast<fb::ScalarType>(q.scale_dtype);
  info->block = q.block;
  info->scale_layout = fb::ScaleLayout::RowMajor;
  info->scale = add_constant(q.scale_dtype, {Dim{q.scale_dims[0], 0}, Dim{q.scale_dims[1], 0}},
                             ctx.constants.scale_offsets.at(id));
  if (q.has_global_scale) {
    info->global_scale = static_cast<int32_t>(add_constant(ScalarType::F32, {}, ctx.constants.global_offsets.at(id)));
  }
  return info;
}

std::unique_ptr<fb::NamedValueT> named(const std::string& name, uint32_t value) {
  auto nv = std::make_unique<fb::NamedValueT>();
  nv->name = name;
  nv->value = value;
  return nv;
}

std::unique_ptr<fb::InstructionT> make_kernel_call(const Node& node, const std::map<int, uint32_t>& index,
                                                   uint32_t debug_id) {
  auto call = fb::KernelCallT();
  call.op = static_cast<fb::OpCode>(node.op);
  for (int in : node.inputs) call.inputs.push_back(in < 0 ? -1 : static_cast<int32_t>(index.at(in)));
  for (int out : node.outputs) call.outputs.push_back(index.at(out));
  call.attrs = to_fb_attrs(node);
  auto instr = std::make_unique<fb::InstructionT>();
  instr->args.Set(std::move(call));
  instr->debug_id = debug_id;
  return instr;
}

// The nested Graph of a GRAPH delegate: its inputs and outputs have no storage (bound to the
// caller's values), constants point into the Program's Constants segment (a quantized one with its
// scale constants, as in the Method), internals are Planned in the calling Method's arenas, and the
// program state the run reads or writes in place is a value with StateStorage{name}, exactly as the
// Method would write it (same dtype, and dims whose `sym` indexes this payload's own `symbols`, a
// copy of the Method graph's, so the symbol's name is the one the StateDecl's Program symbol has).
std::vector<uint8_t> build_delegate_payload(const StorageContext& ctx, const DelegateGraph& d, bool strip_debug) {
  const Graph& graph = ctx.graph;
  std::vector<int> order;
  std::map<int, uint32_t> index;
  auto add = [&](int id) {
    if (id < 0 || index.count(id)) return;
    index[id] = static_cast<uint32_t>(order.size());
    order.push_back(id);
  };
  for (int v : d.inputs) add(v);
  for (int v : d.outputs) add(v);
  for (int n : d.nodes) {
    for (int v : graph.nodes[static_cast<size_t>(n)].inputs) add(v);
    for (int v : graph.nodes[static_cast<size_t>(n)].outputs) add(v);
  }
  for (int v : d.states) {
    if (d.inputs.end() != std::find(d.inputs.begin(), d.inputs.end(), v) ||
        d.outputs.end() != std::find(d.outputs.begin(), d.outputs.end(), v)) {
      throw ExportError("serialize: state '" + graph.values[static_cast<size_t>(v)].state + "' is an input or output of a " +
                        d.backend + " delegate");
    }
  }
  const std::set<int> io(d.inputs.begin(), d.inputs.end());
  const std::set<int> outs(d.outputs.begin(), d.outputs.end());
  fb::GraphT g;
  for (int id : order) g.values.push_back(make_tensor(ctx, id, !io.count(id) && !outs.count(id)));
  for (int v : d.inputs) g.inputs.push_back(named(graph.values[static_cast<size_t>(v)].name, index.at(v)));
  for (int v : d.outputs) g.outputs.push_back(named(graph.values[static_cast<size_t>(v)].name, index.at(v)));
  for (int n : d.nodes) {
    g.instructions.push_back(make_kernel_call(graph.nodes[static_cast<size_t>(n)], index,
                                              strip_debug ? 0 : static_cast<uint32_t>(n) + 1));
  }
  // Lifetimes in the payload's own instruction order.
  const uint32_t last = static_cast<uint32_t>(d.nodes.size()) - 1;
  std::vector<uint32_t> first(order.size(), last), end(order.size(), 0);
  for (size_t i = 0; i < d.nodes.size(); ++i) {
    const Node& node = graph.nodes[static_cast<size_t>(d.nodes[i])];
    for (const auto* list : {&node.inputs, &node.outputs}) {
      for (int v : *list) {
        if (v < 0) continue;
        const uint32_t k = index.at(v);
        first[k] = std::min(first[k], static_cast<uint32_t>(i));
        end[k] = std::max(end[k], static_cast<uint32_t>(i));
      }
    }
  }
  for (size_t k = 0; k < order.size(); ++k) {
    const int id = order[k];
    const Value& v = graph.values[static_cast<size_t>(id)];
    // Constants and state outlive the call (state persists across calls): live throughout.
    if (io.count(id) || v.is_constant() || v.is_state()) first[k] = 0;
    if (outs.count(id) || v.is_constant() || v.is_state()) end[k] = last;
    g.lifetimes.emplace_back(first[k], std::max(first[k], end[k]));
  }
  for (int id : order) {
    if (!graph.values[static_cast<size_t>(id)].quant) continue;
    auto info = make_quant_info(ctx, id, last, g);  // appends to g.values: index after it
    g.values[index.at(id)]->quant = std::move(info);
  }
  g.symbols = to_fb_symbols(graph);
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fb::CreateGraph(fbb, &g));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace

uint64_t required_features_of(const Graph& graph) {
  uint64_t bits = 0;
  for (const Value& v : graph.values) {
    switch (v.dtype) {
      case ScalarType::F8E4M3FN:
      case ScalarType::F8E5M2: bits |= kFeatureFp8; break;
      case ScalarType::F4E2M1:
      case ScalarType::UE4M3: bits |= kFeatureNvfp4; break;
      case ScalarType::E8M0: bits |= kFeatureMxfp8; break;
      default: break;
    }
    if (v.is_state()) bits |= kFeatureState;
  }
  for (const Node& n : graph.nodes) {
    if (n.op == OpCode::PagedAttention) bits |= kFeaturePagedKv;
    if (n.op == OpCode::Conv2d && conv2d_has_clamp(n.attrs)) bits |= kFeatureConvClamp;
  }
  return bits;
}

SerializedProgram serialize_program(const Graph& graph, const Partition& partition, const MemoryPlan& plan,
                                    const SerializeOptions& options) {
  SerializedProgram result;
  if (plan.values.size() != graph.values.size()) throw ExportError("serialize: the plan is for another graph");

  // Constants: every constant a method instruction or a delegate reads, once, in value order.
  std::set<int> constant_ids;
  for (size_t s = 0; s < partition.steps.size(); ++s) {
    for (int v : partition.step_inputs(graph, s)) {
      if (v >= 0 && graph.values[static_cast<size_t>(v)].is_constant()) constant_ids.insert(v);
    }
  }
  for (const DelegateGraph& d : partition.delegates) constant_ids.insert(d.constants.begin(), d.constants.end());
  ConstantLayout constants;
  std::map<const std::vector<uint8_t>*, uint64_t> stored;  // constants sharing their bytes (a tied LM head) once
  for (int id : constant_ids) {
    const Value& v = graph.values[static_cast<size_t>(id)];
    auto [it, added] = stored.emplace(v.data.get(), 0);
    if (added) it->second = constants.append(v.data->data(), v.data->size());
    constants.offsets[id] = it->second;
    if (v.quant) {
      constants.scale_offsets[id] = constants.append(v.quant->scale->data(), v.quant->scale->size());
      if (v.quant->has_global_scale) {
        constants.global_offsets[id] =
            constants.append(reinterpret_cast<const uint8_t*>(&v.quant->global_scale), sizeof(float));
      }
    }
  }
  result.constant_bytes = constants.payload_bytes;
  result.constant_count = constant_ids.size();

  // Segments, relative to the segment base.
  std::vector<std::unique_ptr<fb::SegmentT>> segments;
  std::vector<const std::vector<uint8_t>*> segment_data;
  uint64_t segment_end = 0;
  auto add_segment = [&](fb::SegmentKind kind, const std::vector<uint8_t>& bytes, uint64_t alignment) {
    auto seg = std::make_unique<fb::SegmentT>();
    seg->kind = kind;
    seg->offset = align_up(segment_end, alignment);
    seg->size = bytes.size();
    seg->alignment = static_cast<uint32_t>(alignment);
    seg->xxh64 = xxh64(bytes.data(), bytes.size());
    segment_end = seg->offset + seg->size;
    segments.push_back(std::move(seg));
    segment_data.push_back(&bytes);
    return static_cast<uint32_t>(segments.size() - 1);
  };
  uint32_t constant_segment = 0;
  if (!constant_ids.empty()) constant_segment = add_segment(fb::SegmentKind::Constants, constants.bytes, kConstantSegmentAlignment);

  std::vector<uint8_t> debug_bytes;
  if (!options.strip_debug) {
    fb::DebugInfoT info;
    for (const Node& n : graph.nodes) {
      auto dn = std::make_unique<fb::DebugNodeT>();
      dn->name = n.name;
      dn->source_op = n.source_op;
      info.nodes.push_back(std::move(dn));
    }
    for (size_t d = 0; d < partition.delegates.size(); ++d) {
      auto dn = std::make_unique<fb::DebugNodeT>();
      dn->name = "delegate_" + std::to_string(d) + " [";
      for (size_t i = 0; i < partition.delegates[d].nodes.size(); ++i) {
        dn->name += (i ? ", " : "") + graph.nodes[static_cast<size_t>(partition.delegates[d].nodes[i])].name;
      }
      dn->name += "]";
      dn->source_op = "delegate:" + partition.delegates[d].backend;
      info.nodes.push_back(std::move(dn));
    }
    flatbuffers::FlatBufferBuilder dbb;
    dbb.Finish(fb::CreateDebugInfo(dbb, &info));
    debug_bytes.assign(dbb.GetBufferPointer(), dbb.GetBufferPointer() + dbb.GetSize());
    add_segment(fb::SegmentKind::Debug, debug_bytes, kTensorAlignment);
  }

  // The Method's values: everything a method-level instruction or the IO touches.
  std::set<int> method_ids;
  for (const NamedValue& nv : graph.inputs) method_ids.insert(nv.value);
  for (const NamedValue& nv : graph.outputs) method_ids.insert(nv.value);
  for (size_t s = 0; s < partition.steps.size(); ++s) {
    for (int v : partition.step_inputs(graph, s)) {
      if (v >= 0) method_ids.insert(v);
    }
    for (int v : partition.step_outputs(graph, s)) method_ids.insert(v);
  }
  std::map<int, uint32_t> index;
  for (int id : method_ids) index[id] = static_cast<uint32_t>(index.size());

  const StorageContext ctx{graph, plan, constants, constant_segment};
  auto g = std::make_unique<fb::GraphT>();
  const uint32_t last_step = static_cast<uint32_t>(partition.steps.size()) - 1;
  for (int id : method_ids) {
    g->values.push_back(make_tensor(ctx, id, true));
    const Placement& p = plan.values[static_cast<size_t>(id)];
    if (graph.values[static_cast<size_t>(id)].is_constant()) {
      g->lifetimes.emplace_back(0, last_step);
    } else {
      g->lifetimes.emplace_back(p.first, p.last);
    }
  }
  // A quantized constant's scale (and global scale): extra constants after the graph's values.
  for (int id : method_ids) {
    if (!graph.values[static_cast<size_t>(id)].quant) continue;
    auto info = make_quant_info(ctx, id, last_step, *g);  // appends to g->values: index after it
    g->values[index.at(id)]->quant = std::move(info);
  }
  for (const NamedValue& nv : graph.inputs) g->inputs.push_back(named(nv.name, index.at(nv.value)));
  for (const NamedValue& nv : graph.outputs) g->outputs.push_back(named(nv.name, index.at(nv.value)));
  std::vector<std::vector<uint8_t>> payloads;
  for (const Step& step : partition.steps) {
    if (step.kind == Step::Kind::Kernel) {
      g->instructions.push_back(make_kernel_call(graph.nodes[static_cast<size_t>(step.index)], index,
                                                 options.strip_debug ? 0 : static_cast<uint32_t>(step.index) + 1));
      continue;
    }
    const DelegateGraph& d = partition.delegates[static_cast<size_t>(step.index)];
    fb::DelegateCallT call;
    call.index = static_cast<uint32_t>(step.index);
    for (int v : d.inputs) call.inputs.push_back(index.at(v));
    for (int v : d.outputs) call.outputs.push_back(index.at(v));
    auto instr = std::make_unique<fb::InstructionT>();
    instr->args.Set(std::move(call));
    instr->debug_id = options.strip_debug ? 0 : static_cast<uint32_t>(graph.nodes.size() + step.index) + 1;
    g->instructions.push_back(std::move(instr));
  }
  for (const DelegateGraph& d : partition.delegates) payloads.push_back(build_delegate_payload(ctx, d, options.strip_debug));
  g->symbols = to_fb_symbols(graph);

  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  std::vector<flatbuffers::Offset<fb::Delegate>> delegates;
  for (size_t d = 0; d < payloads.size(); ++d) {
    const auto backend = fbb.CreateString(partition.delegates[d].backend);
    // 64-aligned, so the nested Graph's 8-byte structs are aligned in memory too. PreAlign, not
    // ForceVectorAlignment: that one asserts alignment <= FLATBUFFERS_MAX_ALIGNMENT (32) in debug builds.
    if (!payloads[d].empty()) fbb.PreAlign(payloads[d].size(), 64);
    const auto payload = fbb.CreateVector(payloads[d]);
    std::vector<flatbuffers::Offset<fb::CompileSpec>> specs;
    for (const CompileSpecOption& spec : options.compile_specs) {
      if (spec.backend != partition.delegates[d].backend) continue;
      specs.push_back(fb::CreateCompileSpec(fbb, fbb.CreateString(spec.key), fbb.CreateVector(spec.value)));
    }
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::CompileSpec>>> specs_vec;  // 0: none
    if (!specs.empty()) specs_vec = fbb.CreateVector(specs);
    delegates.push_back(fb::CreateDelegate(fbb, backend, fb::DelegateFormat::Graph, kGraphDelegateFormatVersion,
                                           payload, -1, specs_vec));
  }
  const auto delegates_vec = fbb.CreateVector(delegates);
  const auto graph_off = fb::CreateGraph(fbb, g.get());
  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  for (int a : {kActivationArena, kIoArena}) {
    fb::ArenaT arena;
    arena.id = static_cast<uint32_t>(a);
    arena.kind = a == kActivationArena ? fb::ArenaKind::Activation : fb::ArenaKind::IO;
    arena.device = fb::Device::Host;
    arena.alignment = static_cast<uint32_t>(kPlanAlignment);
    arena.size = a == kActivationArena ? plan.activation_size : plan.io_size;
    arenas.push_back(fb::CreateArena(fbb, &arena));
  }
  const auto arenas_vec = fbb.CreateVector(arenas);
  const auto method = fb::CreateMethod(fbb, fbb.CreateString(options.method_name), graph_off, arenas_vec,
                                       delegates_vec, /*scratch_bytes=*/0);
  std::vector<flatbuffers::Offset<fb::Segment>> segment_offsets;
  for (const auto& s : segments) segment_offsets.push_back(fb::CreateSegment(fbb, s.get()));
  const auto methods_vec = fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Method>>{method});
  const auto segments_vec = fbb.CreateVector(segment_offsets);
  // Program state: one declaration per state value; its symbolic dims name Program-level symbols
  // (copies of the graph's), whose values LoadOptions::symbols chooses at load.
  std::vector<flatbuffers::Offset<fb::StateDecl>> state_decls;
  std::vector<std::unique_ptr<fb::SymbolT>> program_symbols;
  std::map<uint16_t, uint16_t> program_symbol_of;  // graph symbol id -> program symbol id
  for (const Value& v : graph.values) {
    if (!v.is_state()) continue;
    fb::StateDeclT decl;
    decl.name = v.state;
    decl.dtype = static_cast<fb::ScalarType>(v.dtype);
    for (const Dim& d : v.dims) {
      uint16_t sym = 0;
      if (d.sym != 0) {
        auto [it, added] = program_symbol_of.emplace(d.sym, static_cast<uint16_t>(program_symbols.size() + 1));
        if (added) {
          const Symbol& gs = graph.symbols.at(static_cast<size_t>(d.sym) - 1);
          auto ps = std::make_unique<fb::SymbolT>();
          ps->name = gs.name;
          ps->min = gs.min;
          ps->max = gs.max;
          program_symbols.push_back(std::move(ps));
        }
        sym = it->second;
      }
      decl.dims.emplace_back(d.max, sym);
    }
    state_decls.push_back(fb::CreateStateDecl(fbb, &decl));
  }
  std::vector<flatbuffers::Offset<fb::Symbol>> symbol_offsets;
  for (const auto& ps : program_symbols) symbol_offsets.push_back(fb::CreateSymbol(fbb, ps.get()));
  const auto states_vec = state_decls.empty() ? 0 : fbb.CreateVector(state_decls);
  const auto symbols_vec = symbol_offsets.empty() ? 0 : fbb.CreateVector(symbol_offsets);
  result.required_features = required_features_of(graph);
  const auto llm = options.llm ? write_llm_info(fbb, *options.llm) : flatbuffers::Offset<fb::LlmInfo>();
  const auto program = fb::CreateProgram(fbb, fbb.CreateString(kProducer), methods_vec, segments_vec, states_vec,
                                         symbols_vec, result.required_features, llm);
  fb::FinishProgramBuffer(fbb, program);

  // The file.
  const uint64_t fb_size = fbb.GetSize();
  if (fb_size > kMaxFlatBufferSize) throw ExportError("serialize: the FlatBuffer exceeds 2 GiB");
  FileHeader header;
  header.flatbuffer_offset = kHeaderSize;
  header.flatbuffer_size = static_cast<uint32_t>(fb_size);
  header.segment_base = segments.empty() ? 0 : align_up(kHeaderSize + fb_size, kConstantSegmentAlignment);
  header.segment_size = segment_end;
  header.required_features = result.required_features;
  header.flatbuffer_crc32c = crc32c(fbb.GetBufferPointer(), fb_size);
  std::vector<uint8_t>& out = result.bytes;
  out.assign(segments.empty() ? kHeaderSize + fb_size : header.segment_base + segment_end, 0);
  encode_header(header, out.data());
  std::memcpy(out.data() + kHeaderSize, fbb.GetBufferPointer(), fb_size);
  for (size_t s = 0; s < segments.size(); ++s) {
    if (!segment_data[s]->empty()) {
      std::memcpy(out.data() + header.segment_base + segments[s]->offset, segment_data[s]->data(), segment_data[s]->size());
    }
  }
  result.flatbuffer_size = fb_size;
  result.segment_base = header.segment_base;
  return result;
}

}  // namespace ember::exporter
