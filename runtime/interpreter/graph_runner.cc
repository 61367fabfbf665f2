#include "runtime/interpreter/graph_runner.h"

#include <cstdio>
#include <cstring>

namespace ember {

enum class BoundKind : uint8_t { Kernel, Delegate, Move, Jump };

struct GraphRunner::Bound {
  BoundKind kind = BoundKind::Kernel;
  uint8_t input_count = 0;
  uint8_t output_count = 0;
  uint32_t arg_begin = 0;   // into args_: inputs then outputs
  uint32_t a = 0, b = 0;    // Move: src, dst. Jump: cond, target.
  const OpInfo* info = nullptr;
  const KernelRegistry::Entry* kernel = nullptr;
  OpAttrs attrs;
};

namespace {

template <typename T>
uint32_t size_of(const flatbuffers::Vector<T>* v) { return v ? v->size() : 0; }

size_t align16(size_t n) { return (n + 15) & ~size_t{15}; }

uint32_t quantized_values(const fb::Graph& graph) {
  uint32_t n = 0;
  for (uint32_t v = 0; v < size_of(graph.values()); ++v) n += graph.values()->Get(v)->quant() != nullptr;
  return n;
}

uint32_t total_args(const fb::Graph& graph) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < size_of(graph.instructions()); ++i) {
    const fb::KernelCall* call = graph.instructions()->Get(i)->args_as_KernelCall();
    if (call) n += size_of(call->inputs()) + size_of(call->outputs());
  }
  return n;
}

void copy_ints(const flatbuffers::Vector<int32_t>* v, int32_t* out, uint32_t n) {
  for (uint32_t i = 0; i < n && v && i < v->size(); ++i) out[i] = v->Get(i);
}

// Fills the plain-data attributes from the op's table (shapes validated by the validator).
static_assert(kMaxRnnActivations == 6, "runtime/program/validator.cc's kMaxRnnActs");

