#include "backends/xnnpack/subgraph.h"

#include <cstdio>
#include <cstring>
#include <limits>

#include "runtime/kernel/op.h"

namespace ember::backends::xnnpack {

const char* status_name(xnn_status status) {
  switch (status) {
    case xnn_status_success: return "xnn_status_success";
    case xnn_status_uninitialized: return "xnn_status_uninitialized";
    case xnn_status_invalid_parameter: return "xnn_status_invalid_parameter";
    case xnn_status_invalid_state: return "xnn_status_invalid_state";
    case xnn_status_unsupported_parameter: return "xnn_status_unsupported_parameter";
    case xnn_status_unsupported_hardware: return "xnn_status_unsupported_hardware";
    case xnn_status_out_of_memory: return "xnn_status_out_of_memory";
  }
  return "xnn_status_unknown";
}

Status xnn_failure(ErrorContext* error, xnn_status status, const char* call, const char* where) {
  const Error code = status == xnn_status_out_of_memory ? Error::OutOfMemory
                     : status == xnn_status_invalid_parameter || status == xnn_status_unsupported_parameter
                         ? Error::NotSupported
                         : Error::BackendFailed;
  return EMBER_FAIL(error, code, "xnnpack: %s: %s failed: %s", where, call, status_name(status));
}

namespace {

enum class Layout : uint8_t { Plain = 0, Nhwc = 1 };

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint32_t kNone = XNN_INVALID_VALUE_ID;

uint64_t align64(uint64_t n) { return (n + 63) / 64 * 64; }

// The per-value state of one pass; on the caller's stack (load time only).
struct Pass {
  const GraphView& graph;
  Translation& t;
  ErrorContext* error;
  Layout layout[kMaxValues];
  uint32_t id[kMaxValues];        // XNNPACK value id (kNone: not defined yet)
  uint32_t instruction = 0;
  char where[96] = {0};           // "instruction 3 (conv2d)"

