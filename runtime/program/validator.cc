#include "runtime/program/validator.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/core/quant.h"

namespace ember {
namespace {

constexpr uint32_t kNoIndex = 0xFFFFFFFFu;
// LSTM: 3 activations per direction, 2 directions (= kMaxRnnActivations in runtime/kernel/op.h; the
// program library does not include the kernel headers; graph_runner.cc asserts they agree).
constexpr uint32_t kMaxRnnActs = 6;

// The FlatBuffers verifier (2.0.8) checks a vector's length field for 4-byte alignment only, not its
// elements: a hostile file can place [long] or [Dim] vectors 4 bytes off, and reading them would be
// a misaligned access. Every 8-byte-element vector is checked here before it is read.
template <typename V>
bool aligned8(const V* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->Data()) % 8 == 0;
}

struct Where {
  const char* method;
  const char* graph;  // "method" or "delegate N"
};

template <typename T>
uint32_t size_of(const flatbuffers::Vector<T>* v) { return v ? v->size() : 0; }

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

bool tensor_max_nbytes(const fb::Tensor& tensor, uint64_t* out) {
  const ScalarType dtype = static_cast<ScalarType>(tensor.dtype());
  if (!is_valid(dtype)) return false;
  uint64_t numel = 1;
  const uint32_t rank = size_of(tensor.dims());
  for (uint32_t i = 0; i < rank; ++i) {
    const int64_t d = tensor.dims()->Get(i)->max();
    if (d < 0 || mul_overflows(numel, static_cast<uint64_t>(d), &numel)) return false;
  }
  if (numel > (uint64_t{1} << 60)) return false;
  *out = nbytes_of(dtype, numel);
  return true;
}

namespace {

class GraphValidator {
 public:
  GraphValidator(const fb::Program& program, const fb::Method& method, const fb::Graph& graph,
                 Span<const SegmentData> segments, bool is_delegate, uint32_t delegate_index,
                 ErrorContext* ctx)
      : program_(program), method_(method), graph_(graph), segments_(segments),
        is_delegate_(is_delegate), delegate_index_(delegate_index), ctx_(ctx) {}

  Status run() {
    EMBER_RETURN_IF_ERROR(check_symbols());
    value_count_ = size_of(graph_.values());
    if (value_count_ > (1u << 24)) return fail_graph("has %u values (limit 16M)", value_count_);
    EMBER_RETURN_IF_ERROR(check_io());
    for (uint32_t v = 0; v < value_count_; ++v) EMBER_RETURN_IF_ERROR(check_value(v));
    EMBER_RETURN_IF_ERROR(check_instructions());
    return check_lifetimes();
  }

 private:
  template <typename... Args>
  Status fail_graph(const char* format, Args... args) {
    char what[160];
    std::snprintf(what, sizeof(what), format, args...);
    if (is_delegate_) {
      return EMBER_FAIL(ctx_, Error::InvalidProgram, "method '%s' delegate %u graph: %s",
                        method_.name()->c_str(), delegate_index_, what);
    }
    return EMBER_FAIL(ctx_, Error::InvalidProgram, "method '%s': %s", method_.name()->c_str(), what);
  }
  template <typename... Args>
  Status fail_value(uint32_t v, const char* format, Args... args) {
    if (ctx_ && !ctx_->has_error()) ctx_->value = static_cast<int32_t>(v);
    char what[160];
    std::snprintf(what, sizeof(what), format, args...);
    return fail_graph("value %u: %s", v, what);
  }
  template <typename... Args>
  Status fail_instruction(uint32_t i, const char* format, Args... args) {
    if (ctx_ && !ctx_->has_error()) ctx_->instruction = static_cast<int32_t>(i);
    char what[160];
    std::snprintf(what, sizeof(what), format, args...);
    return fail_graph("instruction %u: %s", i, what);
  }

  Status check_symbols() {
    symbol_count_ = size_of(graph_.symbols());
    if (symbol_count_ > 0xFFFF) return fail_graph("has %u symbols (limit 65535)", symbol_count_);
    for (uint32_t s = 0; s < symbol_count_; ++s) {
      const fb::Symbol* sym = graph_.symbols()->Get(s);
      if (sym->min() < 0 || sym->min() > sym->max()) {
        return fail_graph("symbol '%s' has bounds [%lld, %lld]", sym->name()->c_str(),
                          static_cast<long long>(sym->min()), static_cast<long long>(sym->max()));
      }
    }
    return Status::ok();
  }

  Status check_io() {
    const auto check_list = [&](const flatbuffers::Vector<flatbuffers::Offset<fb::NamedValue>>* list,
                                const char* what, bool inputs) -> Status {
      for (uint32_t i = 0; i < size_of(list); ++i) {
        const uint32_t v = list->Get(i)->value();
        if (v >= value_count_) return fail_graph("%s %u names value %u of %u", what, i, v, value_count_);
        if (inputs) {
          if (is_input(v, i)) return fail_graph("value %u is listed twice as an input", v);
        }
      }
      return Status::ok();
    };
    EMBER_RETURN_IF_ERROR(check_list(graph_.inputs(), "input", true));
    EMBER_RETURN_IF_ERROR(check_list(graph_.outputs(), "output", false));
    for (uint32_t i = 0; i < size_of(graph_.outputs()); ++i) {
      const uint32_t v = graph_.outputs()->Get(i)->value();
      if (is_input(v, kNoIndex)) return fail_graph("value %u is both an input and an output", v);
      for (uint32_t j = 0; j < i; ++j) {
        if (graph_.outputs()->Get(j)->value() == v) return fail_graph("value %u is listed twice as an output", v);
      }
    }
    return Status::ok();
  }

  bool is_input(uint32_t v, uint32_t before) const {
    const uint32_t n = before == kNoIndex ? size_of(graph_.inputs()) : before;
    for (uint32_t i = 0; i < n; ++i) {
      if (graph_.inputs()->Get(i)->value() == v) return true;
    }
    return false;
  }
  bool is_output(uint32_t v) const {
    for (uint32_t i = 0; i < size_of(graph_.outputs()); ++i) {
      if (graph_.outputs()->Get(i)->value() == v) return true;
    }
    return false;
  }

