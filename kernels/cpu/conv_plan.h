// conv2d's geometry and the choice of algorithm, shared by conv.cc (direct) and conv_gemm.cc
// (packed GEMM, depthwise) and by the scratch function (internal to kernels/cpu).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "runtime/kernel/kernel.h"

namespace ember::kernels::cpu_detail {

constexpr int64_t kConvOcBlock = 4;  // direct path: output channels per micro-tile

// Packed GEMM blocking, the same on every target so the scratch size is a function of the shapes
// alone: a block of kConvKc reduction rows x kConvNc output positions of B (im2col) is packed per
// task, its columns rounded up to whole panels of 2 vectors (at most kConvMaxNr columns: AVX-512).
constexpr int64_t kConvKc = 256;
constexpr int64_t kConvNc = 256;
constexpr int64_t kConvMaxNr = 32;
constexpr int64_t kConvLdPad = 16;  // floats after each packed row of B
constexpr size_t kConvAlign = 64;
constexpr int64_t kMaxDepthwiseTaps = 64;  // kh * kw of the depthwise path (larger: direct)

enum class ConvPath { Direct, Gemm, Depthwise, Winograd };

struct ConvPlan {
  const float* in;
  const float* w;     // [O, C / groups, kH, kW]
  const float* bias;  // [O] or null
  float* out;
  int64_t n, c, h, w_in, o, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  int64_t groups, cpg, opg;        // channels per group (in / out)
  int64_t blocks_per_group;        // direct: ceil(opg / kConvOcBlock)
  int64_t ow_lo, ow_hi;            // direct: interior output columns
  ConvPath path;
  int64_t wino_m;                  // Winograd: output tile m (F(m x m, 3 x 3)), 2 or 4; else 0
  bool clamp;                      // conv2d_has_clamp: every output goes through conv_clamp
  float out_min, out_max;
};

// The output clamp of one element after the bias, the reference's (and ClampKeepNaN's) selects.
inline float conv_clamp(const ConvPlan& p, float v) {
  v = v < p.out_min ? p.out_min : v;
  return v > p.out_max ? p.out_max : v;
}

inline int64_t conv_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Winograd F(m x m, 3 x 3) (conv_winograd.cc) for 3x3 convs at stride 1 without dilation or groups:
// m x m outputs from an (m + 2)^2 input tile with (m + 2)^2 multiplies per input channel instead of
// 9 m^2 (m = 4: 36 instead of 144, m = 2: 16 instead of 36), plus the transforms of the input, the
// output and, per call, the weights (no kernel keeps state between calls). Its results differ from
// the reference's FMA chain by rounding (conv_winograd.cc: rel. L2 ~1e-6, m = 4). Chosen by the
// shapes alone (so scratch sizing and the run agree); conv2d_set_path_for_testing overrides it.
// Returns m, or 0 for the im2col GEMM.
int conv_path_override();  // -1: automatic; else cpu::conv2d_set_path_for_testing's mode

inline int64_t conv_winograd_tile(const ConvPlan& p) {
  const bool eligible = p.groups == 1 && p.kh == 3 && p.kw == 3 && p.sh == 1 && p.sw == 1 && p.dh == 1 &&
                        p.dw == 1 && p.pt <= 2 && p.pl <= 2 && p.pb <= 2 && p.pr <= 2;
  if (!eligible) return 0;
  const int forced = conv_path_override();
  if (forced >= 0) return forced == 2 || forced == 4 ? forced : 0;
  if (p.c < 16 || p.o < 16) return 0;  // short reductions: the GEMM's packing is cheap there anyway
  // Measured on ResNet-18's layers (bench/README.md, BM_ConvWinograd, one Zen 5 core, against the
  // GEMM): m = 4 from 28x28 maps (56x56: 2.5x, 28x28: 2.1x; m = 2 1.8x, 1.7x); m = 2 from 12x12
  // (14x14: 1.46x, m = 4 1.3x). At 7x7 the transform of the weights, per call, costs what the
  // multiplies save (512 -> 512: 1.15x with warm caches, slower inside the network).
  const int64_t positions = p.oh * p.ow;
  if (positions >= 28 * 28) return 4;
  return positions >= 12 * 12 ? 2 : 0;
}

// Geometry from the views' dims (data may be null: the scratch function).
inline void conv_fill_plan(const OpAttrs& attrs, const TensorView& x, const TensorView& w,
                           const TensorView& out, ConvPlan* plan) {
  ConvPlan& p = *plan;
  p.clamp = conv2d_has_clamp(attrs);
  p.out_min = attrs.out_min;
  p.out_max = attrs.out_max;
  p.n = x.dims[0];
  p.c = x.dims[1];
  p.h = x.dims[2];
  p.w_in = x.dims[3];
  p.o = out.dims[1];
  p.oh = out.dims[2];
  p.ow = out.dims[3];
  p.kh = w.dims[2];
  p.kw = w.dims[3];
  p.sh = attrs.stride[0];
  p.sw = attrs.stride[1];
  p.pt = attrs.padding[0];
  p.pl = attrs.padding[1];
  p.pb = attrs.padding[2];
  p.pr = attrs.padding[3];
  p.dh = attrs.dilation[0];
  p.dw = attrs.dilation[1];
  p.groups = attrs.groups > 0 ? attrs.groups : 1;
  p.cpg = p.c / p.groups;
  p.opg = p.o / p.groups;
  // Depthwise at stride 1, or 2 without dilation, has its own path; other strided depthwise (M = 1,
  // K = kh * kw per group: no GEMM worth packing for) stays direct; everything else is a GEMM per
  // group.
  if (p.cpg == 1 && p.opg == 1) {
    const bool s1 = p.sh == 1 && p.sw == 1;
    const bool s2 = p.sh == 2 && p.sw == 2 && p.dh == 1 && p.dw == 1;
    p.path = (s1 || s2) && p.kh * p.kw <= kMaxDepthwiseTaps ? ConvPath::Depthwise : ConvPath::Direct;
  } else {
    p.path = ConvPath::Gemm;
    p.wino_m = conv_winograd_tile(p);
    if (p.wino_m != 0) p.path = ConvPath::Winograd;
  }
}

// Depthwise: the zero-padded input plane split into stride x stride phase planes (stride 1: the
// plane itself; 2: rows and columns of each parity), each Hq x Wq with Hq = OH + (kh - 1) dh,
// Wq = OW + (kw - 1) dw at stride 1 and Hq = OH + kh / 2, Wq = OW + kw / 2 at stride 2; tap (i, j)
// of output q = oh Wq + ow reads phase (i % s, j % s) at q + (i / s) Wq + j / s (stride 1: i dh Wq +
// j dw). The outputs over the phase width (OH x Wq); each with slack for whole vectors.
inline int64_t conv_dw_wq(const ConvPlan& p) { return p.sw == 1 ? p.ow + (p.kw - 1) * p.dw : p.ow + p.kw / 2; }
inline int64_t conv_dw_hq(const ConvPlan& p) { return p.sh == 1 ? p.oh + (p.kh - 1) * p.dh : p.oh + p.kh / 2; }
inline int64_t conv_dw_plane_floats(const ConvPlan& p) {
  const int64_t wq = conv_dw_wq(p), hq = conv_dw_hq(p);
  return conv_round_up(p.sh * p.sw * hq * wq + (p.kw - 1) * p.dw + 4 * 16, 16);
}
inline int64_t conv_dw_outq_floats(const ConvPlan& p) { return conv_round_up(p.oh * conv_dw_wq(p) + 4 * 16, 16); }

// Winograd geometry (conv_winograd.cc): tiles of m x m outputs, th x tw of them; a task unit is a
// block of kWinoCols consecutive tiles (row-major over the tile grid) x a chunk of at most
// kWinoMaxRows output channels. Per task: the transformed input V [alpha^2][C][kWinoCols] (each
// alpha^2 plane kWinoVPad floats longer, against 4 KiB aliasing), the GEMM results M
// [rows][alpha^2][kWinoCols], the zero-padded input rows the block's tiles read, and m rows of
// staged outputs. Shared by all tasks: the transformed weights U = G g G^T [alpha^2][O][C], made once
// per call. (Transforming U per task instead, for one row group x one reduction block at a time in
// L2, won 12 % on a 512 -> 512 conv at 7x7 with warm caches and lost 5-10 % inside ResNet-18, where
// the weights stream from memory and the separate transform pass exposes that.)
constexpr int64_t kWinoCols = kConvMaxNr;
constexpr int64_t kWinoMaxRows = 64;
constexpr int64_t kWinoVPad = 16;
struct WinoGeometry {
  int64_t m, alpha, a2, th, tw, tiles;
  int64_t rows_max, wp, ws;  // padded input rows per block and their width; staged row width
  int64_t v_stride;          // floats per alpha^2 plane of V
};
inline WinoGeometry conv_wino_geometry(const ConvPlan& p) {
  WinoGeometry g{};
  g.m = p.wino_m;
  g.alpha = g.m + 2;
  g.a2 = g.alpha * g.alpha;
  g.th = (p.oh + g.m - 1) / g.m;
  g.tw = (p.ow + g.m - 1) / g.m;
  g.tiles = g.th * g.tw;
  int64_t span = (kWinoCols + g.tw - 1) / g.tw + 1;  // tile rows a block of kWinoCols tiles crosses
  if (span > g.th) span = g.th;
  g.rows_max = span * g.m + 2;
  // Interleaved loads of a vector of tiles read up to m * 16 + 4 floats past a tile's start.
  g.wp = conv_round_up(g.tw * g.m + 8 + 4 * 16, 16);
  g.ws = conv_round_up((g.tw + 16) * g.m, 16);
  g.v_stride = p.c * kWinoCols + kWinoVPad;
  return g;
}
// Floats per alpha^2 plane of the shared U (kWinoVPad more than O x C: against 4 KiB aliasing of
// the alpha^2 stores of one weight's transform).
inline int64_t conv_wino_u_stride(const ConvPlan& p) { return conv_round_up(p.o * p.c, 16) + kWinoVPad; }
inline int64_t conv_wino_shared_floats(const ConvPlan& p) {
  const int64_t a = p.wino_m + 2;
  return a * a * conv_wino_u_stride(p);
}

// Depthwise on small maps with the channels in the vector lanes (conv_gemm.cc, ConvDwLanesUnit): per
// task unit of kDwLanesGroup channels, the input planes are transposed into a zero-padded
// [Hp][Wp][channels] block, each output position is one vector of channels (taps in order: the
// planar path's FMA chain, the same bits), and the [positions][channels] results are transposed back.
// The planar path spends most of a 7x7 or 14x14 plane on its copies; this path needs AVX-512 or AVX2
// (in-register transposes) and otherwise the planar one runs, in the same slot (sized for both).
constexpr int64_t kDwLanesGroup = 16;
constexpr int64_t kDwLanesMaxPositions = 1024;  // 56x56: the planar path was faster (0.17 vs 0.19 ms)
inline int64_t conv_dw_lanes_hp(const ConvPlan& p) { return (p.oh - 1) * p.sh + (p.kh - 1) * p.dh + 1; }
inline int64_t conv_dw_lanes_wp(const ConvPlan& p) { return (p.ow - 1) * p.sw + (p.kw - 1) * p.dw + 1; }
inline bool conv_dw_lanes(const ConvPlan& p) {
  return p.path == ConvPath::Depthwise && p.oh * p.ow <= kDwLanesMaxPositions && p.c >= 8 &&
         conv_path_override() != 0;
}
inline int64_t conv_dw_lanes_floats(const ConvPlan& p) {
  return conv_round_up(conv_dw_lanes_hp(p) * conv_dw_lanes_wp(p), 4) * kDwLanesGroup +
         conv_round_up(p.oh * p.ow, 16) * kDwLanesGroup;
}

// Scratch bytes one task uses (a multiple of kConvAlign); 0 for the direct path.
inline size_t conv_slot_bytes(const ConvPlan& p) {
  int64_t floats = 0;
  if (p.path == ConvPath::Winograd) {
    const WinoGeometry g = conv_wino_geometry(p);
    const int64_t rows = p.o < kWinoMaxRows ? conv_round_up(p.o, 8) : kWinoMaxRows;
    floats = conv_round_up(g.a2 * g.v_stride, 16) + conv_round_up(rows * g.a2 * kWinoCols + 16, 16) +
             g.rows_max * g.wp + g.m * g.ws;
  } else if (p.path == ConvPath::Gemm) {
    const int64_t k = p.cpg * p.kh * p.kw, positions = p.oh * p.ow;
    const int64_t kc = k < kConvKc ? k : kConvKc;
    const int64_t cols = positions < kConvNc ? conv_round_up(positions, kConvMaxNr) : kConvNc;
    floats = kc * (cols + kConvLdPad);  // the packed block: kc rows of the block's columns
  } else if (p.path == ConvPath::Depthwise) {
    floats = conv_dw_plane_floats(p) + conv_dw_outq_floats(p);
    if (conv_dw_lanes(p) && conv_dw_lanes_floats(p) > floats) floats = conv_dw_lanes_floats(p);
  }
  return static_cast<size_t>(conv_round_up(floats * 4, static_cast<int64_t>(kConvAlign)));
}

// One output element, skipping taps outside the input (as the reference does), then + bias and the
// clamp: the packed paths recompute with it the elements that came out NaN when the conv has padding,
// since a padded tap there contributed 0 * w, which is NaN for w = ±inf / NaN where the reference
// skips it (the clamp keeps NaN, so a clamped NaN is still found).
inline float conv_point(const ConvPlan& p, int64_t n, int64_t oc, int64_t oh, int64_t ow) {
  const int64_t g = oc / p.opg;
  const float* in_g = p.in + (n * p.c + g * p.cpg) * p.h * p.w_in;
  const float* w_oc = p.w + oc * p.cpg * p.kh * p.kw;
  float acc = 0.0f;
  const int64_t ih0 = oh * p.sh - p.pt, iw0 = ow * p.sw - p.pl;
  for (int64_t ic = 0; ic < p.cpg; ++ic) {
    const float* in_c = in_g + ic * p.h * p.w_in;
    const float* w_c = w_oc + ic * p.kh * p.kw;
    for (int64_t kh = 0; kh < p.kh; ++kh) {
      const int64_t ih = ih0 + kh * p.dh;
      if (ih < 0 || ih >= p.h) continue;
      for (int64_t kw = 0; kw < p.kw; ++kw) {
        const int64_t iw = iw0 + kw * p.dw;
        if (iw < 0 || iw >= p.w_in) continue;
        acc = std::fma(in_c[ih * p.w_in + iw], w_c[kh * p.kw + kw], acc);
      }
    }
  }
  if (p.bias != nullptr) acc += p.bias[oc];
  return p.clamp ? conv_clamp(p, acc) : acc;
}

// How the GEMM path splits its work for `threads` workers (conv_gemm.cc; the scratch function uses the
// same): column blocks of nc output positions (kConvNc, halved down to 64 while there are fewer than
// 3 per thread: ResNet-18's 56x56 maps gave 13 blocks for 16 threads), and the output channels in
// m_chunks chunks when images x groups x column blocks leave threads idle (chunks = threads / gcd,
// of >= 32 rows). With more than one chunk, each chunk would pack the same B: it is packed once
// instead, for every block, into `shared_floats` of scratch before the units run (rows ld apart).
struct ConvGemmSplit {
  int64_t nc, col_blocks, m_chunk, m_chunks;
  int64_t shared_ld, shared_floats;  // 0 floats: each unit packs its own B
};
inline ConvGemmSplit conv_gemm_split(const ConvPlan& p, int64_t threads) {
  ConvGemmSplit s{};
  s.nc = kConvNc;
  while (s.nc > 64 && p.n * p.groups * ((p.oh * p.ow + s.nc - 1) / s.nc) < 3 * threads) s.nc /= 2;
  s.col_blocks = (p.oh * p.ow + s.nc - 1) / s.nc;
  const int64_t base_units = p.n * p.groups * s.col_blocks;
  int64_t chunks = 1;
  if (threads > 1 && base_units < 4 * threads && base_units % threads != 0) {
    int64_t a = base_units, b = threads;
    while (b != 0) {
      const int64_t r = a % b;
      a = b;
      b = r;
    }
    chunks = threads / a;
    const int64_t max_chunks = (p.opg + 31) / 32;
    if (chunks > max_chunks) chunks = max_chunks;
  }
  s.m_chunk = conv_round_up((p.opg + chunks - 1) / chunks, 8);
  s.m_chunks = (p.opg + s.m_chunk - 1) / s.m_chunk;
  if (s.m_chunks > 1) {
    const int64_t cols = p.oh * p.ow < s.nc ? p.oh * p.ow : s.nc;
    s.shared_ld = conv_round_up(cols, kConvMaxNr) + kConvLdPad;
    s.shared_floats = conv_round_up(base_units * p.cpg * p.kh * p.kw * s.shared_ld, 16);
  }
  return s;
}

// Runs the packed GEMM, Winograd or depthwise path (conv_gemm.cc) when p.path is one of them and
// ctx.scratch holds at least one task's slot (Winograd: and the shared transformed weights, else the
// GEMM); false: the caller runs the direct path.
bool conv2d_packed(KernelContext& ctx, const ConvPlan& p);

// The Winograd path (conv_winograd.cc): scratch at `base` (kConvAlign-aligned) holds the shared
// weights then `slots` task slots of conv_slot_bytes(p).
void conv2d_winograd(ThreadPool* pool, const ConvPlan& p, uint8_t* base, size_t slots);

}  // namespace ember::kernels::cpu_detail