void decode_attrs(const fb::KernelCall& call, OpAttrs* a) {
  switch (call.attrs_type()) {
    case fb::Attributes::GeluAttrs:
      a->kind = AttrKind::Gelu;
      a->gelu_approx = static_cast<GeluApprox>(call.attrs_as_GeluAttrs()->approximate());
      break;
    case fb::Attributes::AxisAttrs:
      a->kind = AttrKind::Axis;
      a->axis = call.attrs_as_AxisAttrs()->axis();
      break;
    case fb::Attributes::LinearAttrs:
      a->kind = AttrKind::Linear;
      a->activation_quant = static_cast<ActivationQuant>(call.attrs_as_LinearAttrs()->activation_quant());
      break;
    case fb::Attributes::Conv2dAttrs: {
      const fb::Conv2dAttrs* c = call.attrs_as_Conv2dAttrs();
      a->kind = AttrKind::Conv2d;
      copy_ints(c->stride(), a->stride, 2);
      copy_ints(c->padding(), a->padding, 4);
      copy_ints(c->dilation(), a->dilation, 2);
      a->groups = c->groups();
      a->out_min = c->out_min();
      a->out_max = c->out_max();
      copy_ints(c->output_padding(), a->output_padding, 2);
      break;
    }
    case fb::Attributes::Pool2dAttrs: {
      const fb::Pool2dAttrs* p = call.attrs_as_Pool2dAttrs();
      a->kind = AttrKind::Pool2d;
      copy_ints(p->kernel(), a->kernel, 2);
      copy_ints(p->stride(), a->stride, 2);
      copy_ints(p->padding(), a->padding, 4);
      copy_ints(p->dilation(), a->dilation, 2);
      a->ceil_mode = p->ceil_mode();
      a->count_include_pad = p->count_include_pad();
      break;
    }
    case fb::Attributes::NormAttrs:
      a->kind = AttrKind::Norm;
      a->axis = call.attrs_as_NormAttrs()->axis();
      a->epsilon = call.attrs_as_NormAttrs()->epsilon();
      break;
    case fb::Attributes::ReshapeAttrs: {
      const auto* dims = call.attrs_as_ReshapeAttrs()->dims();
      a->kind = AttrKind::Reshape;
      a->count = static_cast<uint8_t>(size_of(dims));
      for (uint32_t i = 0; i < a->count; ++i) {
        a->shape[i] = dims->Get(i)->max();
        a->shape_sym[i] = dims->Get(i)->sym();
      }
      break;
    }
    case fb::Attributes::PermuteAttrs: {
      const auto* perm = call.attrs_as_PermuteAttrs()->perm();
      a->kind = AttrKind::Permute;
      a->count = static_cast<uint8_t>(size_of(perm));
      copy_ints(perm, a->perm, a->count);
      break;
    }
    case fb::Attributes::SliceAttrs: {
      const fb::SliceAttrs* s = call.attrs_as_SliceAttrs();
      a->kind = AttrKind::Slice;
      a->count = static_cast<uint8_t>(size_of(s->axes()));
      for (uint32_t i = 0; i < a->count; ++i) {
        a->axes[i] = s->axes()->Get(i);
        a->starts[i] = s->starts()->Get(i);
        a->ends[i] = s->ends()->Get(i);
        a->steps[i] = s->steps()->Get(i);
        a->ends_sym[i] = s->ends_sym() != nullptr ? s->ends_sym()->Get(i) : 0;
      }
      break;
    }
    case fb::Attributes::ClipAttrs:
      a->kind = AttrKind::Clip;
      a->clip_min = call.attrs_as_ClipAttrs()->min();
      a->clip_max = call.attrs_as_ClipAttrs()->max();
      break;
    case fb::Attributes::HardSigmoidAttrs:
      a->kind = AttrKind::HardSigmoid;
      a->alpha = call.attrs_as_HardSigmoidAttrs()->alpha();
      a->beta = call.attrs_as_HardSigmoidAttrs()->beta();
      break;
    case fb::Attributes::ArgAttrs: {
      const fb::ArgAttrs* r = call.attrs_as_ArgAttrs();
      a->kind = AttrKind::Arg;
      a->axis = r->axis();
      a->keepdims = r->keepdims();
      a->select_last_index = r->select_last_index();
      break;
    }
    case fb::Attributes::TopKAttrs: {
      const fb::TopKAttrs* r = call.attrs_as_TopKAttrs();
      a->kind = AttrKind::TopK;
      a->axis = r->axis();
      a->k = r->k();
      a->largest = r->largest();
      a->sorted = r->sorted();
      break;
    }
    case fb::Attributes::CumSumAttrs: {
      const fb::CumSumAttrs* r = call.attrs_as_CumSumAttrs();
      a->kind = AttrKind::CumSum;
      a->axis = r->axis();
      a->exclusive = r->exclusive();
      a->reverse = r->reverse();
      break;
    }
    case fb::Attributes::GroupNormAttrs:
      a->kind = AttrKind::GroupNorm;
      a->groups = call.attrs_as_GroupNormAttrs()->groups();
      a->epsilon = call.attrs_as_GroupNormAttrs()->epsilon();
      break;
    case fb::Attributes::ResizeAttrs: {
      const fb::ResizeAttrs* r = call.attrs_as_ResizeAttrs();
      a->kind = AttrKind::Resize;
      a->resize_mode = static_cast<ResizeMode>(r->mode());
      a->resize_coord = static_cast<ResizeCoord>(r->coord());
      a->resize_nearest = static_cast<ResizeNearest>(r->nearest());
      a->cubic_a = r->cubic_a();
      a->exclude_outside = r->exclude_outside();
      a->count = static_cast<uint8_t>(size_of(r->scales()));
      for (uint32_t d = 0; d < a->count; ++d) {
        a->resize_scales[d] = r->scales()->Get(d);
        a->shape[d] = r->sizes()->Get(d);
      }
      break;
    }
    case fb::Attributes::RnnAttrs: {
      const fb::RnnAttrs* r = call.attrs_as_RnnAttrs();
      a->kind = AttrKind::Rnn;
      a->rnn_direction = static_cast<RnnDirection>(r->direction());
      a->hidden_size = r->hidden_size();
      a->rnn_act_count = static_cast<uint8_t>(size_of(r->activations()));
      for (uint32_t k = 0; k < a->rnn_act_count; ++k) {
        a->rnn_act[k] = static_cast<RnnActivation>(r->activations()->Get(k));
        a->rnn_alpha[k] = r->activation_alpha()->Get(k);
        a->rnn_beta[k] = r->activation_beta()->Get(k);
      }
      a->rnn_clip = r->clip();
      a->linear_before_reset = r->linear_before_reset();
      a->input_forget = r->input_forget();
      break;
    }
    case fb::Attributes::ReduceAttrs: {
      const fb::ReduceAttrs* r = call.attrs_as_ReduceAttrs();
      a->kind = AttrKind::Reduce;
      a->count = static_cast<uint8_t>(size_of(r->axes()));
      copy_ints(r->axes(), a->axes, a->count);
      a->keepdims = r->keepdims();
      break;
    }
    case fb::Attributes::PadAttrs: {
      const fb::PadAttrs* p = call.attrs_as_PadAttrs();
      a->kind = AttrKind::Pad;
      a->count = static_cast<uint8_t>(size_of(p->pads()) / 2);  // rank the pads cover
      for (uint32_t i = 0; i < size_of(p->pads()); ++i) a->pads[i] = p->pads()->Get(i);
      a->pad_value = p->value();
      a->pad_mode = static_cast<PadMode>(p->mode());
      break;
    }
    case fb::Attributes::CastAttrs:
      a->kind = AttrKind::Cast;
      a->cast_to = static_cast<ScalarType>(call.attrs_as_CastAttrs()->to());
      break;
    case fb::Attributes::AttentionAttrs:
      a->kind = AttrKind::Attention;
      a->attn_scale = call.attrs_as_AttentionAttrs()->scale();
      a->kv_scale = call.attrs_as_AttentionAttrs()->kv_scale();
      a->attn_window = call.attrs_as_AttentionAttrs()->sliding_window();
      a->attn_softcap = call.attrs_as_AttentionAttrs()->softcap();
      break;
    default:
      a->kind = AttrKind::None;
      break;
  }
  // Expand shares Reshape's table; BatchNorm shares Norm's (decoded above by table type).
}

}  // namespace