  Status check_value(uint32_t v) {
    const fb::Tensor* t = graph_.values()->Get(v);
    const ScalarType dtype = static_cast<ScalarType>(t->dtype());
    if (!is_valid(dtype)) return fail_value(v, "invalid dtype %u", static_cast<unsigned>(t->dtype()));
    const uint32_t rank = size_of(t->dims());
    if (rank > static_cast<uint32_t>(kMaxRank)) return fail_value(v, "rank %u > %d", rank, kMaxRank);
    if (!aligned8(t->dims()) || (t->quant() != nullptr && !aligned8(t->quant()->block()))) {
      return fail_value(v, "dims or quant block vector is not 8-byte aligned");
    }
    if (t->dim_order() != fb::DimOrder::Contiguous && t->dim_order() != fb::DimOrder::ChannelsLast) {
      return fail_value(v, "invalid dim_order %u", static_cast<unsigned>(t->dim_order()));
    }
    for (uint32_t d = 0; d < rank; ++d) {
      const fb::Dim* dim = t->dims()->Get(d);
      if (dim->max() < 0) return fail_value(v, "dim %u is %lld", d, static_cast<long long>(dim->max()));
      if (dim->sym() != 0) {
        if (dim->sym() > symbol_count_) {
          return fail_value(v, "dim %u names symbol %u of %u", d, dim->sym(), symbol_count_);
        }
        const fb::Symbol* sym = graph_.symbols()->Get(dim->sym() - 1u);
        if (dim->max() != sym->max()) {
          return fail_value(v, "dim %u max %lld differs from symbol '%s' max %lld", d,
                            static_cast<long long>(dim->max()), sym->name()->c_str(),
                            static_cast<long long>(sym->max()));
        }
      }
    }
    if (is_sub_byte(dtype) && (rank == 0 || t->dims()->Get(rank - 1)->max() % 2 != 0)) {
      return fail_value(v, "sub-byte dtype %s needs an even innermost dim", to_string(dtype));
    }
    uint64_t nbytes = 0;
    if (!tensor_max_nbytes(*t, &nbytes)) return fail_value(v, "size overflows");
    if (nbytes != t->nbytes()) {
      return fail_value(v, "nbytes %llu, but dtype and dims give %llu",
                        static_cast<unsigned long long>(t->nbytes()), static_cast<unsigned long long>(nbytes));
    }
    if (t->quant() != nullptr) {
      const fb::QuantInfo* q = t->quant();
      if (q->scale() >= value_count_) return fail_value(v, "quant scale value %u out of range", q->scale());
      if (!is_valid(static_cast<ScalarType>(q->scale_dtype())) || q->scale_layout() != fb::ScaleLayout::RowMajor) {
        return fail_value(v, "quant info has an invalid scale dtype or layout");
      }
      if (q->global_scale() < -1 || q->global_scale() >= static_cast<int32_t>(value_count_)) {
        return fail_value(v, "quant global scale value %d out of range", q->global_scale());
      }
      if (size_of(q->block()) != rank) return fail_value(v, "quant block has %u entries for rank %u", size_of(q->block()), rank);
      for (uint32_t d = 0; d < rank; ++d) {
        if (q->block()->Get(d) <= 0) return fail_value(v, "quant block %u is not positive", d);
      }
    }
    EMBER_RETURN_IF_ERROR(check_storage(v, *t, nbytes));
    if (t->quant() != nullptr) EMBER_RETURN_IF_ERROR(check_quant(v, *t));
    return Status::ok();
  }

  // A quantized weight (runtime/core/quant.h): a constant 2-D tensor with static dims whose scale
  // (and NVFP4 global scale) are constants of the stated dtype and shape, in a supported layout.
  Status check_quant(uint32_t v, const fb::Tensor& t) {
    const fb::QuantInfo& q = *t.quant();
    const ScalarType dtype = static_cast<ScalarType>(t.dtype());
    const ScalarType scale_dtype = static_cast<ScalarType>(q.scale_dtype());
    if (size_of(t.dims()) != 2) return fail_value(v, "quantized tensor has rank %u; only 2-D weights [N, K] are", size_of(t.dims()));
    if (t.storage_type() != fb::Storage::ConstantStorage) return fail_value(v, "quantized tensor is not a constant");
    const int64_t n = t.dims()->Get(0)->max(), k = t.dims()->Get(1)->max();
    if (t.dims()->Get(0)->sym() != 0 || t.dims()->Get(1)->sym() != 0) return fail_value(v, "quantized tensor has symbolic dims");
    const int64_t bn = q.block()->Get(0), bk = q.block()->Get(1);
    const QuantLayout layout = classify_quant(dtype, scale_dtype, n, k, bn, bk, q.global_scale() >= 0);
    if (layout == QuantLayout::None) {
      if (ctx_ && !ctx_->has_error()) ctx_->value = static_cast<int32_t>(v);
      return EMBER_FAIL(ctx_, Error::NotSupported,
                        "method '%s' value %u: quantization %s data, %s scales, block [%lld, %lld]%s is not a supported "
                        "layout", method_.name()->c_str(), v, to_string(dtype), to_string(scale_dtype),
                        static_cast<long long>(bn), static_cast<long long>(bk),
                        q.global_scale() >= 0 ? " with a global scale" : "");
    }
    const fb::Tensor& s = *graph_.values()->Get(q.scale());
    const int64_t rows = (n + bn - 1) / bn, cols = (k + bk - 1) / bk;
    if (q.scale() == v || s.quant() != nullptr || s.storage_type() != fb::Storage::ConstantStorage ||
        static_cast<ScalarType>(s.dtype()) != scale_dtype || size_of(s.dims()) != 2 || s.dims()->Get(0)->max() != rows ||
        s.dims()->Get(1)->max() != cols) {
      return fail_value(v, "quant scale value %u must be a constant %s [%lld, %lld]", q.scale(), to_string(scale_dtype),
                        static_cast<long long>(rows), static_cast<long long>(cols));
    }
    if (q.global_scale() >= 0) {
      const fb::Tensor& g = *graph_.values()->Get(static_cast<uint32_t>(q.global_scale()));
      uint64_t numel = 1;
      for (uint32_t d = 0; d < size_of(g.dims()); ++d) numel *= static_cast<uint64_t>(g.dims()->Get(d)->max());
      if (g.storage_type() != fb::Storage::ConstantStorage || static_cast<ScalarType>(g.dtype()) != ScalarType::F32 ||
          numel != 1 || g.quant() != nullptr) {
        return fail_value(v, "quant global scale value %d must be a constant f32 scalar", q.global_scale());
      }
    }
    return Status::ok();
  }