  bool defining() const { return t.subgraph != nullptr; }
};

Status unsupported(Pass& p, const char* reason) {
  return EMBER_FAIL(p.error, Error::NotSupported, "xnnpack: %s: %s", p.where, reason);
}

TensorView shape_of(const Pass& p, uint32_t v) {
  TensorView view;
  tensor_shape(p.graph.value(v), &view);
  return view;
}

bool is_constant(const Pass& p, uint32_t v) {
  return p.graph.value(v).storage_type() == fb::Storage::ConstantStorage;
}

// XNNPACK dims of `v` in `layout`: NHWC permutes a logical [N, C, H, W].
size_t xnn_dims(const TensorView& view, Layout layout, size_t* dims) {
  if (layout == Layout::Nhwc) {
    dims[0] = static_cast<size_t>(view.dims[0]);
    dims[1] = static_cast<size_t>(view.dims[2]);
    dims[2] = static_cast<size_t>(view.dims[3]);
    dims[3] = static_cast<size_t>(view.dims[1]);
    return 4;
  }
  for (int d = 0; d < view.rank; ++d) dims[d] = static_cast<size_t>(view.dims[d]);
  return view.rank;
}

Status define(Pass& p, const TensorView& view, Layout layout, const void* data, uint32_t external_id, uint32_t flags,
              uint32_t* out_id) {
  size_t dims[kMaxRank];
  const size_t rank = xnn_dims(view, layout, dims);
  const xnn_status s = xnn_define_tensor_value(p.t.subgraph, xnn_datatype_fp32, rank, dims, data, external_id, flags,
                                               out_id);
  if (s != xnn_status_success) return xnn_failure(p.error, s, "xnn_define_tensor_value", p.where);
  return Status::ok();
}

// Room for a conv weight in OHWI, which XNNPACK copies into its own packing at runtime creation.
float* take_transient(Pass& p, uint64_t bytes) {
  float* out = p.defining() ? reinterpret_cast<float*>(p.t.transient + p.t.transient_bytes) : nullptr;
  p.t.transient_bytes += align64(bytes);
  return out;
}

// Room for a packed copy of `bytes`: counted in the checking pass, handed out in the defining one.
float* take_weights(Pass& p, uint64_t bytes) {
  // After the staging slots, which are all known before the first instruction.
  float* out = p.defining() ? reinterpret_cast<float*>(p.t.block + p.t.staging_bytes + p.t.weights_bytes) : nullptr;
  p.t.weights_bytes += align64(bytes);
  return out;
}

// The id of an operand: defined earlier, or a constant defined now from the program's bytes.
Status operand(Pass& p, uint32_t v, uint32_t* out) {
  if (!is_constant(p, v)) {
    if (p.id[v] == kNone && p.defining()) {
      return EMBER_FAIL(p.error, Error::Internal, "xnnpack: %s reads value %u before it is written", p.where, v);
    }
    *out = p.id[v];
    return Status::ok();
  }
  if (p.defining() && p.id[v] == kNone) {
    EMBER_RETURN_IF_ERROR(define(p, shape_of(p, v), Layout::Plain, p.graph.constant_data(v), kNone, 0, &p.id[v]));
  }
  *out = p.id[v];
  return Status::ok();
}

// Defines an instruction's output in `layout`: an external output when the graph returns it.
Status result(Pass& p, uint32_t v, Layout layout, uint32_t* out) {
  if (v >= kMaxValues) return unsupported(p, "value index past the backend's table");
  p.layout[v] = layout;
  const TensorView view = shape_of(p, v);
  if (layout == Layout::Nhwc && view.rank != 4) return unsupported(p, "an image result that is not 4-D");
  for (uint32_t k = 0; k < p.t.output_count; ++k) {
    if (p.t.outputs[k].value != v) continue;
    p.t.outputs[k].nhwc = layout == Layout::Nhwc;
    if (!p.defining()) return Status::ok();
    if (p.id[v] != kNone) return unsupported(p, "a value written twice");
    EMBER_RETURN_IF_ERROR(define(p, view, layout, nullptr, p.t.input_count + k, XNN_VALUE_FLAG_EXTERNAL_OUTPUT, &p.id[v]));
    *out = p.id[v];
    return Status::ok();
  }
  if (!p.defining()) return Status::ok();
  if (p.id[v] != kNone) return unsupported(p, "a value written twice");
  EMBER_RETURN_IF_ERROR(define(p, view, layout, nullptr, kNone, 0, &p.id[v]));
  *out = p.id[v];
  return Status::ok();
}

Status check(Pass& p, xnn_status s, const char* call) {
  return s == xnn_status_success ? Status::ok() : xnn_failure(p.error, s, call, p.where);
}

// A constant operand of an elementwise op, copied: XNNPACK reads such operands at run time and may
// read XNN_EXTRA_BYTES past their end, which the program's bytes do not promise. Against an NHWC
// image (`nhwc`) it is right-aligned to [a, b, c, e] (NCHW) and stored as [a, c, e, b], so XNNPACK's
// numpy broadcasting pairs the same elements as the reference.
Status elementwise_constant(Pass& p, uint32_t v, bool nhwc, uint32_t* out) {
  const TensorView view = shape_of(p, v);
  if (nhwc && view.rank > 4) return unsupported(p, "a constant of rank > 4 broadcast against an image");
  float* packed = take_weights(p, view.nbytes() + XNN_EXTRA_BYTES);
  if (!p.defining()) return Status::ok();
  const float* src = reinterpret_cast<const float*>(p.graph.constant_data(v));
  if (!nhwc) {
    std::memcpy(packed, src, static_cast<size_t>(view.nbytes()));
    return define(p, view, Layout::Plain, packed, kNone, 0, out);
  }
  int64_t d[4] = {1, 1, 1, 1};
  for (int i = 0; i < view.rank; ++i) d[4 - view.rank + i] = view.dims[i];
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t h = 0; h < d[2]; ++h)
        for (int64_t w = 0; w < d[3]; ++w) {
          packed[((n * d[2] + h) * d[3] + w) * d[1] + c] = src[((n * d[1] + c) * d[2] + h) * d[3] + w];
        }
  TensorView nchw;
  nchw.rank = 4;
  for (int i = 0; i < 4; ++i) nchw.dims[i] = d[i];
  return define(p, nchw, Layout::Nhwc, packed, kNone, 0, out);
}

Status binary(Pass& p, const fb::KernelCall& call, OpCode op) {
  const uint32_t a = static_cast<uint32_t>(call.inputs()->Get(0)), b = static_cast<uint32_t>(call.inputs()->Get(1));
  const uint32_t out_v = call.outputs()->Get(0);
  const bool ca = is_constant(p, a), cb = is_constant(p, b);
  if (ca && cb) return unsupported(p, "both operands are constants (the exporter folds those)");
  const bool nhwc = (!ca && p.layout[a] == Layout::Nhwc) || (!cb && p.layout[b] == Layout::Nhwc);
  uint32_t ids[2] = {kNone, kNone};
  const uint32_t vs[2] = {a, b};
  for (int i = 0; i < 2; ++i) {
    const uint32_t v = vs[i];
    if (is_constant(p, v)) {
      EMBER_RETURN_IF_ERROR(elementwise_constant(p, v, nhwc, &ids[i]));
    } else {
      if (nhwc && p.layout[v] != Layout::Nhwc) {
        return unsupported(p, "an image (NHWC inside) combined with a non-constant plain tensor");
      }
      EMBER_RETURN_IF_ERROR(operand(p, v, &ids[i]));
    }
  }
  uint32_t out = kNone;
  EMBER_RETURN_IF_ERROR(result(p, out_v, nhwc ? Layout::Nhwc : Layout::Plain, &out));
  if (shape_of(p, out_v).rank > XNN_MAX_TENSOR_DIMS) return unsupported(p, "rank above XNNPACK's 6");
  if (!p.defining()) return Status::ok();
  switch (op) {
    case OpCode::Add: return check(p, xnn_define_add2(p.t.subgraph, -kInf, kInf, ids[0], ids[1], out, 0), "xnn_define_add2");
    case OpCode::Sub: return check(p, xnn_define_subtract(p.t.subgraph, -kInf, kInf, ids[0], ids[1], out, 0), "xnn_define_subtract");
    case OpCode::Mul: return check(p, xnn_define_multiply2(p.t.subgraph, -kInf, kInf, ids[0], ids[1], out, 0), "xnn_define_multiply2");
    default: return check(p, xnn_define_divide(p.t.subgraph, -kInf, kInf, ids[0], ids[1], out, 0), "xnn_define_divide");
  }
}

Status unary(Pass& p, const fb::KernelCall& call, OpCode op) {
  const uint32_t x = static_cast<uint32_t>(call.inputs()->Get(0));
  if (is_constant(p, x)) return unsupported(p, "a constant operand (the exporter folds those)");
  uint32_t in = kNone, out = kNone;
  EMBER_RETURN_IF_ERROR(operand(p, x, &in));
  EMBER_RETURN_IF_ERROR(result(p, call.outputs()->Get(0), p.layout[x], &out));
  if (!p.defining()) return Status::ok();
  switch (op) {
    case OpCode::Relu: return check(p, xnn_define_clamp(p.t.subgraph, 0.0f, kInf, in, out, 0), "xnn_define_clamp");
    case OpCode::Clip: {
      const fb::ClipAttrs* c = call.attrs_as_ClipAttrs();
      return check(p, xnn_define_clamp(p.t.subgraph, c->min(), c->max(), in, out, 0), "xnn_define_clamp");
    }
    case OpCode::Sigmoid: return check(p, xnn_define_sigmoid(p.t.subgraph, in, out, 0), "xnn_define_sigmoid");
    default: return check(p, xnn_define_hardswish(p.t.subgraph, in, out, 0), "xnn_define_hardswish");
  }
}

// The image input of a conv or pool: defined, NHWC.
Status image_input(Pass& p, const fb::KernelCall& call, uint32_t* id, TensorView* view) {
  const uint32_t x = static_cast<uint32_t>(call.inputs()->Get(0));
  if (is_constant(p, x) || p.layout[x] != Layout::Nhwc) {
    return unsupported(p, "its input is not a 4-D image (a graph input or a conv / pool result)");
  }
  *view = shape_of(p, x);
  return operand(p, x, id);
}

Status conv2d(Pass& p, const fb::KernelCall& call) {
  uint32_t in = kNone, filter = kNone, bias = kNone, out = kNone;
  TensorView x;
  EMBER_RETURN_IF_ERROR(image_input(p, call, &in, &x));
  const uint32_t w_v = static_cast<uint32_t>(call.inputs()->Get(1));
  const int32_t b_v = call.inputs()->size() > 2 ? call.inputs()->Get(2) : -1;
  if (!is_constant(p, w_v) || (b_v >= 0 && !is_constant(p, static_cast<uint32_t>(b_v)))) {
    return unsupported(p, "a weight or bias that is not a constant");
  }
  const fb::Conv2dAttrs* a = call.attrs_as_Conv2dAttrs();
  // The fused output clamp is XNNPACK's output_min / output_max, which must satisfy min < max
  // (xnn_define_convolution_2d refuses min == max; the validator allows it).
  if (!(a->out_min() < a->out_max())) {
    return unsupported(p, "an output clamp with min == max (XNNPACK needs min < max)");
  }
  const TensorView w = shape_of(p, w_v);
  const int64_t o = w.dims[0], cg = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  const int64_t groups = a->groups();
  for (int i = 0; i < 4; ++i) {
    if (a->padding()->Get(i) < 0) return unsupported(p, "negative padding");
  }
  if (groups <= 0 || x.dims[1] != cg * groups || o % groups != 0) return unsupported(p, "inconsistent groups");
  // OIHW -> OHWI ([groups * group_out][kh][kw][group_in]), the layout xnn_define_convolution_2d reads.
  float* packed = take_transient(p, static_cast<uint64_t>(o * kh * kw * cg) * sizeof(float));
  EMBER_RETURN_IF_ERROR(result(p, call.outputs()->Get(0), Layout::Nhwc, &out));
  if (!p.defining()) return Status::ok();
  const float* src = reinterpret_cast<const float*>(p.graph.constant_data(w_v));
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t ic = 0; ic < cg; ++ic)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) packed[((oc * kh + i) * kw + j) * cg + ic] = src[((oc * cg + ic) * kh + i) * kw + j];
  TensorView ohwi;  // defined with Plain dims [O, kh, kw, Cg]
  ohwi.rank = 4;
  ohwi.dims[0] = o, ohwi.dims[1] = kh, ohwi.dims[2] = kw, ohwi.dims[3] = cg;
  EMBER_RETURN_IF_ERROR(define(p, ohwi, Layout::Plain, packed, kNone, 0, &filter));
  if (b_v >= 0) EMBER_RETURN_IF_ERROR(operand(p, static_cast<uint32_t>(b_v), &bias));
  const auto* pad = a->padding();  // [top, left, bottom, right]; XNNPACK: top, right, bottom, left
  return check(p,
               xnn_define_convolution_2d(p.t.subgraph, pad->Get(0), pad->Get(3), pad->Get(2), pad->Get(1),
                                         static_cast<uint32_t>(kh), static_cast<uint32_t>(kw), a->stride()->Get(0),
                                         a->stride()->Get(1), a->dilation()->Get(0), a->dilation()->Get(1),
                                         static_cast<uint32_t>(groups), static_cast<size_t>(cg),
                                         static_cast<size_t>(o / groups), a->out_min(), a->out_max(), in, filter,
                                         bias, out, 0),
               "xnn_define_convolution_2d");
}