// Every missing kernel of a graph, grouped by key, so one KernelMissing message names each distinct
// signature once with its instructions ("linear(f32, f8_e4m3fn, -, f32) at 0, 2, 4 (node fc1)").
struct GraphRunner::MissingKernels {
  static constexpr uint32_t kMaxKeys = 32;
  struct Entry {
    KernelKey key;
    uint32_t first_instruction;
    uint32_t count;
    char instructions[40];
  };
  Entry entries[kMaxKeys];
  uint32_t key_count = 0;
  uint32_t instruction_count = 0;

  void add(const KernelKey& key, uint32_t instruction) {
    ++instruction_count;
    for (uint32_t k = 0; k < key_count; ++k) {
      Entry& e = entries[k];
      if (e.key == key) {
        const size_t used = std::strlen(e.instructions);
        if (used + 1 < sizeof(e.instructions)) {
          std::snprintf(e.instructions + used, sizeof(e.instructions) - used, ", %u", instruction);
        }
        ++e.count;
        return;
      }
    }
    if (key_count == kMaxKeys) return;  // counted, not named
    Entry& e = entries[key_count++];
    e.key = key;
    e.first_instruction = instruction;
    e.count = 1;
    std::snprintf(e.instructions, sizeof(e.instructions), "%u", instruction);
  }
};

size_t GraphRunner::memory_bytes(const fb::Graph& graph) {
  const size_t values = size_of(graph.values());
  return align16(values * sizeof(TensorView)) + align16(values * sizeof(uint64_t)) +
         align16(size_of(graph.symbols()) * sizeof(int64_t)) +
         align16(size_of(graph.instructions()) * sizeof(Bound)) + align16(total_args(graph) * sizeof(int32_t)) +
         align16(quantized_values(graph) * sizeof(QuantView));
}

KernelKey GraphRunner::kernel_key(const fb::Graph& graph, const fb::KernelCall& call) {
  auto view_of = [&](int32_t v) {
    TensorView view;
    if (v < 0) return view;
    tensor_shape(*graph.values()->Get(static_cast<uint32_t>(v)), &view);
    return view;
  };
  const uint32_t n_in = size_of(call.inputs()), n_out = size_of(call.outputs());
  if (n_in + n_out > static_cast<uint32_t>(kMaxKernelArgs)) return KernelKey{};  // bind() reports it
  TensorView in[kMaxKernelArgs], out[kMaxKernelArgs];
  QuantView quant[kMaxKernelArgs];  // layouts only: what the key needs
  for (uint32_t k = 0; k < n_in; ++k) {
    const int32_t v = call.inputs()->Get(k);
    in[k] = view_of(v);
    const fb::QuantInfo* q = v >= 0 ? graph.values()->Get(static_cast<uint32_t>(v))->quant() : nullptr;
    if (q != nullptr && in[k].rank == 2 && size_of(q->block()) == 2) {
      quant[k].layout = classify_quant(in[k].dtype, static_cast<ScalarType>(q->scale_dtype()), in[k].dims[0],
                                       in[k].dims[1], q->block()->Get(0), q->block()->Get(1), q->global_scale() >= 0);
      in[k].quant = &quant[k];
    }
  }
  for (uint32_t k = 0; k < n_out; ++k) out[k] = view_of(static_cast<int32_t>(call.outputs()->Get(k)));
  return make_kernel_key(static_cast<OpCode>(call.op()), in, n_in, out, n_out);
}

size_t GraphRunner::scratch_bytes(const fb::Graph& graph, const KernelRegistry* kernels, size_t threads) {
  if (kernels == nullptr) return 0;
  size_t most = 0;
  for (uint32_t i = 0; i < size_of(graph.instructions()); ++i) {
    const fb::Instruction& ins = *graph.instructions()->Get(i);
    if (ins.args_type() != fb::InstructionArgs::KernelCall) continue;
    const fb::KernelCall& call = *ins.args_as_KernelCall();
    const uint32_t n_in = size_of(call.inputs()), n_out = size_of(call.outputs());
    if (n_in + n_out > static_cast<uint32_t>(kMaxKernelArgs)) continue;  // bind() reports it
    const KernelRegistry::Entry* entry = kernels->find(kernel_key(graph, call));
    if (entry == nullptr || entry->scratch == nullptr) continue;
    TensorView in[kMaxKernelArgs], out[kMaxKernelArgs];
    for (uint32_t k = 0; k < n_in; ++k) {
      const int32_t v = call.inputs()->Get(k);
      if (v >= 0) tensor_shape(*graph.values()->Get(static_cast<uint32_t>(v)), &in[k]);
    }
    for (uint32_t k = 0; k < n_out; ++k) tensor_shape(*graph.values()->Get(call.outputs()->Get(k)), &out[k]);
    OpAttrs attrs;
    decode_attrs(call, &attrs);
    const size_t need = entry->scratch(attrs, in, n_in, out, n_out, threads);
    if (need > most) most = need;
  }
  return most;
}

const char* GraphRunner::node_name(uint32_t instruction) const {
  const uint32_t id = graph_.graph().instructions()->Get(instruction)->debug_id();
  if (debug_ == nullptr || id == 0 || id > size_of(debug_->nodes())) return "";
  const fb::DebugNode* node = debug_->nodes()->Get(id - 1);
  return node->name() ? node->name()->c_str() : "";
}

