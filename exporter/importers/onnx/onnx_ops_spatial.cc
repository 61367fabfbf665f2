// ONNX handlers of issue 17's spatial ops: Resize, ConvTranspose (1-D and 2-D) and 1-D Conv.
// 1-D convolutions run as their 2-D op on a [N, C, 1, L] view (the kernel's attributes map to
// [1, k]); 3-D ones are refused naming the rank.
#include "exporter/importers/onnx/importer_internal.h"

namespace ember::exporter::onnx_detail {

namespace {

// A list attribute of `n` positive (or, with allow_zero, non-negative) int32 values, or `def`.
std::vector<int64_t> read_spatial(NodeContext& ctx, const char* attr, size_t n, int64_t def, bool allow_zero) {
  std::vector<int64_t> v;
  if (!ctx.attr_ints(attr, &v)) return std::vector<int64_t>(n, def);
  if (v.size() != n) {
    ctx.fail(std::string("attribute '") + attr + "' has " + std::to_string(v.size()) + " values; " +
             std::to_string(n / (std::string(attr) == "pads" ? 2 : 1)) + "-D needs " + std::to_string(n));
  }
  for (int64_t x : v) {
    if (x < (allow_zero ? 0 : 1) || x > INT32_MAX) {
      ctx.fail(std::string("attribute '") + attr + "' value " + std::to_string(x) + " is out of range (" +
               (allow_zero ? ">= 0" : ">= 1") + ")");
    }
  }
  return v;
}

}  // namespace

// Conv (1-D, or a refusal of 3-D; op_conv handles 2-D) and ConvTranspose (1-D, 2-D).
void Importer::op_conv_nd(NodeContext& ctx, bool transpose) {
  const std::vector<SymInt> x_dims = dims_of(ctx, 0);
  const std::vector<SymInt> w_dims = dims_of(ctx, 1);
  const char* what = transpose ? "ConvTranspose" : "Conv";
  if (x_dims.size() == 5 || w_dims.size() == 5) {
    ctx.fail(std::string("3-D ") + what + " (input rank 5) is not supported yet; 1-D and 2-D are");
  }
  if ((x_dims.size() != 3 && x_dims.size() != 4) || w_dims.size() != x_dims.size()) {
    ctx.fail(std::string(what) + " needs a rank-3 (1-D) or rank-4 (2-D) input and weight of the same rank, got ranks " +
             std::to_string(x_dims.size()) + " and " + std::to_string(w_dims.size()));
  }
  const size_t nsp = x_dims.size() - 2;  // spatial dims: 1 or 2
  for (size_t i = 2; i < w_dims.size(); ++i) {
    if (!w_dims[i].is_constant()) ctx.fail("the weight's kernel dims must be static");
  }
  const std::vector<int64_t> strides = read_spatial(ctx, "strides", nsp, 1, false);
  const std::vector<int64_t> dilations = read_spatial(ctx, "dilations", nsp, 1, false);
  std::vector<int64_t> ks;
  if (ctx.attr_ints("kernel_shape", &ks)) {
    bool same = ks.size() == nsp;
    for (size_t i = 0; same && i < nsp; ++i) same = ks[i] == w_dims[2 + i].c;
    if (!same) ctx.fail("attribute 'kernel_shape' does not match the weight's dims");
  }
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1 || group > INT32_MAX) ctx.fail("attribute 'group' = " + std::to_string(group) + " is invalid");
  std::vector<int64_t> output_padding(nsp, 0), output_shape;
  if (transpose) {
    output_padding = read_spatial(ctx, "output_padding", nsp, 0, true);
    std::vector<int64_t> os;
    if (ctx.attr_ints("output_shape", &os)) {
      // Either the spatial sizes or the full output shape.
      if (os.size() != nsp && os.size() != nsp + 2) {
        ctx.fail("attribute 'output_shape' has " + std::to_string(os.size()) + " values; expected " +
                 std::to_string(nsp) + " or " + std::to_string(nsp + 2));
      }
      output_shape.assign(os.end() - static_cast<std::ptrdiff_t>(nsp), os.end());
    }
  }
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    ctx.fail("attribute 'auto_pad' = '" + auto_pad + "' is not supported");
  }
  std::vector<int64_t> pads;
  const bool has_pads = ctx.attr_ints("pads", &pads);
  if (has_pads) {
    if (pads.size() != 2 * nsp) {
      ctx.fail("attribute 'pads' has " + std::to_string(pads.size()) + " values; " + std::to_string(nsp) + "-D needs " +
               std::to_string(2 * nsp));
    }
    for (int64_t p : pads) {
      if (p < 0 || p > INT32_MAX) ctx.fail("attribute 'pads' has a negative or huge value " + std::to_string(p));
    }
  } else {
    pads.assign(2 * nsp, 0);
  }
  if (has_pads && (!output_shape.empty() || (auto_pad != "NOTSET" && auto_pad != "VALID"))) {
    ctx.fail(std::string("attribute 'pads' together with ") + (output_shape.empty() ? "auto_pad " + auto_pad : "'output_shape'") +
             " is not supported");
  }
  // Padding per spatial dim, ONNX [begin..., end...].
  for (size_t i = 0; i < nsp; ++i) {
    const SymInt& in = x_dims[2 + i];
    const int64_t k_eff = (w_dims[2 + i].c - 1) * dilations[i] + 1;
    const int64_t s = strides[i];
    int64_t total = -1;
    bool upper = auto_pad == "SAME_UPPER";
    if (transpose) {
      // onnxruntime 1.22: output_shape (or SAME: out = in * stride) fixes the total padding; SAME_UPPER
      // puts the smaller half first, NOTSET and SAME_LOWER the larger.
      if (!output_shape.empty()) {
        if (!in.is_constant()) ctx.fail("attribute 'output_shape' with a run-time spatial size (" + format_sym(in, graph_) + ") is not supported");
        total = s * (in.c - 1) + output_padding[i] + k_eff - output_shape[i];
        if (total < 0) {
          ctx.fail("attribute 'output_shape' " + std::to_string(output_shape[i]) + " is larger than the full output " +
                   std::to_string(output_shape[i] + total) + " (negative padding)");
        }
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        total = std::max<int64_t>(0, output_padding[i] + k_eff - s);  // stride * (in - 1) + op + k_eff - in * stride
      }
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      if (in.is_constant()) {
        const int64_t out = (in.c + s - 1) / s;
        total = std::max<int64_t>(0, (out - 1) * s + k_eff - in.c);
      } else if (s == 1) {
        total = k_eff - 1;
      } else {
        ctx.fail("auto_pad " + auto_pad + " with stride " + std::to_string(s) + " on a run-time spatial size (" +
                 format_sym(in, graph_) + ") is not supported");
      }
      upper = auto_pad == "SAME_UPPER";
    }
    if (total >= 0) {
      const int64_t small = total / 2, large = total - small;
      pads[i] = upper ? small : large;
      pads[nsp + i] = upper ? large : small;
    }
  }
  OpAttrs a;
  a.groups = static_cast<int32_t>(group);
  // 1-D maps to H = 1: stride / dilation 1 and no padding along H.
  for (size_t i = 0; i < nsp; ++i) {
    const size_t d = 2 - nsp + i;
    a.stride[d] = static_cast<int32_t>(strides[i]);
    a.dilation[d] = static_cast<int32_t>(dilations[i]);
    a.output_padding[d] = static_cast<int32_t>(output_padding[i]);
    a.padding[d] = static_cast<int32_t>(pads[i]);
    a.padding[2 + d] = static_cast<int32_t>(pads[nsp + i]);
  }
  const OpCode op = transpose ? OpCode::ConvTranspose2d : OpCode::Conv2d;
  int x = value_of(ctx, 0), w = value_of(ctx, 1);
  const int b = ctx.has_input(2) ? value_of(ctx, 2) : -1;
  if (nsp == 2) {
    define_value(ctx, 0, emit1(ctx, op, {x, w, b}, a, ctx.output(0)));
    return;
  }
  const SymInt one = SymInt::constant(1);
  x = emit_reshape(ctx, x, {x_dims[0], x_dims[1], one, x_dims[2]}, ctx.output(0) + "/as_2d", "as_2d");
  w = emit_reshape(ctx, w, {w_dims[0], w_dims[1], one, w_dims[2]}, ctx.input(1) + "/as_2d", "weight_as_2d");
  const int y = emit1(ctx, op, {x, w, b}, a, ctx.output(0) + "/2d", "2d");
  const std::vector<Dim>& y_dims = value(y).dims;
  define_value(ctx, 0, emit_reshape(ctx, y, {dim_sym(y_dims[0]), dim_sym(y_dims[1]), dim_sym(y_dims[3])}, ctx.output(0), "as_1d"));
}