// Output size of a pooling window along one axis without ceil_mode (PyTorch's floor rule).
int64_t floor_size(int64_t in, int64_t pad_total, int64_t k, int64_t s, int64_t d) {
  return (in + pad_total - d * (k - 1) - 1) / s + 1;
}

Status pool2d(Pass& p, const fb::KernelCall& call, OpCode op) {
  uint32_t in = kNone, out = kNone;
  TensorView x;
  EMBER_RETURN_IF_ERROR(image_input(p, call, &in, &x));
  const uint32_t out_v = call.outputs()->Get(0);
  const TensorView y = shape_of(p, out_v);
  const fb::Pool2dAttrs* a = call.attrs_as_Pool2dAttrs();
  const int64_t kh = a->kernel()->Get(0), kw = a->kernel()->Get(1), sh = a->stride()->Get(0), sw = a->stride()->Get(1);
  const int64_t dh = a->dilation()->Get(0), dw = a->dilation()->Get(1);
  int64_t pad[4];  // top, left, bottom, right
  for (int i = 0; i < 4; ++i) pad[i] = a->padding()->Get(i);
  if (pad[0] < 0 || pad[1] < 0 || pad[2] < 0 || pad[3] < 0) return unsupported(p, "negative padding");
  const bool any_pad = pad[0] + pad[1] + pad[2] + pad[3] != 0;
  // ceil_mode only changes anything when it adds an output row or column; one more row is a window
  // hanging past the bottom edge, whose taps there the reference skips.
  const int64_t extra_h = y.dims[2] - floor_size(x.dims[2], pad[0] + pad[2], kh, sh, dh);
  const int64_t extra_w = y.dims[3] - floor_size(x.dims[3], pad[1] + pad[3], kw, sw, dw);
  if (extra_h < 0 || extra_w < 0 || extra_h > 1 || extra_w > 1) return unsupported(p, "an output size off the floor/ceil rule");
  // xnn_define_*_pooling_2d return xnn_status_invalid_parameter for a window of one tap.
  if (kh * kw <= 1) return unsupported(p, "a 1x1 pooling window (XNNPACK refuses it)");
  if (op == OpCode::MaxPool2d) {
    // XNNPACK's max pool skips padded taps as the reference does (tested with dilation, padding and
    // an input whose edges hold the maxima). Extra rows from ceil_mode become bottom / right padding.
    // The bottom / right padding that makes the floor rule give the extra row: exactly enough for
    // the last window's last tap.
    if (extra_h) pad[2] = (y.dims[2] - 1) * sh + dh * (kh - 1) + 1 - x.dims[2] - pad[0];
    if (extra_w) pad[3] = (y.dims[3] - 1) * sw + dw * (kw - 1) + 1 - x.dims[3] - pad[1];
    EMBER_RETURN_IF_ERROR(result(p, out_v, Layout::Nhwc, &out));
    if (!p.defining()) return Status::ok();
    return check(p,
                 xnn_define_max_pooling_2d(p.t.subgraph, static_cast<uint32_t>(pad[0]), static_cast<uint32_t>(pad[3]),
                                           static_cast<uint32_t>(pad[2]), static_cast<uint32_t>(pad[1]),
                                           static_cast<uint32_t>(kh), static_cast<uint32_t>(kw),
                                           static_cast<uint32_t>(sh), static_cast<uint32_t>(sw),
                                           static_cast<uint32_t>(dh), static_cast<uint32_t>(dw), -kInf, kInf, in, out, 0),
                 "xnn_define_max_pooling_2d");
  }
  if (dh != 1 || dw != 1) return unsupported(p, "dilated average pool (XNNPACK has none)");
  if (extra_h || extra_w) return unsupported(p, "average pool whose ceil_mode adds a window (PyTorch's divisor rule)");
  // XNNPACK divides by the taps inside the input (count_include_pad = false). To count the padding,
  // pad explicitly with zeros first and pool without padding: every window then has kh * kw taps.
  uint32_t pooled_in = in;
  if (a->count_include_pad() && any_pad) {
    TensorView padded = x;
    padded.dims[2] += pad[0] + pad[2];
    padded.dims[3] += pad[1] + pad[3];
    if (p.defining()) {
      EMBER_RETURN_IF_ERROR(define(p, padded, Layout::Nhwc, nullptr, kNone, 0, &pooled_in));
      const size_t pre[4] = {0, static_cast<size_t>(pad[0]), static_cast<size_t>(pad[1]), 0};
      const size_t post[4] = {0, static_cast<size_t>(pad[2]), static_cast<size_t>(pad[3]), 0};
      EMBER_RETURN_IF_ERROR(check(p, xnn_define_static_constant_pad(p.t.subgraph, pre, post, 0.0f, in, pooled_in, 0),
                                  "xnn_define_static_constant_pad"));
    }
    pad[0] = pad[1] = pad[2] = pad[3] = 0;
  }
  EMBER_RETURN_IF_ERROR(result(p, out_v, Layout::Nhwc, &out));
  if (!p.defining()) return Status::ok();
  return check(p,
               xnn_define_average_pooling_2d(p.t.subgraph, static_cast<uint32_t>(pad[0]), static_cast<uint32_t>(pad[3]),
                                             static_cast<uint32_t>(pad[2]), static_cast<uint32_t>(pad[1]),
                                             static_cast<uint32_t>(kh), static_cast<uint32_t>(kw),
                                             static_cast<uint32_t>(sh), static_cast<uint32_t>(sw), -kInf, kInf,
                                             pooled_in, out, 0),
               "xnn_define_average_pooling_2d");
}