Status GraphRunner::bind(const GraphView& graph, const KernelRegistry* kernels, const fb::DebugInfo* debug,
                         BumpAllocator& allocator, ResolveFn resolve, void* user, ErrorContext* ctx) {
  graph_ = graph;
  debug_ = debug;
  const fb::Graph& g = graph.graph();
  value_count_ = size_of(g.values());
  instruction_count_ = size_of(g.instructions());
  symbol_count_ = size_of(g.symbols());
  const uint32_t arg_count = total_args(g);
  values_ = static_cast<TensorView*>(allocator.allocate(align16(value_count_ * sizeof(TensorView)), 16));
  capacity_ = static_cast<uint64_t*>(allocator.allocate(align16(value_count_ * sizeof(uint64_t)), 16));
  symbols_ = static_cast<int64_t*>(allocator.allocate(align16(symbol_count_ * sizeof(int64_t)), 16));
  instructions_ = static_cast<Bound*>(allocator.allocate(align16(instruction_count_ * sizeof(Bound)), 16));
  args_ = static_cast<int32_t*>(allocator.allocate(align16(arg_count * sizeof(int32_t)), 16));
  const uint32_t quant_count = quantized_values(g);
  quant_views_ = static_cast<QuantView*>(allocator.allocate(align16(quant_count * sizeof(QuantView)), 16));
  if (!values_ || !capacity_ || !symbols_ || !instructions_ || !args_ || (quant_count > 0 && !quant_views_)) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "method allocator too small: binding needs %zu bytes",
                      memory_bytes(g));
  }
  for (uint32_t s = 0; s < symbol_count_; ++s) symbols_[s] = g.symbols()->Get(s)->max();
  for (uint32_t v = 0; v < value_count_; ++v) {
    const fb::Tensor& t = *g.values()->Get(v);
    new (&values_[v]) TensorView();
    tensor_shape(t, &values_[v]);
    EMBER_RETURN_IF_ERROR(resolve(user, v, t, &values_[v], ctx));
    capacity_[v] = t.storage_type() == fb::Storage::StateStorage ? values_[v].nbytes() : t.nbytes();
  }
  // Quantized weights (the validator checked their scales: constants of the stated dtype and shape).
  uint32_t next_quant = 0;
  for (uint32_t v = 0; v < value_count_; ++v) {
    const fb::QuantInfo* q = g.values()->Get(v)->quant();
    if (q == nullptr) continue;
    QuantView* view = new (&quant_views_[next_quant++]) QuantView();
    view->block[0] = q->block()->Get(0);
    view->block[1] = q->block()->Get(1);
    view->scale_dtype = static_cast<ScalarType>(q->scale_dtype());
    view->scale = values_[q->scale()].data;
    view->global_scale = q->global_scale() >= 0 ? static_cast<const float*>(values_[q->global_scale()].data) : nullptr;
    view->layout = classify_quant(values_[v].dtype, view->scale_dtype, values_[v].dims[0], values_[v].dims[1],
                                  view->block[0], view->block[1], view->global_scale != nullptr);
    // One scan per bind, so the kernels need not scan the codes at every call.
    if (values_[v].dtype == ScalarType::F8E4M3FN && values_[v].data != nullptr && !device_memory_) {
      view->nan_codes = e4m3_any_nan_code(static_cast<const uint8_t*>(values_[v].data), values_[v].nbytes());
    }
    values_[v].quant = view;
  }

  MissingKernels missing;
  uint32_t next_arg = 0;
  for (uint32_t i = 0; i < instruction_count_; ++i) {
    const fb::Instruction& ins = *g.instructions()->Get(i);
    Bound* b = new (&instructions_[i]) Bound();
    switch (ins.args_type()) {
      case fb::InstructionArgs::KernelCall: {
        const fb::KernelCall& call = *ins.args_as_KernelCall();
        b->kind = BoundKind::Kernel;
        b->arg_begin = next_arg;
        b->input_count = static_cast<uint8_t>(size_of(call.inputs()));
        b->output_count = static_cast<uint8_t>(size_of(call.outputs()));
        for (uint32_t k = 0; k < b->input_count; ++k) args_[next_arg++] = call.inputs()->Get(k);
        for (uint32_t k = 0; k < b->output_count; ++k) args_[next_arg++] = static_cast<int32_t>(call.outputs()->Get(k));
        if (!values_only_) EMBER_RETURN_IF_ERROR(bind_kernel(i, call, kernels, &missing, ctx));
        break;
      }
      case fb::InstructionArgs::DelegateCall: b->kind = BoundKind::Delegate; break;
      case fb::InstructionArgs::Move:
        b->kind = BoundKind::Move;
        b->a = ins.args_as_Move()->src();
        b->b = ins.args_as_Move()->dst();
        break;
      case fb::InstructionArgs::JumpIfFalse:
        b->kind = BoundKind::Jump;
        b->a = ins.args_as_JumpIfFalse()->cond();
        b->b = ins.args_as_JumpIfFalse()->target();
        break;
      default:
        return EMBER_FAIL(ctx, Error::InvalidProgram, "instruction %u has no kind", i);
    }
  }
  if (missing.instruction_count > 0) {
    if (ctx) ctx->phase = ErrorContext::Phase::Load;
    char text[ErrorContext::kMessageSize * 2] = {0};
    size_t used = 0;
    for (uint32_t k = 0; k < missing.key_count && used + 1 < sizeof(text); ++k) {
      const MissingKernels::Entry& e = missing.entries[k];
      char key[128];
      format_key(e.key, key, sizeof(key));
      const char* node = node_name(e.first_instruction);
      const int n = std::snprintf(text + used, sizeof(text) - used, "%s%s at %s%s%s%s", k ? "; " : "", key,
                                  e.instructions, node[0] ? " (node " : "", node, node[0] ? ")" : "");
      used += n > 0 ? static_cast<size_t>(n) : 0;
    }
    if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(missing.entries[0].first_instruction);
    return EMBER_FAIL(ctx, Error::KernelMissing, "%u instruction(s), %u signature(s) without a kernel: %s",
                      missing.instruction_count, missing.key_count, text);
  }
  // Check every kernel's output shape at the upper bounds against what the file declares, so a
  // kernel can never write past its planned bytes.
  for (uint32_t i = 0; !values_only_ && i < instruction_count_; ++i) {
    const Bound& b = instructions_[i];
    if (b.kind != BoundKind::Kernel) continue;
    TensorView in[kMaxKernelArgs], out[kMaxKernelArgs];
    for (uint32_t k = 0; k < b.input_count; ++k) {
      const int32_t v = args_[b.arg_begin + k];
      in[k] = v < 0 ? TensorView() : values_[v];
    }
    for (uint32_t k = 0; k < b.output_count; ++k) out[k] = values_[args_[b.arg_begin + b.input_count + k]];
    ErrorContext local;
    if (!b.info->shape(b.attrs, in, b.input_count, out, b.output_count,
                       Span<const int64_t>(symbols_, symbol_count_), &local).is_ok()) {
      if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(i);
      return EMBER_FAIL(ctx, Error::InvalidProgram, "instruction %u (%s%s%s): %s", i, b.info->name,
                        node_name(i)[0] ? " node " : "", node_name(i), local.message);
    }
    for (uint32_t k = 0; k < b.output_count; ++k) {
      const uint32_t v = static_cast<uint32_t>(args_[b.arg_begin + b.input_count + k]);
      const fb::Tensor& t = *g.values()->Get(v);
      bool ok = out[k].dtype == values_[v].dtype && out[k].rank == values_[v].rank;
      for (int d = 0; ok && d < out[k].rank; ++d) ok = out[k].dims[d] == t.dims()->Get(d)->max();
      // A static graph never re-checks output sizes at run time, so storage sized at load (state whose
      // dims use a LoadOptions symbol below its max) must hold the output here.
      if (ok && symbol_count_ == 0 && out[k].nbytes() > capacity_[v]) {
        if (ctx && !ctx->has_error()) { ctx->instruction = static_cast<int32_t>(i); ctx->value = static_cast<int32_t>(v); }
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "instruction %u (%s): output %u needs %llu bytes, its storage holds %llu (state sized "
                          "with a load-time symbol value below the max?)", i, b.info->name, k,
                          static_cast<unsigned long long>(out[k].nbytes()),
                          static_cast<unsigned long long>(capacity_[v]));
      }
      if (!ok) {
        char got[96], want[96];
        format_dims(out[k].dims, out[k].rank, got, sizeof(got));
        format_dims(values_[v].dims, values_[v].rank, want, sizeof(want));
        if (ctx && !ctx->has_error()) { ctx->instruction = static_cast<int32_t>(i); ctx->value = static_cast<int32_t>(v); }
        return EMBER_FAIL(ctx, Error::InvalidProgram,
                          "instruction %u (%s): output %u computes %s %s, the program declares %s %s", i,
                          b.info->name, k, to_string(out[k].dtype), got, to_string(values_[v].dtype), want);
      }
    }
  }
  return Status::ok();
}

