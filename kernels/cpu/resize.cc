// f32 resize (ONNX Resize; indices and weights from runtime/kernel/resize_math.h, as the reference).
//
// Vector paths for nearest and linear over the last two dims when every outer dim is an identity
// (NCHW upsampling in YOLO / PP-OCR FPNs): a work unit is a block of output rows of one plane.
//   nearest: an output row whose source row is the previous output row's is a copy of it; a row
//     whose columns map x -> x / 2 (any x2 upsampling whose coordinates round that way) stores
//     each input vector twice by StoreInterleaved2; an identity width is a copy; other widths
//     gather through an index table built per chunk of 256 columns.
//   linear: per chunk of 256 columns the two source columns and weights; per output row
//     wy0 * (wx0 * a + wx1 * b) + wy1 * (wx0 * c + wx1 * d) in f32 (gathers), a row with an
//     identity height only the horizontal part, an identity width only the vertical part. Not the
//     reference's double sum: within a few f32 ulps; every tap the reference reads is read, so NaN
//     and inf give the same results (0 * inf included).
// Everything else (cubic, other ranks, resized outer dims) runs resize_elements, the reference's
// own loop, over ranges of output rows.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/resize.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_RESIZE_PLAN_
#define EMBER_KERNELS_CPU_RESIZE_PLAN_
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parallel.h"
#include "runtime/kernel/resize_math.h"
namespace ember::kernels::cpu_detail {

constexpr int64_t kResizeChunk = 256;  // columns per index / weight table (stack)
constexpr int64_t kResizeRows = 16;    // output rows per work unit

enum class ResizeWidth : uint8_t { Table, Identity, Double };

struct ResizePlan {
  const OpAttrs* attrs;
  const float* in;
  float* out;
  int64_t planes, h, w, oh, ow;
  float scale_h, scale_w;
  ResizeWidth width;
  int64_t row_blocks;  // blocks of kResizeRows output rows per plane
};

}  // namespace ember::kernels::cpu_detail
#endif  // EMBER_KERNELS_CPU_RESIZE_PLAN_

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using cpu_detail::kResizeChunk;
using cpu_detail::ResizePlan;
using cpu_detail::ResizeWidth;

// out[x] = row[x / 2] for x < 2 * w.
void DoubleRow(const float* HWY_RESTRICT row, int64_t w, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  int64_t x = 0;
  for (; x + n <= w; x += n) {
    const auto v = hn::LoadU(d, row + x);
    hn::StoreInterleaved2(v, v, d, out + 2 * x);
  }
  for (; x < w; ++x) out[2 * x] = out[2 * x + 1] = row[x];
}

void NearestRows(const ResizePlan& p, int64_t plane, int64_t y_begin, int64_t y_end) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const float* src = p.in + plane * p.h * p.w;
  float* dst = p.out + plane * p.oh * p.ow;
  int64_t prev_iy = -1;
  for (int64_t y = y_begin; y < y_end; ++y) {
    const int64_t iy = resize::dim_taps(*p.attrs, p.scale_h, y, p.h, p.oh).index[0];
    float* orow = dst + y * p.ow;
    const float* irow = src + iy * p.w;
    if (iy == prev_iy) {
      std::memcpy(orow, orow - p.ow, static_cast<size_t>(p.ow) * sizeof(float));
      continue;
    }
    prev_iy = iy;
    if (p.width == ResizeWidth::Double) {
      DoubleRow(irow, p.w, orow);
    } else if (p.width == ResizeWidth::Identity) {
      std::memcpy(orow, irow, static_cast<size_t>(p.ow) * sizeof(float));
    } else {
      HWY_ALIGN int32_t idx[kResizeChunk];
      for (int64_t x0 = 0; x0 < p.ow; x0 += kResizeChunk) {
        const int64_t len = p.ow - x0 < kResizeChunk ? p.ow - x0 : kResizeChunk;
        for (int64_t i = 0; i < len; ++i) {
          idx[i] = static_cast<int32_t>(resize::dim_taps(*p.attrs, p.scale_w, x0 + i, p.w, p.ow).index[0]);
        }
        int64_t i = 0;
        for (; i + n <= len; i += n) hn::StoreU(hn::GatherIndex(d, irow, hn::LoadU(di, idx + i)), d, orow + x0 + i);
        for (; i < len; ++i) orow[x0 + i] = irow[idx[i]];
      }
    }
  }
}