void Importer::op_conv_transpose(NodeContext& ctx) { op_conv_nd(ctx, true); }

// Resize (opsets 11..21): nearest / linear / cubic, every coordinate mode but tf_crop_and_resize;
// scales or sizes known at export (sizes may be a constant multiple of a symbolic input dim).
void Importer::op_resize(NodeContext& ctx) {
  const std::vector<SymInt> x_dims = dims_of(ctx, 0);
  const size_t rank = x_dims.size();
  if (rank < 1 || rank > static_cast<size_t>(kMaxRank)) ctx.fail("input rank " + std::to_string(rank) + " is not supported");
  if (dtype_of(ctx, 0) != ScalarType::F32) {
    ctx.fail(std::string("input dtype ") + to_string(dtype_of(ctx, 0)) + " is not supported (f32 only)");
  }
  OpAttrs a;
  const std::string mode = ctx.attr_string("mode", "nearest");
  if (mode == "nearest") {
    a.resize_mode = ResizeMode::Nearest;
  } else if (mode == "linear") {
    a.resize_mode = ResizeMode::Linear;
  } else if (mode == "cubic") {
    a.resize_mode = ResizeMode::Cubic;
  } else {
    ctx.fail("attribute 'mode' = '" + mode + "' is not supported");
  }
  const std::string coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") {
    a.resize_coord = ResizeCoord::HalfPixel;
  } else if (coord == "align_corners") {
    a.resize_coord = ResizeCoord::AlignCorners;
  } else if (coord == "asymmetric") {
    a.resize_coord = ResizeCoord::Asymmetric;
  } else if (coord == "pytorch_half_pixel") {
    a.resize_coord = ResizeCoord::PytorchHalfPixel;
  } else if (coord == "half_pixel_symmetric") {
    a.resize_coord = ResizeCoord::HalfPixelSymmetric;
  } else {
    ctx.fail("coordinate_transformation_mode '" + coord + "' is not supported");
  }
  const std::string nearest = ctx.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") {
    a.resize_nearest = ResizeNearest::RoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    a.resize_nearest = ResizeNearest::RoundPreferCeil;
  } else if (nearest == "floor") {
    a.resize_nearest = ResizeNearest::Floor;
  } else if (nearest == "ceil") {
    a.resize_nearest = ResizeNearest::Ceil;
  } else {
    ctx.fail("attribute 'nearest_mode' = '" + nearest + "' is not supported");
  }
  a.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75f);
  if (!std::isfinite(a.cubic_a)) ctx.fail("attribute 'cubic_coeff_a' is not finite");
  a.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
  ctx.ignore_attr("extrapolation_value");  // used by tf_crop_and_resize only (refused above)
  if (ctx.attr_int("antialias", 0) != 0 && a.resize_mode != ResizeMode::Nearest) {
    ctx.fail("attribute 'antialias' = 1 is not supported");
  }
  // Opset 18: scales / sizes may name only some axes; the others keep their size.
  std::vector<int> axes;
  std::vector<int64_t> axes_attr;
  if (ctx.attr_ints("axes", &axes_attr)) {
    for (int64_t ax : axes_attr) {
      const int d = normalize_axis(ctx, ax, rank, "axes value");
      if (std::find(axes.begin(), axes.end(), d) != axes.end()) ctx.fail("attribute 'axes' repeats axis " + std::to_string(d));
      axes.push_back(d);
    }
  } else {
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int>(d));
  }
  // Inputs: X, roi (tf_crop_and_resize only: ignored), scales, sizes. An empty tensor is absent.
  std::vector<float> scales;
  if (ctx.has_input(2)) {
    const HostTensor* s = constant_of(ctx, 2);
    if (s == nullptr) ctx.fail("scales (input '" + ctx.input(2) + "') must be a constant");
    if (s->dtype != ScalarType::F32) ctx.fail(std::string("scales must be f32, got ") + to_string(s->dtype));
    for (size_t i = 0; i < s->numel(); ++i) scales.push_back(static_cast<float>(read_float(*s, i)));
  }
  std::vector<SymInt> sizes;
  if (ctx.has_input(3)) {
    const Known* k = known_of(ctx, 3);
    if (k == nullptr) ctx.fail("sizes (input '" + ctx.input(3) + "') must be an integer tensor known at export");
    sizes = k->elems;
  }
  if (scales.empty() == sizes.empty()) {
    ctx.fail(scales.empty() ? "needs scales or sizes" : "has both scales and sizes (ONNX allows one)");
  }
  const size_t given = scales.empty() ? sizes.size() : scales.size();
  if (given != axes.size()) {
    ctx.fail(std::string(scales.empty() ? "sizes" : "scales") + " has " + std::to_string(given) + " values for " +
             std::to_string(axes.size()) + " axes");
  }
  const std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && !sizes.empty()) {
    ctx.fail("keep_aspect_ratio_policy '" + policy + "' is not supported (only stretch)");
  }
  a.count = static_cast<uint8_t>(rank);
  for (size_t d = 0; d < rank; ++d) {
    a.resize_scales[d] = 1.0f;
    a.shape[d] = -1;
  }
  for (size_t j = 0; j < axes.size(); ++j) {
    const size_t d = static_cast<size_t>(axes[j]);
    const SymInt& in = x_dims[d];
    if (!scales.empty()) {
      const float s = scales[j];
      if (!(s > 0.0f) || !std::isfinite(s)) ctx.fail("scale " + std::to_string(s) + " of axis " + std::to_string(d) + " must be finite and > 0");
      a.resize_scales[d] = s;
      // onnxruntime: the output size is static_cast<int64_t>(scale * in), the product in f32.
      if (in.is_constant()) a.shape[d] = static_cast<int64_t>(s * static_cast<float>(in.c));
      continue;
    }
    const SymInt& out = sizes[j];
    if (out.is_constant() && out.c < 0) ctx.fail("sizes[" + std::to_string(j) + "] = " + std::to_string(out.c) + " is negative");
    if (in.is_constant()) {
      if (!out.is_constant()) ctx.fail("sizes[" + std::to_string(j) + "] = " + format_sym(out, graph_) + " is a run-time size for a static input dim");
      a.shape[d] = out.c;
      // onnxruntime's scale: out / in in f32 (1 for an empty dim).
      a.resize_scales[d] = in.c == 0 ? 1.0f : static_cast<float>(out.c) / static_cast<float>(in.c);
      continue;
    }
    // A symbolic input dim: the output must be k * in for a constant k >= 1, whose f32 scale
    // gives floor(in * k) = k * in exactly at run time (shape -1).
    SymInt ratio = sym_div(out, in);
    if (ratio.is_constant() && ratio.c >= 1 && sym_mul(ratio, in).same_as(out)) {
      a.resize_scales[d] = static_cast<float>(ratio.c);
      continue;
    }
    ctx.fail("sizes[" + std::to_string(j) + "] = " + format_sym(out, graph_) + " is not a constant multiple of the input dim " +
             format_sym(in, graph_) + " (run-time scales are not supported)");
  }
  define_value(ctx, 0, emit1(ctx, OpCode::Resize, {value_of(ctx, 0)}, a, ctx.output(0)));
}

}  // namespace ember::exporter::onnx_detail