Status global_pool(Pass& p, const fb::KernelCall& call) {
  uint32_t in = kNone, out = kNone;
  TensorView x;
  EMBER_RETURN_IF_ERROR(image_input(p, call, &in, &x));
  EMBER_RETURN_IF_ERROR(result(p, call.outputs()->Get(0), Layout::Nhwc, &out));  // [N, 1, 1, C]
  if (!p.defining()) return Status::ok();
  return check(p, xnn_define_global_average_pooling_2d(p.t.subgraph, -kInf, kInf, in, out, 0),
               "xnn_define_global_average_pooling_2d");
}

Status linear(Pass& p, const fb::KernelCall& call) {
  const uint32_t x = static_cast<uint32_t>(call.inputs()->Get(0)), w = static_cast<uint32_t>(call.inputs()->Get(1));
  const int32_t b = call.inputs()->size() > 2 ? call.inputs()->Get(2) : -1;
  if (is_constant(p, x) || p.layout[x] != Layout::Plain) {
    return unsupported(p, "its input is an image (NHWC inside): flatten it first");
  }
  if (!is_constant(p, w) || (b >= 0 && !is_constant(p, static_cast<uint32_t>(b)))) {
    return unsupported(p, "a weight or bias that is not a constant");
  }
  uint32_t in = kNone, filter = kNone, bias = kNone, out = kNone;
  EMBER_RETURN_IF_ERROR(operand(p, x, &in));
  EMBER_RETURN_IF_ERROR(operand(p, w, &filter));  // [N, K]: XNNPACK's [output_channels, input_channels]
  if (b >= 0) EMBER_RETURN_IF_ERROR(operand(p, static_cast<uint32_t>(b), &bias));
  EMBER_RETURN_IF_ERROR(result(p, call.outputs()->Get(0), Layout::Plain, &out));
  if (!p.defining()) return Status::ok();
  return check(p, xnn_define_fully_connected(p.t.subgraph, -kInf, kInf, in, filter, bias, out, 0),
               "xnn_define_fully_connected");
}