void LinearRows(const ResizePlan& p, int64_t plane, int64_t y_begin, int64_t y_end) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const float* src = p.in + plane * p.h * p.w;
  float* dst = p.out + plane * p.oh * p.ow;
  const bool id_h = resize::dim_is_identity(p.scale_h, p.h, p.oh);
  HWY_ALIGN int32_t x0i[kResizeChunk];
  HWY_ALIGN int32_t x1i[kResizeChunk];
  HWY_ALIGN float wx0[kResizeChunk];
  HWY_ALIGN float wx1[kResizeChunk];
  for (int64_t c0 = 0; c0 < p.ow; c0 += kResizeChunk) {
    const int64_t len = p.ow - c0 < kResizeChunk ? p.ow - c0 : kResizeChunk;
    if (p.width == ResizeWidth::Table) {
      for (int64_t i = 0; i < len; ++i) {
        const resize::Taps t = resize::dim_taps(*p.attrs, p.scale_w, c0 + i, p.w, p.ow);
        x0i[i] = static_cast<int32_t>(t.index[0]);
        x1i[i] = static_cast<int32_t>(t.index[1]);
        wx0[i] = t.weight[0];
        wx1[i] = t.weight[1];
      }
    }
    for (int64_t y = y_begin; y < y_end; ++y) {
      float* orow = dst + y * p.ow + c0;
      if (id_h) {
        // Horizontal only (the width is not an identity: the plan would be a copy then).
        const float* r = src + y * p.w;
        int64_t i = 0;
        for (; i + n <= len; i += n) {
          const auto a = hn::GatherIndex(d, r, hn::LoadU(di, x0i + i));
          const auto b = hn::GatherIndex(d, r, hn::LoadU(di, x1i + i));
          hn::StoreU(hn::MulAdd(hn::LoadU(d, wx0 + i), a, hn::Mul(hn::LoadU(d, wx1 + i), b)), d, orow + i);
        }
        for (; i < len; ++i) orow[i] = wx0[i] * r[x0i[i]] + wx1[i] * r[x1i[i]];
        continue;
      }
      const resize::Taps ty = resize::dim_taps(*p.attrs, p.scale_h, y, p.h, p.oh);
      const float* r0 = src + ty.index[0] * p.w;
      const float* r1 = src + ty.index[1] * p.w;
      const float wy0 = ty.weight[0], wy1 = ty.weight[1];
      const auto vy0 = hn::Set(d, wy0), vy1 = hn::Set(d, wy1);
      int64_t i = 0;
      if (p.width == ResizeWidth::Identity) {
        for (; i + n <= len; i += n) {
          const auto top = hn::LoadU(d, r0 + c0 + i), bottom = hn::LoadU(d, r1 + c0 + i);
          hn::StoreU(hn::MulAdd(vy0, top, hn::Mul(vy1, bottom)), d, orow + i);
        }
        for (; i < len; ++i) orow[i] = wy0 * r0[c0 + i] + wy1 * r1[c0 + i];
        continue;
      }
      for (; i + n <= len; i += n) {
        const auto i0 = hn::LoadU(di, x0i + i), i1 = hn::LoadU(di, x1i + i);
        const auto w0 = hn::LoadU(d, wx0 + i), w1 = hn::LoadU(d, wx1 + i);
        const auto top = hn::MulAdd(w0, hn::GatherIndex(d, r0, i0), hn::Mul(w1, hn::GatherIndex(d, r0, i1)));
        const auto bottom = hn::MulAdd(w0, hn::GatherIndex(d, r1, i0), hn::Mul(w1, hn::GatherIndex(d, r1, i1)));
        hn::StoreU(hn::MulAdd(vy0, top, hn::Mul(vy1, bottom)), d, orow + i);
      }
      for (; i < len; ++i) {
        const float top = wx0[i] * r0[x0i[i]] + wx1[i] * r0[x1i[i]];
        const float bottom = wx0[i] * r1[x0i[i]] + wx1[i] * r1[x1i[i]];
        orow[i] = wy0 * top + wy1 * bottom;
      }
    }
  }
}