  Status check_storage(uint32_t v, const fb::Tensor& t, uint64_t nbytes) {
    const bool io = is_input(v, kNoIndex) || is_output(v);
    // A union tag naming a member whose table is absent passes the FlatBuffers verifier.
    if (t.storage_type() != fb::Storage::NONE && t.storage() == nullptr) {
      return fail_value(v, "storage tag %u without its table", static_cast<unsigned>(t.storage_type()));
    }
    switch (t.storage_type()) {
      case fb::Storage::NONE:
        if (is_delegate_ && io) return Status::ok();
        return fail_value(v, "has no storage");
      case fb::Storage::ConstantStorage: {
        const fb::ConstantStorage* c = t.storage_as_ConstantStorage();
        if (io) return fail_value(v, "is a graph input/output but constant");
        if (c->segment() >= segments_.size()) {
          return fail_value(v, "constant segment %u of %zu", c->segment(), segments_.size());
        }
        const SegmentData& seg = segments_[c->segment()];
        if (seg.kind != fb::SegmentKind::Constants) return fail_value(v, "constant in a non-constant segment %u", c->segment());
        if (c->offset() % kTensorAlignment != 0 || c->offset() > seg.size || nbytes > seg.size - c->offset()) {
          return fail_value(v, "constant [%llu, +%llu) outside segment %u of %llu bytes (or misaligned)",
                            static_cast<unsigned long long>(c->offset()), static_cast<unsigned long long>(nbytes),
                            c->segment(), static_cast<unsigned long long>(seg.size));
        }
        return Status::ok();
      }
      case fb::Storage::PlannedStorage: {
        const fb::PlannedStorage* p = t.storage_as_PlannedStorage();
        if (is_delegate_ && io) return fail_value(v, "delegate input/output must have no storage");
        const uint32_t arena_count = size_of(method_.arenas());
        if (p->arena() >= arena_count) return fail_value(v, "arena %u of %u", p->arena(), arena_count);
        const fb::Arena* arena = method_.arenas()->Get(p->arena());
        if (p->offset() % arena->alignment() != 0 || p->offset() > arena->size() ||
            nbytes > arena->size() - p->offset()) {
          return fail_value(v, "planned [%llu, +%llu) outside arena %u of %llu bytes (or misaligned)",
                            static_cast<unsigned long long>(p->offset()), static_cast<unsigned long long>(nbytes),
                            p->arena(), static_cast<unsigned long long>(arena->size()));
        }
        if (!is_delegate_ && io && arena->kind() != fb::ArenaKind::IO) {
          return fail_value(v, "method input/output is not in an IO arena");
        }
        return Status::ok();
      }
      case fb::Storage::StateStorage: {
        // A delegate graph may name state (its backend claims it at load, runtime/backend/README.md);
        // state is never passed as I/O, to a method or to a delegate.
        if (io) return fail_value(v, is_delegate_ ? "a delegate input/output cannot be state"
                                                  : "a method input/output cannot be state");
        const char* name = t.storage_as_StateStorage()->name()->c_str();
        for (uint32_t s = 0; s < size_of(program_.states()); ++s) {
          const fb::StateDecl* decl = program_.states()->Get(s);
          if (std::strcmp(decl->name()->c_str(), name) != 0) continue;
          bool same = decl->dtype() == t.dtype() && size_of(decl->dims()) == size_of(t.dims());
          for (uint32_t d = 0; same && d < size_of(t.dims()); ++d) {
            same = decl->dims()->Get(d)->max() == t.dims()->Get(d)->max();
          }
          if (!same) return fail_value(v, "state '%s' dtype or dims differ from its declaration", name);
          return Status::ok();
        }
        return fail_value(v, "state '%s' is not declared by the program", name);
      }
    }
    return fail_value(v, "unknown storage tag %u", static_cast<unsigned>(t.storage_type()));
  }

  // Static facts per op the validator needs without linking the kernel library: attribute table and
  // which input positions may be absent. Arity and shapes are checked when kernels are bound.
  // `state_mask`: inputs that must be program state, written in place by the kernel (OpInfo::state_inputs).
  static bool op_spec(fb::OpCode op, fb::Attributes* attrs, uint32_t* optional_mask, uint32_t* state_mask) {
    *optional_mask = 0;
    *state_mask = 0;
    switch (op) {
      case fb::OpCode::Add: case fb::OpCode::Sub: case fb::OpCode::Mul: case fb::OpCode::Div:
      case fb::OpCode::Relu: case fb::OpCode::Silu: case fb::OpCode::Sigmoid: case fb::OpCode::Tanh:
      case fb::OpCode::MatMul: case fb::OpCode::GlobalAvgPool2d:
        *attrs = fb::Attributes::NONE; return true;
      case fb::OpCode::Gelu: *attrs = fb::Attributes::GeluAttrs; return true;
      case fb::OpCode::Linear: *attrs = fb::Attributes::LinearAttrs; *optional_mask = 1u << 2; return true;
      case fb::OpCode::Conv2d: *attrs = fb::Attributes::Conv2dAttrs; *optional_mask = 1u << 2; return true;
      case fb::OpCode::MaxPool2d: case fb::OpCode::AvgPool2d: *attrs = fb::Attributes::Pool2dAttrs; return true;
      case fb::OpCode::Softmax: case fb::OpCode::Concat: *attrs = fb::Attributes::AxisAttrs; return true;
      case fb::OpCode::LayerNorm: *attrs = fb::Attributes::NormAttrs; *optional_mask = 0x6; return true;
      case fb::OpCode::Reshape: *attrs = fb::Attributes::ReshapeAttrs; return true;
      case fb::OpCode::Transpose: *attrs = fb::Attributes::PermuteAttrs; return true;
      case fb::OpCode::Slice: *attrs = fb::Attributes::SliceAttrs; return true;
      case fb::OpCode::Clip: *attrs = fb::Attributes::ClipAttrs; return true;
      case fb::OpCode::HardSigmoid: *attrs = fb::Attributes::HardSigmoidAttrs; return true;
      case fb::OpCode::HardSwish: case fb::OpCode::Erf: case fb::OpCode::Sqrt: case fb::OpCode::Exp:
      case fb::OpCode::Pow: case fb::OpCode::Where: case fb::OpCode::Equal: case fb::OpCode::Neg:
        *attrs = fb::Attributes::NONE; return true;
      case fb::OpCode::ReduceMean: case fb::OpCode::ReduceSum: *attrs = fb::Attributes::ReduceAttrs; return true;
      case fb::OpCode::Pad: *attrs = fb::Attributes::PadAttrs; return true;
      case fb::OpCode::Gather: *attrs = fb::Attributes::AxisAttrs; return true;
      case fb::OpCode::Cast: *attrs = fb::Attributes::CastAttrs; return true;
      case fb::OpCode::Expand: *attrs = fb::Attributes::ReshapeAttrs; return true;
      case fb::OpCode::BatchNorm: *attrs = fb::Attributes::NormAttrs; return true;
      case fb::OpCode::RmsNorm: *attrs = fb::Attributes::NormAttrs; return true;
      case fb::OpCode::Rope: case fb::OpCode::SiluMul: case fb::OpCode::Embedding: case fb::OpCode::Sample:
      case fb::OpCode::LogitsGather:
        *attrs = fb::Attributes::NONE; return true;
      case fb::OpCode::PagedAttention:
        *attrs = fb::Attributes::AttentionAttrs; *state_mask = (1u << 3) | (1u << 4); return true;
      // Issue 17.
      case fb::OpCode::LeakyRelu: case fb::OpCode::Elu: case fb::OpCode::Selu:
        *attrs = fb::Attributes::HardSigmoidAttrs; return true;
      case fb::OpCode::PRelu: case fb::OpCode::Softplus: case fb::OpCode::Log: case fb::OpCode::Abs:
      case fb::OpCode::Reciprocal: case fb::OpCode::Floor: case fb::OpCode::Ceil: case fb::OpCode::Round:
      case fb::OpCode::Sin: case fb::OpCode::Cos: case fb::OpCode::Greater: case fb::OpCode::Less:
      case fb::OpCode::GreaterOrEqual: case fb::OpCode::LessOrEqual: case fb::OpCode::And: case fb::OpCode::Or:
      case fb::OpCode::Xor: case fb::OpCode::Not: case fb::OpCode::Max: case fb::OpCode::Min:
        *attrs = fb::Attributes::NONE; return true;
      case fb::OpCode::ReduceMax: case fb::OpCode::ReduceMin: case fb::OpCode::ReduceProd:
        *attrs = fb::Attributes::ReduceAttrs; return true;
      case fb::OpCode::ArgMax: case fb::OpCode::ArgMin: *attrs = fb::Attributes::ArgAttrs; return true;
      case fb::OpCode::TopK: *attrs = fb::Attributes::TopKAttrs; return true;
      case fb::OpCode::CumSum: *attrs = fb::Attributes::CumSumAttrs; return true;
      case fb::OpCode::GatherElements: *attrs = fb::Attributes::AxisAttrs; return true;
      case fb::OpCode::GroupNorm: *attrs = fb::Attributes::GroupNormAttrs; return true;
      case fb::OpCode::Resize: *attrs = fb::Attributes::ResizeAttrs; return true;
      case fb::OpCode::ConvTranspose2d: *attrs = fb::Attributes::Conv2dAttrs; *optional_mask = 1u << 2; return true;
      case fb::OpCode::Lstm: *attrs = fb::Attributes::RnnAttrs; *optional_mask = 0xF8; return true;
      case fb::OpCode::Gru: *attrs = fb::Attributes::RnnAttrs; *optional_mask = 0x38; return true;
      default: return false;
    }
  }