Status GraphRunner::bind_kernel(uint32_t i, const fb::KernelCall& call, const KernelRegistry* kernels,
                                MissingKernels* missing, ErrorContext* ctx) {
  Bound& b = instructions_[i];
  const OpCode op = static_cast<OpCode>(call.op());
  b.info = find_op_info(op);
  if (b.info == nullptr) return EMBER_FAIL(ctx, Error::InvalidProgram, "instruction %u: unknown op %u", i, static_cast<unsigned>(op));
  if (b.input_count < b.info->min_inputs || b.input_count > b.info->max_inputs || b.output_count != b.info->outputs) {
    if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(i);
    return EMBER_FAIL(ctx, Error::InvalidProgram, "instruction %u: %s takes %u..%u inputs and %u outputs, has %u and %u",
                      i, b.info->name, b.info->min_inputs, b.info->max_inputs, b.info->outputs, b.input_count,
                      b.output_count);
  }
  decode_attrs(call, &b.attrs);
  TensorView args[kMaxKernelArgs];
  for (uint32_t k = 0; k < static_cast<uint32_t>(b.input_count + b.output_count); ++k) {
    const int32_t v = args_[b.arg_begin + k];
    if (v >= 0) args[k] = values_[v];
  }
  const KernelKey key = make_kernel_key(op, args, b.input_count, args + b.input_count, b.output_count);
  b.kernel = kernels ? kernels->find(key) : nullptr;
  if (b.kernel == nullptr) missing->add(key, i);
  return Status::ok();
}