void ResizeUnits(const ResizePlan& p, size_t begin, size_t end) {
  for (size_t u = begin; u < end; ++u) {
    const int64_t plane = static_cast<int64_t>(u) / p.row_blocks;
    const int64_t y0 = (static_cast<int64_t>(u) % p.row_blocks) * cpu_detail::kResizeRows;
    const int64_t y1 = y0 + cpu_detail::kResizeRows < p.oh ? y0 + cpu_detail::kResizeRows : p.oh;
    if (p.attrs->resize_mode == ResizeMode::Nearest) {
      NearestRows(p, plane, y0, y1);
    } else {
      LinearRows(p, plane, y0, y1);
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(ResizeUnits);

namespace cpu_detail {
namespace {

void resize_units(const void* plan, size_t begin, size_t end) {
  EMBER_HWY_DISPATCH(ResizeUnits)(*static_cast<const ResizePlan*>(plan), begin, end);
}

struct GenericPlan {
  const OpAttrs* attrs;
  const float* in;
  const int64_t* in_dims;
  float* out;
  const int64_t* out_dims;
  int rank;
  int64_t row;  // output elements per unit (the last dim)
};

void generic_units(const void* plan, size_t begin, size_t end) {
  const GenericPlan& p = *static_cast<const GenericPlan*>(plan);
  resize::resize_elements(*p.attrs, p.in, p.in_dims, p.out, p.out_dims, p.rank, static_cast<int64_t>(begin) * p.row,
                          static_cast<int64_t>(end) * p.row);
}

// How output columns map to input columns under nearest / linear, checked over the whole row.
ResizeWidth width_kind(const OpAttrs& attrs, float scale, int64_t w, int64_t ow) {
  if (resize::dim_is_identity(scale, w, ow)) return ResizeWidth::Identity;
  if (attrs.resize_mode != ResizeMode::Nearest || ow != 2 * w) return ResizeWidth::Table;
  for (int64_t x = 0; x < ow; ++x) {
    if (resize::dim_taps(attrs, scale, x, w, ow).index[0] != x / 2) return ResizeWidth::Table;
  }
  return ResizeWidth::Double;
}

}  // namespace
}  // namespace cpu_detail

namespace cpu {

void resize(KernelContext& ctx, const OpAttrs& attrs, const TensorView* inputs, size_t, TensorView* outputs, size_t) {
  const TensorView& x = inputs[0];
  TensorView& out = outputs[0];
  const int rank = x.rank;
  const int64_t count = static_cast<int64_t>(out.numel());
  if (count == 0) return;
  if (resize::is_identity(x.dims, out.dims, rank)) {
    std::memcpy(out.data_as<float>(), x.data_as<const float>(), static_cast<size_t>(count) * sizeof(float));
    return;
  }
  bool planar = rank >= 2 && attrs.resize_mode != ResizeMode::Cubic;
  int64_t planes = 1;
  for (int d = 0; planar && d < rank - 2; ++d) {
    planar = resize::dim_is_identity(attrs.resize_scales[d], x.dims[d], out.dims[d]);
    planes *= x.dims[d];
  }
  if (planar) {
    cpu_detail::ResizePlan p{};
    p.attrs = &attrs;
    p.in = x.data_as<const float>();
    p.out = out.data_as<float>();
    p.planes = planes;
    p.h = x.dims[rank - 2];
    p.w = x.dims[rank - 1];
    p.oh = out.dims[rank - 2];
    p.ow = out.dims[rank - 1];
    p.scale_h = attrs.resize_scales[rank - 2];
    p.scale_w = attrs.resize_scales[rank - 1];
    p.width = cpu_detail::width_kind(attrs, p.scale_w, p.w, p.ow);
    p.row_blocks = (p.oh + cpu_detail::kResizeRows - 1) / cpu_detail::kResizeRows;
    cpu_detail::run_units(ctx.pool, static_cast<size_t>(planes * p.row_blocks), double(count), 1 << 16, &p,
                          cpu_detail::resize_units);
    return;
  }
  const cpu_detail::GenericPlan g{&attrs, x.data_as<const float>(), x.dims, out.data_as<float>(), out.dims, rank,
                                  out.dims[rank - 1]};
  const double work = double(count) * (attrs.resize_mode == ResizeMode::Cubic ? 16.0 : 4.0);
  cpu_detail::run_units(ctx.pool, static_cast<size_t>(count / g.row), work, 1 << 14, &g, cpu_detail::generic_units);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