  Status check_value_index(uint32_t i, int64_t v, const char* what) {
    if (v < 0 || v >= value_count_) return fail_instruction(i, "%s value %lld of %u", what, static_cast<long long>(v), value_count_);
    return Status::ok();
  }

  Status check_written(uint32_t i, uint32_t v) {
    const fb::Tensor* t = graph_.values()->Get(v);
    if (t->storage_type() == fb::Storage::ConstantStorage) return fail_instruction(i, "writes constant value %u", v);
    if (is_input(v, kNoIndex)) return fail_instruction(i, "writes graph input value %u", v);
    return Status::ok();
  }

  Status check_attrs(uint32_t i, const fb::KernelCall& call) {
    if (call.attrs_type() != fb::Attributes::NONE && call.attrs() == nullptr) {
      return fail_instruction(i, "attribute table %u is missing", static_cast<unsigned>(call.attrs_type()));
    }
    switch (call.attrs_type()) {
      case fb::Attributes::GeluAttrs: {
        const auto a = call.attrs_as_GeluAttrs()->approximate();
        if (a != fb::GeluApprox::None && a != fb::GeluApprox::Tanh) return fail_instruction(i, "invalid gelu approximation");
        return Status::ok();
      }
      case fb::Attributes::LinearAttrs: {
        const auto q = call.attrs_as_LinearAttrs()->activation_quant();
        if (q == fb::ActivationQuant::None) return Status::ok();
        if (q != fb::ActivationQuant::Fp8PerToken) return fail_instruction(i, "invalid linear activation quant %u", static_cast<unsigned>(q));
        // W8A8: the weight is FP8 with one scale per tensor or per output channel.
        const int32_t w = size_of(call.inputs()) > 1 ? call.inputs()->Get(1) : -1;
        const fb::Tensor* t = w >= 0 && static_cast<uint32_t>(w) < value_count_ ? graph_.values()->Get(static_cast<uint32_t>(w)) : nullptr;
        const fb::QuantInfo* wq = t != nullptr ? t->quant() : nullptr;
        const QuantLayout layout =
            wq != nullptr && size_of(t->dims()) == 2 && size_of(wq->block()) == 2
                ? classify_quant(static_cast<ScalarType>(t->dtype()), static_cast<ScalarType>(wq->scale_dtype()),
                                 t->dims()->Get(0)->max(), t->dims()->Get(1)->max(), wq->block()->Get(0),
                                 wq->block()->Get(1), wq->global_scale() >= 0)
                : QuantLayout::None;
        const bool ok = layout == QuantLayout::PerTensor || layout == QuantLayout::PerChannel;
        if (!ok) return fail_instruction(i, "linear with FP8 per-token activations needs an f8_e4m3fn weight with per-tensor or per-channel f32 scales");
        return Status::ok();
      }
      case fb::Attributes::Conv2dAttrs: {
        const fb::Conv2dAttrs* a = call.attrs_as_Conv2dAttrs();
        if (size_of(a->stride()) != 2 || size_of(a->padding()) != 4 || size_of(a->dilation()) != 2) {
          return fail_instruction(i, "conv2d needs stride[2], padding[4], dilation[2]");
        }
        // The output clamp: a runtime that ignored it would run a plain conv, hence the feature bit.
        const float lo = a->out_min(), hi = a->out_max();
        if (lo != lo || hi != hi) {
          return fail_instruction(i, "conv2d output clamp [%g, %g] has a NaN bound", double(lo), double(hi));
        }
        if (lo > hi) return fail_instruction(i, "conv2d output clamp min %g > max %g", double(lo), double(hi));
        if (a->output_padding() != nullptr && size_of(a->output_padding()) != 2) {
          return fail_instruction(i, "conv output_padding has %u entries (expected 2)", size_of(a->output_padding()));
        }
        const bool clamps = lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity();
        if (clamps && (program_.required_features() & kFeatureConvClamp) == 0) {
          return fail_instruction(i, "conv2d output clamp [%g, %g] without the conv_clamp feature bit", double(lo),
                                  double(hi));
        }
        return Status::ok();
      }
      case fb::Attributes::Pool2dAttrs: {
        const fb::Pool2dAttrs* a = call.attrs_as_Pool2dAttrs();
        if (size_of(a->kernel()) != 2 || size_of(a->stride()) != 2 || size_of(a->padding()) != 4 ||
            size_of(a->dilation()) != 2) {
          return fail_instruction(i, "pool needs kernel[2], stride[2], padding[4], dilation[2]");
        }
        return Status::ok();
      }
      case fb::Attributes::ReshapeAttrs: {
        const auto* dims = call.attrs_as_ReshapeAttrs()->dims();
        if (size_of(dims) > static_cast<uint32_t>(kMaxRank)) return fail_instruction(i, "reshape to rank > %d", kMaxRank);
        if (!aligned8(dims)) return fail_instruction(i, "reshape dims vector is not 8-byte aligned");
        for (uint32_t d = 0; d < size_of(dims); ++d) {
          if (dims->Get(d)->sym() > symbol_count_) return fail_instruction(i, "reshape names symbol %u of %u", dims->Get(d)->sym(), symbol_count_);
        }
        return Status::ok();
      }
      case fb::Attributes::ReduceAttrs:
        if (size_of(call.attrs_as_ReduceAttrs()->axes()) > static_cast<uint32_t>(kMaxRank)) {
          return fail_instruction(i, "reduce over more than %d axes", kMaxRank);
        }
        return Status::ok();
      case fb::Attributes::ResizeAttrs: {
        const fb::ResizeAttrs* a = call.attrs_as_ResizeAttrs();
        if (!aligned8(a->sizes())) return fail_instruction(i, "resize sizes vector is not 8-byte aligned");
        if (size_of(a->scales()) > static_cast<uint32_t>(kMaxRank) || size_of(a->sizes()) != size_of(a->scales())) {
          return fail_instruction(i, "resize has %u scales and %u sizes (one each per dim, rank <= %d)",
                                  size_of(a->scales()), size_of(a->sizes()), kMaxRank);
        }
        if (a->mode() < fb::ResizeMode::Nearest || a->mode() > fb::ResizeMode::Cubic ||
            a->coord() < fb::ResizeCoord::HalfPixel || a->coord() > fb::ResizeCoord::HalfPixelSymmetric ||
            a->nearest() < fb::ResizeNearest::RoundPreferFloor || a->nearest() > fb::ResizeNearest::Ceil) {
          return fail_instruction(i, "resize mode %u / coordinate mode %u / nearest mode %u out of range",
                                  static_cast<unsigned>(a->mode()), static_cast<unsigned>(a->coord()),
                                  static_cast<unsigned>(a->nearest()));
        }
        return Status::ok();
      }
      case fb::Attributes::RnnAttrs: {
        const fb::RnnAttrs* a = call.attrs_as_RnnAttrs();
        const uint32_t n = size_of(a->activations());
        if (a->direction() < fb::RnnDirection::Forward || a->direction() > fb::RnnDirection::Bidirectional) {
          return fail_instruction(i, "rnn direction %u out of range", static_cast<unsigned>(a->direction()));
        }
        if (n > kMaxRnnActs || size_of(a->activation_alpha()) != n ||
            size_of(a->activation_beta()) != n) {
          return fail_instruction(i, "rnn has %u activations, %u alphas and %u betas (equal counts, <= %d)", n,
                                  size_of(a->activation_alpha()), size_of(a->activation_beta()), kMaxRnnActs);
        }
        for (uint32_t k = 0; k < n; ++k) {
          const auto act = a->activations()->Get(k);
          if (act < fb::RnnActivation::Sigmoid || act > fb::RnnActivation::Softplus) {
            return fail_instruction(i, "rnn activation %u is %u (out of range)", k, static_cast<unsigned>(act));
          }
        }
        return Status::ok();
      }
      case fb::Attributes::PadAttrs: {
        const fb::PadAttrs* a = call.attrs_as_PadAttrs();
        if (!aligned8(a->pads())) return fail_instruction(i, "pad pads vector is not 8-byte aligned");
        if (size_of(a->pads()) > 2u * kMaxRank || size_of(a->pads()) % 2 != 0) {
          return fail_instruction(i, "pad has %u pads (an even count up to %d)", size_of(a->pads()), 2 * kMaxRank);
        }
        if (a->mode() != fb::PadMode::Constant && a->mode() != fb::PadMode::Reflect && a->mode() != fb::PadMode::Edge) {
          return fail_instruction(i, "invalid pad mode %u", static_cast<unsigned>(a->mode()));
        }
        return Status::ok();
      }
      case fb::Attributes::CastAttrs:
        if (!is_valid(static_cast<ScalarType>(call.attrs_as_CastAttrs()->to()))) {
          return fail_instruction(i, "cast to invalid dtype %u", static_cast<unsigned>(call.attrs_as_CastAttrs()->to()));
        }
        return Status::ok();
      case fb::Attributes::PermuteAttrs:
        if (size_of(call.attrs_as_PermuteAttrs()->perm()) > static_cast<uint32_t>(kMaxRank)) return fail_instruction(i, "perm longer than %d", kMaxRank);
        return Status::ok();
      case fb::Attributes::SliceAttrs: {
        const fb::SliceAttrs* a = call.attrs_as_SliceAttrs();
        if (!aligned8(a->starts()) || !aligned8(a->ends()) || !aligned8(a->steps())) {
          return fail_instruction(i, "slice starts/ends/steps vector is not 8-byte aligned");
        }
        const uint32_t n = size_of(a->axes());
        if (n > static_cast<uint32_t>(kMaxRank) || size_of(a->starts()) != n || size_of(a->ends()) != n || size_of(a->steps()) != n) {
          return fail_instruction(i, "slice axes/starts/ends/steps lengths differ or exceed %d", kMaxRank);
        }
        if (a->ends_sym() != nullptr) {
          if (size_of(a->ends_sym()) != n) return fail_instruction(i, "slice ends_sym has %u entries for %u axes", size_of(a->ends_sym()), n);
          for (uint32_t j = 0; j < n; ++j) {
            if (a->ends_sym()->Get(j) > symbol_count_) {
              return fail_instruction(i, "slice ends_sym[%u] names symbol %u of %u", j, a->ends_sym()->Get(j), symbol_count_);
            }
          }
        }
        return Status::ok();
      }
      default:
        return Status::ok();
    }
  }