Status GraphRunner::set_input_dims(uint32_t input, Span<const int64_t> dims, ErrorContext* ctx) {
  const fb::Graph& g = graph_.graph();
  if (input >= size_of(g.inputs())) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "input index %u out of range (%u inputs)", input, size_of(g.inputs()));
  }
  const fb::NamedValue* named = g.inputs()->Get(input);
  const fb::Tensor& t = *g.values()->Get(named->value());
  const uint32_t rank = size_of(t.dims());
  if (dims.size() != rank) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "input '%s': rank %zu given, the method takes rank %u",
                      named->name()->c_str(), dims.size(), rank);
  }
  for (uint32_t d = 0; d < rank; ++d) {
    const fb::Dim* dim = t.dims()->Get(d);
    if (dim->sym() == 0) {
      if (dims[d] != dim->max()) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "input '%s' dim %u: %lld given, the method takes %lld",
                          named->name()->c_str(), d, static_cast<long long>(dims[d]), static_cast<long long>(dim->max()));
      }
    } else {
      const fb::Symbol* sym = g.symbols()->Get(dim->sym() - 1u);
      if (dims[d] < sym->min() || dims[d] > sym->max()) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "input '%s' dim %u (%s): %lld given, allowed %lld..%lld",
                          named->name()->c_str(), d, sym->name()->c_str(), static_cast<long long>(dims[d]),
                          static_cast<long long>(sym->min()), static_cast<long long>(sym->max()));
      }
    }
  }
  TensorView& view = values_[named->value()];
  for (uint32_t d = 0; d < rank; ++d) view.dims[d] = dims[d];
  return Status::ok();
}

void GraphRunner::bind_value(uint32_t value, const TensorView& view) {
  TensorView& v = values_[value];
  v.data = view.data;
  v.domain = view.domain;
  v.rank = view.rank;
  for (int d = 0; d < view.rank; ++d) v.dims[d] = view.dims[d];
}

void GraphRunner::bind_io(Span<const TensorView> inputs, Span<const TensorView> outputs) {
  const fb::Graph& g = graph_.graph();
  for (size_t k = 0; k < inputs.size(); ++k) bind_value(g.inputs()->Get(static_cast<uint32_t>(k))->value(), inputs[k]);
  for (size_t k = 0; k < outputs.size(); ++k) bind_value(g.outputs()->Get(static_cast<uint32_t>(k))->value(), outputs[k]);
}

void GraphRunner::read_outputs(Span<TensorView> outputs) const {
  const fb::Graph& g = graph_.graph();
  for (size_t k = 0; k < outputs.size(); ++k) outputs[k] = values_[g.outputs()->Get(static_cast<uint32_t>(k))->value()];
}

Status GraphRunner::derive_symbols(ErrorContext* ctx) {
  const fb::Graph& g = graph_.graph();
  for (uint32_t s = 0; s < symbol_count_; ++s) symbols_[s] = -1;
  for (uint32_t i = 0; i < size_of(g.inputs()); ++i) {
    const uint32_t v = g.inputs()->Get(i)->value();
    const fb::Tensor& t = *g.values()->Get(v);
    for (uint32_t d = 0; d < size_of(t.dims()); ++d) {
      const uint16_t sym = t.dims()->Get(d)->sym();
      if (sym == 0) continue;
      const int64_t size = values_[v].dims[d];
      int64_t& bound = symbols_[sym - 1];
      if (bound >= 0 && bound != size) {
        return EMBER_FAIL(ctx, Error::InvalidArgument, "inputs disagree on symbol '%s': %lld vs %lld",
                          g.symbols()->Get(sym - 1u)->name()->c_str(), static_cast<long long>(bound),
                          static_cast<long long>(size));
      }
      bound = size;
    }
  }
  for (uint32_t s = 0; s < symbol_count_; ++s) {
    if (symbols_[s] < 0) symbols_[s] = g.symbols()->Get(s)->max();  // not bound by an input
  }
  return Status::ok();
}

Status GraphRunner::run_kernel(const Bound& b, uint32_t i, KernelContext& kernel_ctx, ErrorContext* ctx) {
  TensorView in[kMaxKernelArgs], out[kMaxKernelArgs];
  for (uint32_t k = 0; k < b.input_count; ++k) {
    const int32_t v = args_[b.arg_begin + k];
    if (v >= 0) in[k] = values_[v];
  }
  const int32_t* outs = args_ + b.arg_begin + b.input_count;
  for (uint32_t k = 0; k < b.output_count; ++k) out[k] = values_[outs[k]];
  if (symbol_count_ > 0) {
    if (!b.info->shape(b.attrs, in, b.input_count, out, b.output_count,
                       Span<const int64_t>(symbols_, symbol_count_), ctx).is_ok()) {
      if (ctx && ctx->instruction < 0) ctx->instruction = static_cast<int32_t>(i);
      // The shape function normally filled ctx (first failure wins); this keeps a message when it did not.
      return EMBER_FAIL(ctx, Error::InvalidArgument, "instruction %u (%s): shape function rejected the run-time sizes",
                        i, b.info->name);
    }
    for (uint32_t k = 0; k < b.output_count; ++k) {
      if (out[k].nbytes() > capacity_[outs[k]]) {
        if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(i);
        return EMBER_FAIL(ctx, Error::InvalidArgument,
                          "instruction %u (%s): output %u needs %llu bytes, %llu planned (inputs beyond the "
                          "exported bounds?)", i, b.info->name, k, static_cast<unsigned long long>(out[k].nbytes()),
                          static_cast<unsigned long long>(capacity_[outs[k]]));
      }
      TensorView& dst = values_[outs[k]];
      dst.rank = out[k].rank;
      for (int d = 0; d < out[k].rank; ++d) dst.dims[d] = out[k].dims[d];
    }
  }
  // Input-value checks read the data on the host; device memory is checked by its kernels instead
  // (backends/cuda: the device error word).
  if (!device_memory_ && b.info->check_inputs != nullptr && !b.info->check_inputs(b.attrs, in, b.input_count, ctx).is_ok()) {
    if (ctx && ctx->instruction < 0) ctx->instruction = static_cast<int32_t>(i);
    return EMBER_FAIL(ctx, Error::InvalidArgument, "instruction %u (%s): input values rejected", i, b.info->name);
  }
  kernel_ctx.instruction = i;
  b.kernel->fn(kernel_ctx, b.attrs, in, b.input_count, out, b.output_count);
  return Status::ok();
}