Status softmax(Pass& p, const fb::KernelCall& call) {
  const uint32_t x = static_cast<uint32_t>(call.inputs()->Get(0));
  const TensorView view = shape_of(p, x);
  int axis = call.attrs_as_AxisAttrs()->axis();
  if (axis < 0) axis += view.rank;
  if (axis != view.rank - 1) return unsupported(p, "softmax over an axis other than the last");
  if (is_constant(p, x) || p.layout[x] != Layout::Plain) return unsupported(p, "softmax of an image (NHWC inside)");
  uint32_t in = kNone, out = kNone;
  EMBER_RETURN_IF_ERROR(operand(p, x, &in));
  EMBER_RETURN_IF_ERROR(result(p, call.outputs()->Get(0), Layout::Plain, &out));
  if (!p.defining()) return Status::ok();
  return check(p, xnn_define_softmax(p.t.subgraph, in, out, 0), "xnn_define_softmax");
}

// Reshape keeps the bytes. An image's NHWC bytes equal its NCHW bytes only when H * W == 1 (after a
// global pool) or C == 1; any other flatten of an image would reorder elements.
Status reshape(Pass& p, const fb::KernelCall& call) {
  const uint32_t x = static_cast<uint32_t>(call.inputs()->Get(0)), y = call.outputs()->Get(0);
  if (is_constant(p, x)) return unsupported(p, "a constant operand (the exporter folds those)");
  const TensorView in_view = shape_of(p, x), out_view = shape_of(p, y);
  if (p.layout[x] == Layout::Nhwc && in_view.dims[2] * in_view.dims[3] != 1 && in_view.dims[1] != 1) {
    return unsupported(p, "reshape of an image with H * W > 1 and C > 1 (NHWC and NCHW orders differ)");
  }
  if (out_view.rank > XNN_MAX_TENSOR_DIMS) return unsupported(p, "rank above XNNPACK's 6");
  uint32_t in = kNone, out = kNone;
  EMBER_RETURN_IF_ERROR(operand(p, x, &in));
  EMBER_RETURN_IF_ERROR(result(p, y, Layout::Plain, &out));
  if (!p.defining()) return Status::ok();
  size_t dims[kMaxRank];
  const size_t rank = xnn_dims(out_view, Layout::Plain, dims);
  return check(p, xnn_define_static_reshape(p.t.subgraph, rank, dims, in, out, 0), "xnn_define_static_reshape");
}