  Status check_instructions() {
    const uint32_t count = size_of(graph_.instructions());
    for (uint32_t i = 0; i < count; ++i) {
      const fb::Instruction* ins = graph_.instructions()->Get(i);
      // A union tag naming a member whose table is absent passes the FlatBuffers verifier.
      if (ins->args_type() != fb::InstructionArgs::NONE && ins->args() == nullptr) {
        return fail_instruction(i, "instruction kind %u without its table", static_cast<unsigned>(ins->args_type()));
      }
      switch (ins->args_type()) {
        case fb::InstructionArgs::KernelCall: {
          const fb::KernelCall* call = ins->args_as_KernelCall();
          fb::Attributes expected;
          uint32_t optional_mask, state_mask;
          if (!op_spec(call->op(), &expected, &optional_mask, &state_mask)) {
            return fail_instruction(i, "unknown op code %u", static_cast<unsigned>(call->op()));
          }
          if (call->attrs_type() != expected) {
            return fail_instruction(i, "op %u has attribute table %u, expected %u",
                                    static_cast<unsigned>(call->op()),
                                    static_cast<unsigned>(call->attrs_type()), static_cast<unsigned>(expected));
          }
          EMBER_RETURN_IF_ERROR(check_attrs(i, *call));
          const uint32_t n_in = size_of(call->inputs()), n_out = size_of(call->outputs());
          if (n_in + n_out > 16) return fail_instruction(i, "%u arguments (limit 16)", n_in + n_out);
          for (uint32_t k = 0; k < n_in; ++k) {
            const int32_t v = call->inputs()->Get(k);
            if (v == -1 && k < 32 && (optional_mask >> k) & 1) continue;
            EMBER_RETURN_IF_ERROR(check_value_index(i, v, "input"));
            if (k < 32 && (state_mask >> k) & 1 &&
                graph_.values()->Get(static_cast<uint32_t>(v))->storage_type() != fb::Storage::StateStorage) {
              return fail_instruction(i, "input %u (value %d) is written in place and must be program state", k, v);
            }
          }
          for (uint32_t k = 0; k < n_out; ++k) {
            const uint32_t v = call->outputs()->Get(k);
            EMBER_RETURN_IF_ERROR(check_value_index(i, v, "output"));
            EMBER_RETURN_IF_ERROR(check_written(i, v));
          }
          break;
        }
        case fb::InstructionArgs::DelegateCall: {
          if (is_delegate_) return fail_instruction(i, "a delegate graph cannot call a delegate");
          EMBER_RETURN_IF_ERROR(check_delegate_call(i, *ins->args_as_DelegateCall()));
          break;
        }
        case fb::InstructionArgs::Move: {
          const fb::Move* m = ins->args_as_Move();
          EMBER_RETURN_IF_ERROR(check_value_index(i, m->src(), "move source"));
          EMBER_RETURN_IF_ERROR(check_value_index(i, m->dst(), "move destination"));
          EMBER_RETURN_IF_ERROR(check_written(i, m->dst()));
          const fb::Tensor* a = graph_.values()->Get(m->src());
          const fb::Tensor* b = graph_.values()->Get(m->dst());
          if (a->dtype() != b->dtype() || a->nbytes() != b->nbytes()) return fail_instruction(i, "move between different dtypes or sizes");
          // schema/README: same dtype *and dims*. Equal nbytes is not enough: the destination takes the
          // source's rank and dims, and a static graph never re-runs shape functions, so its consumers
          // would see dims their load-time checks never saw.
          bool same_dims = size_of(a->dims()) == size_of(b->dims());
          for (uint32_t d = 0; same_dims && d < size_of(a->dims()); ++d) {
            same_dims = a->dims()->Get(d)->max() == b->dims()->Get(d)->max();
          }
          if (!same_dims) return fail_instruction(i, "move between values of different dims (%u -> %u)", m->src(), m->dst());
          break;
        }
        case fb::InstructionArgs::JumpIfFalse: {
          const fb::JumpIfFalse* j = ins->args_as_JumpIfFalse();
          EMBER_RETURN_IF_ERROR(check_value_index(i, j->cond(), "jump condition"));
          const fb::Tensor* c = graph_.values()->Get(j->cond());
          if (c->dtype() != fb::ScalarType::Bool || size_of(c->dims()) != 0) return fail_instruction(i, "jump condition is not a 0-d bool");
          if (j->target() > count) return fail_instruction(i, "jump target %u beyond %u instructions", j->target(), count);
          if ((program_.required_features() & kFeatureControlFlow) == 0) {
            return fail_instruction(i, "jump without the control_flow feature bit");
          }
          break;
        }
        default:
          return fail_instruction(i, "unknown or missing instruction kind %u", static_cast<unsigned>(ins->args_type()));
      }
    }
    return Status::ok();
  }