Status GraphRunner::call_binding(const DelegateBinding& binding, uint32_t instruction, const char* what,
                                 const uint32_t* ins, uint32_t in_count, const uint32_t* outs, uint32_t out_count,
                                 KernelContext& kernel_ctx, const std::atomic<bool>* abort, ErrorContext* ctx) {
  constexpr uint32_t kMaxArgs = 64;  // also enforced by the validator
  if (in_count > kMaxArgs || out_count > kMaxArgs) {
    return EMBER_FAIL(ctx, Error::NotSupported, "%s: more than %u inputs or outputs", what, kMaxArgs);
  }
  const fb::Graph& g = graph_.graph();
  TensorView in[kMaxArgs], out[kMaxArgs];
  for (uint32_t k = 0; k < in_count; ++k) in[k] = values_[ins[k]];
  for (uint32_t k = 0; k < out_count; ++k) {
    out[k] = values_[outs[k]];
    tensor_shape(*g.values()->Get(outs[k]), &out[k]);  // outputs arrive with their planned (max) dims
    out[k].data = values_[outs[k]].data;
  }
  if (binding.fallback != nullptr) {
    GraphRunner& r = *binding.fallback;
    r.bind_io(Span<const TensorView>(in, in_count), Span<const TensorView>(out, out_count));
    EMBER_RETURN_IF_ERROR(r.run(kernel_ctx, abort, ctx));
    r.read_outputs(Span<TensorView>(out, out_count));
  } else if (binding.backend != nullptr) {
    BackendExecuteContext exec_ctx;
    exec_ctx.pool = kernel_ctx.pool;
    exec_ctx.scratch = kernel_ctx.scratch;
    exec_ctx.error = ctx;
    exec_ctx.abort = abort;
    exec_ctx.tracer = tracer_;
    Status status = binding.backend->execute(exec_ctx, binding.handle, Span<const TensorView>(in, in_count),
                                             Span<TensorView>(out, out_count));
    // One wait per call: the next instruction (or the app) may read the outputs on the host.
    if (status.is_ok()) status = binding.backend->synchronize(exec_ctx, binding.handle);
    if (!status.is_ok()) {
      if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(instruction);
      return EMBER_FAIL(ctx, status.code(), "backend '%s' failed running %s", binding.name, what);
    }
  } else {
    return EMBER_FAIL(ctx, Error::Internal, "%s has no binding", what);
  }
  // A backend is trusted code, but a wrong rank or a dim past the declared max would overflow
  // dst.dims or let the next kernels run past planned memory: check before copying.
  for (uint32_t k = 0; k < out_count; ++k) {
    const fb::Tensor& t = *g.values()->Get(outs[k]);
    const uint32_t rank = size_of(t.dims());
    bool ok = out[k].rank == rank;
    for (uint32_t d = 0; ok && d < rank; ++d) ok = out[k].dims[d] >= 0 && out[k].dims[d] <= t.dims()->Get(d)->max();
    if (!ok) {
      if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(instruction);
      return EMBER_FAIL(ctx, Error::BackendFailed,
                        "backend '%s' running %s returned output %u with rank %u or dims beyond the declared rank %u "
                        "/ max dims", binding.name, what, k, static_cast<unsigned>(out[k].rank), rank);
    }
  }
  for (uint32_t k = 0; k < out_count; ++k) {  // actual output sizes (symbolic delegates)
    TensorView& dst = values_[outs[k]];
    dst.rank = out[k].rank;
    for (int d = 0; d < out[k].rank; ++d) dst.dims[d] = out[k].dims[d];
  }
  return Status::ok();
}