Status instruction(Pass& p, const fb::Instruction& ins) {
  if (ins.args_type() != fb::InstructionArgs::KernelCall) return unsupported(p, "not a kernel call");
  const fb::KernelCall& call = *ins.args_as_KernelCall();
  const OpCode op = static_cast<OpCode>(call.op());
  std::snprintf(p.where, sizeof(p.where), "instruction %u (%s)", p.instruction, to_string(op));
  for (uint32_t i = 0; i < call.inputs()->size(); ++i) {
    const int32_t v = call.inputs()->Get(i);
    if (v >= 0 && shape_of(p, static_cast<uint32_t>(v)).dtype != ScalarType::F32) return unsupported(p, "not f32");
  }
  switch (op) {
    case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div: return binary(p, call, op);
    case OpCode::Relu: case OpCode::Clip: case OpCode::Sigmoid: case OpCode::HardSwish: return unary(p, call, op);
    case OpCode::Conv2d: return conv2d(p, call);
    case OpCode::MaxPool2d: case OpCode::AvgPool2d: return pool2d(p, call, op);
    case OpCode::GlobalAvgPool2d: return global_pool(p, call);
    case OpCode::Linear: return linear(p, call);
    case OpCode::Softmax: return softmax(p, call);
    case OpCode::Reshape: return reshape(p, call);
    default: return unsupported(p, "op not run by this backend");
  }
}