  Status check_delegate_call(uint32_t i, const fb::DelegateCall& call) {
    const uint32_t n = size_of(method_.delegates());
    if (call.index() >= n) return fail_instruction(i, "delegate %u of %u", call.index(), n);
    const fb::Delegate* d = method_.delegates()->Get(call.index());
    if (size_of(call.inputs()) > 64 || size_of(call.outputs()) > 64) {
      return fail_instruction(i, "delegate call with more than 64 inputs or outputs");
    }
    for (uint32_t k = 0; k < size_of(call.inputs()); ++k) EMBER_RETURN_IF_ERROR(check_value_index(i, call.inputs()->Get(k), "delegate input"));
    for (uint32_t k = 0; k < size_of(call.outputs()); ++k) {
      EMBER_RETURN_IF_ERROR(check_value_index(i, call.outputs()->Get(k), "delegate output"));
      EMBER_RETURN_IF_ERROR(check_written(i, call.outputs()->Get(k)));
    }
    if (d->format() != fb::DelegateFormat::Graph) return Status::ok();  // OPAQUE: the backend checks
    const fb::Graph* g = d->payload_nested_root();
    const auto same = [&](uint32_t caller_value, uint32_t callee_value) {
      const fb::Tensor* a = graph_.values()->Get(caller_value);
      const fb::Tensor* b = g->values()->Get(callee_value);
      if (a->dtype() != b->dtype() || size_of(a->dims()) != size_of(b->dims())) return false;
      for (uint32_t k = 0; k < size_of(a->dims()); ++k) {
        if (a->dims()->Get(k)->max() != b->dims()->Get(k)->max()) return false;
        // A dim the callee takes as static must be static in the caller too: the callee never re-runs
        // shape functions for it, so a smaller run-time size would reach its kernels unchecked.
        if (b->dims()->Get(k)->sym() == 0 && a->dims()->Get(k)->sym() != 0) return false;
      }
      return true;
    };
    if (size_of(call.inputs()) != size_of(g->inputs()) || size_of(call.outputs()) != size_of(g->outputs())) {
      return fail_instruction(i, "delegate %u takes %u inputs / %u outputs, call passes %u / %u", call.index(),
                              size_of(g->inputs()), size_of(g->outputs()), size_of(call.inputs()), size_of(call.outputs()));
    }
    for (uint32_t k = 0; k < size_of(call.inputs()); ++k) {
      if (!same(call.inputs()->Get(k), g->inputs()->Get(k)->value())) return fail_instruction(i, "delegate input %u dtype/dims differ (or a symbolic dim is static in the delegate)", k);
    }
    for (uint32_t k = 0; k < size_of(call.outputs()); ++k) {
      if (!same(call.outputs()->Get(k), g->outputs()->Get(k)->value())) return fail_instruction(i, "delegate output %u dtype/dims differ (or a symbolic dim is static in the delegate)", k);
    }
    return Status::ok();
  }

  Status check_lifetimes() {
    const uint32_t n = size_of(graph_.lifetimes());
    if (n == 0) return Status::ok();
    if (n != value_count_) return fail_graph("%u lifetimes for %u values", n, value_count_);
    const uint32_t count = size_of(graph_.instructions());
    for (uint32_t v = 0; v < n; ++v) {
      const fb::Lifetime* l = graph_.lifetimes()->Get(v);
      if (l->first() > l->last() || (count > 0 && l->last() >= count)) {
        return fail_value(v, "lifetime [%u, %u] outside %u instructions", l->first(), l->last(), count);
      }
    }
    return Status::ok();
  }