Status GraphRunner::run_delegate(uint32_t i, const fb::DelegateCall& call, KernelContext& kernel_ctx,
                                 const std::atomic<bool>* abort, ErrorContext* ctx) {
  if (call.index() >= delegates_.size()) {
    return EMBER_FAIL(ctx, Error::Internal, "instruction %u: delegate %u has no binding", i, call.index());
  }
  uint32_t ins[64], outs[64];  // the validator allows at most 64 of each
  const uint32_t in_count = size_of(call.inputs()), out_count = size_of(call.outputs());
  for (uint32_t k = 0; k < in_count && k < 64; ++k) ins[k] = call.inputs()->Get(k);
  for (uint32_t k = 0; k < out_count && k < 64; ++k) outs[k] = call.outputs()->Get(k);
  char what[32];
  std::snprintf(what, sizeof(what), "delegate %u", call.index());
  return call_binding(delegates_[call.index()], i, what, ins, in_count, outs, out_count, kernel_ctx, abort, ctx);
}

Status GraphRunner::run_on_backend(const DelegateBinding& backend, KernelContext& kernel_ctx,
                                   const std::atomic<bool>* abort, ErrorContext* ctx) {
  if (abort != nullptr && abort->load(std::memory_order_relaxed)) {
    return EMBER_FAIL(ctx, Error::Cancelled, "execution cancelled");
  }
  const fb::Graph& g = graph_.graph();
  uint32_t ins[64], outs[64];
  const uint32_t in_count = size_of(g.inputs()), out_count = size_of(g.outputs());
  for (uint32_t k = 0; k < in_count && k < 64; ++k) ins[k] = g.inputs()->Get(k)->value();
  for (uint32_t k = 0; k < out_count && k < 64; ++k) outs[k] = g.outputs()->Get(k)->value();
  return call_binding(backend, 0, "the whole method", ins, in_count, outs, out_count, kernel_ctx, abort, ctx);
}

Status GraphRunner::run(KernelContext& kernel_ctx, const std::atomic<bool>* abort, ErrorContext* ctx) {
  if (values_only_) return EMBER_FAIL(ctx, Error::Internal, "run() on a graph bound for its values only");
  if (symbol_count_ > 0) EMBER_RETURN_IF_ERROR(derive_symbols(ctx));
  uint32_t pc = 0;
  uint64_t steps = 0;
  while (pc < instruction_count_) {
    if (step_limit_ != 0 && ++steps > step_limit_) {
      if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(pc);
      return EMBER_FAIL(ctx, Error::Cancelled, "stopped after %llu instructions (a loop that does not end?)",
                        static_cast<unsigned long long>(step_limit_));
    }
    if (abort != nullptr && abort->load(std::memory_order_relaxed)) {
      if (ctx && !ctx->has_error()) ctx->instruction = static_cast<int32_t>(pc);
      return EMBER_FAIL(ctx, Error::Cancelled, "execution cancelled before instruction %u", pc);
    }
    const Bound& b = instructions_[pc];
#if EMBER_ENABLE_EVENT_TRACER
    if (tracer_ != nullptr) {
      tracer_->begin_instruction(pc, b.kind == BoundKind::Kernel ? b.info->name : instruction_library(pc),
                                 node_name(pc));
    }
#endif
    switch (b.kind) {
      case BoundKind::Kernel:
        EMBER_RETURN_IF_ERROR(run_kernel(b, pc, kernel_ctx, ctx));
        break;
      case BoundKind::Delegate: {
        const fb::DelegateCall& call = *graph_.graph().instructions()->Get(pc)->args_as_DelegateCall();
        EMBER_RETURN_IF_ERROR(run_delegate(pc, call, kernel_ctx, abort, ctx));
        break;
      }
      case BoundKind::Move: {
        TensorView& dst = values_[b.b];
        const TensorView& src = values_[b.a];
        // The validator proved equal max sizes, but a destination sized at load (state with a load-time
        // symbol value) may hold less.
        if (src.nbytes() > capacity_[b.b]) {
          if (ctx && !ctx->has_error()) { ctx->instruction = static_cast<int32_t>(pc); ctx->value = static_cast<int32_t>(b.b); }
          return EMBER_FAIL(ctx, Error::InvalidArgument, "instruction %u (move): %llu bytes into value %u, which holds %llu",
                            pc, static_cast<unsigned long long>(src.nbytes()), b.b,
                            static_cast<unsigned long long>(capacity_[b.b]));
        }
        if (dst.data != src.data) std::memmove(dst.data, src.data, src.nbytes());
        dst.rank = src.rank;
        for (int d = 0; d < src.rank; ++d) dst.dims[d] = src.dims[d];
        break;
      }
      case BoundKind::Jump:
        // Read as a byte: a file may hold any value there, and loading a bool that is not 0/1 is UB.
        if (*static_cast<const uint8_t*>(values_[b.a].data) == 0) {
#if EMBER_ENABLE_EVENT_TRACER
          if (tracer_ != nullptr) tracer_->end_instruction(pc);
#endif
          pc = b.b;
          continue;
        }
        break;
    }
#if EMBER_ENABLE_EVENT_TRACER
    if (tracer_ != nullptr) tracer_->end_instruction(pc);
#endif
    ++pc;
  }
  return Status::ok();
}

const char* GraphRunner::instruction_library(uint32_t i) const {
  const Bound& b = instructions_[i];
  switch (b.kind) {
    case BoundKind::Kernel: return b.kernel ? b.kernel->library : "?";
    case BoundKind::Delegate: return "delegate";
    case BoundKind::Move: return "move";
    case BoundKind::Jump: return "jump";
  }
  return "?";
}

}  // namespace ember