// Every value static, f32, non-empty: XNNPACK 2022 has no reshape of a runtime (a new shape would be
// a new runtime), so symbolic dims wait for shape buckets.
Status check_values(Pass& p) {
  const uint32_t count = p.graph.value_count();
  if (count > kMaxValues) {
    return EMBER_FAIL(p.error, Error::NotSupported, "xnnpack: %u values in one graph (at most %u)", count, kMaxValues);
  }
  for (uint32_t v = 0; v < count; ++v) {
    const fb::Tensor& t = p.graph.value(v);
    if (t.storage_type() == fb::Storage::StateStorage) {
      return EMBER_FAIL(p.error, Error::NotSupported, "xnnpack: value %u is program state (not supported)", v);
    }
    for (uint32_t d = 0; t.dims() != nullptr && d < t.dims()->size(); ++d) {
      if (t.dims()->Get(d)->sym() != 0) {
        return EMBER_FAIL(p.error, Error::NotSupported,
                          "xnnpack: value %u has a symbolic dim %u (only static shapes; shape buckets are a later step)",
                          v, d);
      }
      if (t.dims()->Get(d)->max() <= 0) {
        return EMBER_FAIL(p.error, Error::NotSupported, "xnnpack: value %u has an empty dim %u", v, d);
      }
    }
  }
  return Status::ok();
}