  const fb::Program& program_;
  const fb::Method& method_;
  const fb::Graph& graph_;
  Span<const SegmentData> segments_;
  bool is_delegate_;
  uint32_t delegate_index_;
  ErrorContext* ctx_;
  uint32_t value_count_ = 0;
  uint32_t symbol_count_ = 0;
};

}  // namespace

namespace {

// LlmInfo.tokenizer (docs/DESIGN.md §6): what llm::Tokenizer::load needs to index safely. load() itself
// checks the rest (merge results, duplicates, dense added ids, UTF-8 of added tokens).
Status validate_tokenizer(const fb::TokenizerTable& t, int32_t vocab_size, ErrorContext* ctx) {
  const uint32_t count = t.token_count();
  if (count == 0 || count > static_cast<uint32_t>(vocab_size)) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.token_count %u is 0 or above llm.vocab_size %d", count,
                      vocab_size);
  }
  const uint32_t offset_count = size_of(t.token_offsets());
  if (offset_count != count + 1) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.token_offsets has %u entries, token_count %u needs %u",
                      offset_count, count, count + 1);
  }
  const flatbuffers::Vector<uint32_t>& offsets = *t.token_offsets();
  if (offsets.Get(0) != 0) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.token_offsets[0] is %u, not 0", offsets.Get(0));
  }
  for (uint32_t i = 1; i < offset_count; ++i) {
    if (offsets.Get(i) < offsets.Get(i - 1)) {
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.token_offsets[%u] = %u is below [%u] = %u", i,
                        offsets.Get(i), i - 1, offsets.Get(i - 1));
    }
  }
  if (offsets.Get(count) != size_of(t.token_bytes())) {
    return EMBER_FAIL(ctx, Error::InvalidProgram,
                      "llm.tokenizer.token_offsets[%u] = %u, but token_bytes holds %u bytes", count, offsets.Get(count),
                      size_of(t.token_bytes()));
  }
  if (t.model_token_count() == 0 || t.model_token_count() > count) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.model_token_count %u is 0 or above token_count %u",
                      t.model_token_count(), count);
  }
  const uint32_t merge_words = size_of(t.merges());
  if (merge_words % 2 != 0) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.merges has %u entries, not (left, right) pairs",
                      merge_words);
  }
  for (uint32_t i = 0; i < merge_words; ++i) {
    if (t.merges()->Get(i) >= count) {
      return EMBER_FAIL(ctx, Error::InvalidProgram,
                        "llm.tokenizer.merges[%u] (pair %u) = %u is not below token_count %u", i, i / 2,
                        t.merges()->Get(i), count);
    }
  }
  for (uint32_t i = 0; i < size_of(t.added_tokens()); ++i) {
    const fb::TokenizerAddedToken* a = t.added_tokens()->Get(i);
    if (a->id() >= count) {
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.added_tokens[%u].id %u is not below token_count %u",
                        i, a->id(), count);
    }
    if (a->content()->size() == 0) {
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.added_tokens[%u] (id %u) has empty content", i,
                        a->id());
    }
  }
  if (t.pre_tokenizer() == fb::PreTokenizerKind::Invalid || t.pre_tokenizer() > fb::PreTokenizerKind::MAX) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.pre_tokenizer %u is unknown",
                      static_cast<unsigned>(t.pre_tokenizer()));
  }
  if (t.normalizer() == fb::NormalizerKind::Invalid || t.normalizer() > fb::NormalizerKind::MAX) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.normalizer %u is unknown",
                      static_cast<unsigned>(t.normalizer()));
  }
  if (t.metaspace_prepend() == fb::MetaspacePrepend::Invalid || t.metaspace_prepend() > fb::MetaspacePrepend::MAX) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.metaspace_prepend %u is unknown",
                      static_cast<unsigned>(t.metaspace_prepend()));
  }
  if (t.decoder() == fb::DecoderKind::Invalid || t.decoder() > fb::DecoderKind::MAX) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.decoder %u is unknown",
                      static_cast<unsigned>(t.decoder()));
  }
  if (t.unk_id() < -1 || (t.unk_id() >= 0 && static_cast<uint32_t>(t.unk_id()) >= count)) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.unk_id %d is not -1 or below token_count %u",
                      t.unk_id(), count);
  }
  if (t.chat_format() == fb::ChatFormat::Invalid || t.chat_format() > fb::ChatFormat::MAX) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.chat_format %u is unknown",
                      static_cast<unsigned>(t.chat_format()));
  }
  if (t.add_bos() && t.bos_id() >= count) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.tokenizer.bos_id %u is not below token_count %u", t.bos_id(),
                      count);
  }
  return Status::ok();
}

Status validate_llm_info(const fb::LlmInfo& llm, ErrorContext* ctx) {
  const struct {
    const char* name;
    int32_t value;
  } sizes[] = {{"vocab_size", llm.vocab_size()},   {"block_size", llm.block_size()},
               {"max_seqs", llm.max_seqs()},       {"max_tokens", llm.max_tokens()},
               {"max_context", llm.max_context()}, {"max_blocks_per_seq", llm.max_blocks_per_seq()},
               {"num_layers", llm.num_layers()},   {"kv_heads", llm.kv_heads()},
               {"head_dim", llm.head_dim()}};
  for (const auto& s : sizes) {
    if (s.value <= 0) return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.%s is %d, not positive", s.name, s.value);
  }
  if (llm.max_tokens() < llm.max_seqs()) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.max_tokens %d is below llm.max_seqs %d", llm.max_tokens(),
                      llm.max_seqs());
  }
  if (llm.max_context() % llm.block_size() != 0 ||
      int64_t{llm.max_blocks_per_seq()} * llm.block_size() < llm.max_context()) {
    return EMBER_FAIL(ctx, Error::InvalidProgram,
                      "llm.max_context %d is not a multiple of llm.block_size %d or exceeds llm.max_blocks_per_seq %d "
                      "blocks", llm.max_context(), llm.block_size(), llm.max_blocks_per_seq());
  }
  const fb::ScalarType kv = llm.kv_dtype();
  if (kv != fb::ScalarType::F32 && kv != fb::ScalarType::F16 && kv != fb::ScalarType::BF16 &&
      kv != fb::ScalarType::F8E4M3FN) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.kv_dtype %u is not a KV cache dtype (f32, f16, bf16, f8e4m3fn)",
                      static_cast<unsigned>(kv));
  }
  for (uint32_t i = 0; i < size_of(llm.eos_ids()); ++i) {
    const int32_t id = llm.eos_ids()->Get(i);
    if (id < 0 || id >= llm.vocab_size()) {
      return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.eos_ids[%u] = %d is outside [0, llm.vocab_size %d)", i, id,
                        llm.vocab_size());
    }
  }
  if (llm.bos_id() < -1 || llm.bos_id() >= llm.vocab_size()) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.bos_id %d is neither -1 nor below llm.vocab_size %d",
                      llm.bos_id(), llm.vocab_size());
  }
  // NaN fails every comparison below, so it is rejected too.
  if (llm.temperature().has_value() && !(*llm.temperature() >= 0.0f && *llm.temperature() <= 1e6f)) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.temperature %g is not in [0, 1e6]",
                      static_cast<double>(*llm.temperature()));
  }
  if (llm.top_k().has_value() && *llm.top_k() < 0) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.top_k %d is negative", *llm.top_k());
  }
  if (llm.top_p().has_value() && !(*llm.top_p() > 0.0f && *llm.top_p() <= 1.0f)) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.top_p %g is not in (0, 1]", static_cast<double>(*llm.top_p()));
  }
  if (llm.repetition_penalty().has_value() &&
      !(*llm.repetition_penalty() > 0.0f && *llm.repetition_penalty() <= 1e6f)) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "llm.repetition_penalty %g is not in (0, 1e6]",
                      static_cast<double>(*llm.repetition_penalty()));
  }
  if (llm.tokenizer() != nullptr) EMBER_RETURN_IF_ERROR(validate_tokenizer(*llm.tokenizer(), llm.vocab_size(), ctx));
  return Status::ok();
}

}  // namespace

Status validate_delegate_graph(const fb::Graph& graph, const fb::Program& program, const fb::Method& method,
                               Span<const SegmentData> segments, ErrorContext* ctx) {
  return GraphValidator(program, method, graph, segments, true, 0, ctx).run();
}

Status validate_program(const fb::Program& program, const FileHeader& header, Span<const SegmentData> segments,
                        ErrorContext* ctx) {
  if (ctx) ctx->phase = ErrorContext::Phase::Validate;
  if (program.required_features() != header.required_features) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "required_features %llx differ from the header's %llx",
                      static_cast<unsigned long long>(program.required_features()),
                      static_cast<unsigned long long>(header.required_features));
  }
  for (uint32_t s = 0; s < size_of(program.symbols()); ++s) {
    const fb::Symbol* sym = program.symbols()->Get(s);
    if (sym->min() < 0 || sym->min() > sym->max()) {
      return EMBER_FAIL(ctx, Error::InvalidProgram, "program symbol '%s' has bounds [%lld, %lld]", sym->name()->c_str(),
                        static_cast<long long>(sym->min()), static_cast<long long>(sym->max()));
    }
  }
  for (uint32_t s = 0; s < size_of(program.states()); ++s) {
    const fb::StateDecl* decl = program.states()->Get(s);
    if (!is_valid(static_cast<ScalarType>(decl->dtype())) || size_of(decl->dims()) > static_cast<uint32_t>(kMaxRank) ||
        !aligned8(decl->dims())) {
      return EMBER_FAIL(ctx, Error::InvalidProgram, "state '%s' has an invalid dtype or rank", decl->name()->c_str());
    }
    for (uint32_t d = 0; d < size_of(decl->dims()); ++d) {
      const fb::Dim* dim = decl->dims()->Get(d);
      if (dim->max() < 0 || dim->sym() > size_of(program.symbols())) {
        return EMBER_FAIL(ctx, Error::InvalidProgram, "state '%s' dim %u is invalid", decl->name()->c_str(), d);
      }
    }
    for (uint32_t t = 0; t < s; ++t) {
      if (std::strcmp(program.states()->Get(t)->name()->c_str(), decl->name()->c_str()) == 0) {
        return EMBER_FAIL(ctx, Error::InvalidProgram, "state '%s' declared twice", decl->name()->c_str());
      }
    }
    if (decl->initial_segment() != -1) {
      return EMBER_FAIL(ctx, Error::NotImplemented, "state '%s': initial values are not supported yet", decl->name()->c_str());
    }
  }
  if (size_of(program.states()) > 0 && (header.required_features & kFeatureState) == 0) {
    return EMBER_FAIL(ctx, Error::InvalidProgram, "program declares state without the state feature bit");
  }
  if (program.llm() != nullptr) EMBER_RETURN_IF_ERROR(validate_llm_info(*program.llm(), ctx));
  const uint32_t method_count = size_of(program.methods());
  if (method_count == 0) return EMBER_FAIL(ctx, Error::InvalidProgram, "program has no methods");
  for (uint32_t m = 0; m < method_count; ++m) {
    const fb::Method* method = program.methods()->Get(m);
    for (uint32_t k = 0; k < m; ++k) {
      if (std::strcmp(program.methods()->Get(k)->name()->c_str(), method->name()->c_str()) == 0) {
        return EMBER_FAIL(ctx, Error::InvalidProgram, "method '%s' appears twice", method->name()->c_str());
      }
    }
    for (uint32_t a = 0; a < size_of(method->arenas()); ++a) {
      const fb::Arena* arena = method->arenas()->Get(a);
      if (arena->id() != a || arena->kind() == fb::ArenaKind::Invalid || arena->kind() > fb::ArenaKind::Scratch ||
          arena->device() != fb::Device::Host || !is_pow2(arena->alignment()) || arena->alignment() < 64 ||
          arena->alignment() > 65536 || arena->size() > (uint64_t{1} << 40)) {
        return EMBER_FAIL(ctx, Error::InvalidProgram,
                          "method '%s' arena %u: id %u, kind %u, device %u, alignment %u or size %llu invalid",
                          method->name()->c_str(), a, arena->id(), static_cast<unsigned>(arena->kind()),
                          static_cast<unsigned>(arena->device()), arena->alignment(),
                          static_cast<unsigned long long>(arena->size()));
      }
    }
    for (uint32_t d = 0; d < size_of(method->delegates()); ++d) {
      const fb::Delegate* del = method->delegates()->Get(d);
      if (del->backend_id()->size() == 0) {
        return EMBER_FAIL(ctx, Error::InvalidProgram, "method '%s' delegate %u has an empty backend id", method->name()->c_str(), d);
      }
      if (del->format() == fb::DelegateFormat::Graph) {
        if (del->payload() == nullptr || del->payload_nested_root() == nullptr) {
          return EMBER_FAIL(ctx, Error::InvalidProgram, "method '%s' delegate %u has no GRAPH payload", method->name()->c_str(), d);
        }
        // The nested buffer was verified relative to its own start: it must itself be 8-aligned.
        if (reinterpret_cast<uintptr_t>(del->payload()->Data()) % 8 != 0) {
          return EMBER_FAIL(ctx, Error::InvalidProgram, "method '%s' delegate %u: GRAPH payload is not 8-byte aligned",
                            method->name()->c_str(), d);
        }
        EMBER_RETURN_IF_ERROR(GraphValidator(program, *method, *del->payload_nested_root(), segments, true, d, ctx).run());
      } else if (del->format() == fb::DelegateFormat::Opaque) {
        if (del->segment() < 0 || static_cast<uint32_t>(del->segment()) >= segments.size() ||
            segments[del->segment()].kind != fb::SegmentKind::DelegateBlob) {
          return EMBER_FAIL(ctx, Error::InvalidProgram, "method '%s' delegate %u: OPAQUE segment %d invalid",
                            method->name()->c_str(), d, del->segment());
        }
      } else {
        return EMBER_FAIL(ctx, Error::InvalidProgram, "method '%s' delegate %u has format %u",
                          method->name()->c_str(), d, static_cast<unsigned>(del->format()));
      }
    }
    EMBER_RETURN_IF_ERROR(GraphValidator(program, *method, *method->graph(), segments, false, 0, ctx).run());
  }
  return Status::ok();
}

}  // namespace ember