Status io_slot(Pass& p, uint32_t v, IoSlot* slot) {
  const TensorView view = shape_of(p, v);
  if (view.dtype != ScalarType::F32) {
    return EMBER_FAIL(p.error, Error::NotSupported, "xnnpack: graph input/output value %u is not f32", v);
  }
  slot->value = v;
  slot->rank = view.rank;
  for (int d = 0; d < view.rank; ++d) slot->dims[d] = view.dims[d];
  slot->bytes = view.nbytes();
  // XNNPACK may read XNN_EXTRA_BYTES past the end of an input.
  if (p.defining()) slot->staging = reinterpret_cast<float*>(p.t.block + p.t.staging_bytes);
  p.t.staging_bytes += align64(slot->bytes + XNN_EXTRA_BYTES);
  return Status::ok();
}

}  // namespace

Status translate(const GraphView& graph, Translation& t, ErrorContext* error) {
  static_assert(sizeof(Pass) < 32 * 1024, "the pass lives on the stack");
  Pass p{graph, t, error, {}, {}};
  for (uint32_t v = 0; v < kMaxValues; ++v) p.id[v] = kNone;
  EMBER_RETURN_IF_ERROR(check_values(p));
  if (graph.input_count() > kMaxIo || graph.output_count() > kMaxIo) {
    return EMBER_FAIL(error, Error::NotSupported, "xnnpack: %u inputs / %u outputs (at most %zu each)",
                      graph.input_count(), graph.output_count(), kMaxIo);
  }
  t.input_count = graph.input_count();
  t.output_count = graph.output_count();
  t.weights_bytes = 0;
  t.transient_bytes = 0;
  t.staging_bytes = 0;
  for (uint32_t k = 0; k < t.input_count; ++k) {
    const uint32_t v = graph.input_value(k);
    EMBER_RETURN_IF_ERROR(io_slot(p, v, &t.inputs[k]));
    const bool image = t.inputs[k].rank == 4;
    t.inputs[k].nhwc = image;
    p.layout[v] = image ? Layout::Nhwc : Layout::Plain;
    if (p.defining()) {
      EMBER_RETURN_IF_ERROR(define(p, shape_of(p, v), p.layout[v], nullptr, k, XNN_VALUE_FLAG_EXTERNAL_INPUT, &p.id[v]));
    }
  }
  for (uint32_t k = 0; k < t.output_count; ++k) {
    const uint32_t v = graph.output_value(k);
    if (graph.is_io(v)) {
      for (uint32_t i = 0; i < t.input_count; ++i) {
        if (t.inputs[i].value == v) {
          return EMBER_FAIL(error, Error::NotSupported, "xnnpack: output %u is also input %u (nothing to compute)", k, i);
        }
      }
    }
    EMBER_RETURN_IF_ERROR(io_slot(p, v, &t.outputs[k]));
  }
  for (p.instruction = 0; p.instruction < graph.instruction_count(); ++p.instruction) {
    EMBER_RETURN_IF_ERROR(instruction(p, *graph.graph().instructions()->Get(p.instruction)));
  }
  for (uint32_t k = 0; k < t.output_count; ++k) {
    if (p.defining() && p.id[t.outputs[k].value] == kNone) {
      return EMBER_FAIL(error, Error::NotSupported, "xnnpack: output %u is not written by any instruction", k);
    }
  }
  return Status::ok();
}

}  // namespace ember::backends::xnnpack
