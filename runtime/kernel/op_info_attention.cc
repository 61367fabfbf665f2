// Shape functions and run-time input checks of paged_attention and logits_gather (docs/DESIGN.md §6). The
// paged_attention check is the kernels' own argument check (paged_attention_args.h), so a bad slot,
// block id or context length fails execute() with InvalidArgument before the cache is touched.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "runtime/kernel/op_info_internal.h"
#include "runtime/kernel/paged_attention_args.h"

namespace ember::internal {
namespace {

constexpr int64_t kMaxHeadDim = 256;  // the Highway kernel's limit (kernels/cpu/paged_attention.h)

// size -1: any length.
Status check_i32_vector(const char* what, const TensorView& t, int64_t size, ErrorContext* ctx) {
  if (t.dtype != ScalarType::I32 || t.rank != 1 || (size >= 0 && t.dims[0] != size)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: %s must be i32 [%lld], got %s %s", what,
                      static_cast<long long>(size), to_string(t.dtype), dims_text(t).text);
  }
  return Status::ok();
}

long long ll(int64_t v) { return static_cast<long long>(v); }

}  // namespace

// q [T, Hq, D], k, v [T, Hkv, D] f32; k_cache, v_cache [blocks, block_size, Hkv, D] of one dtype
// (f32, bf16, f16, f8_e4m3fn); slot_mapping [T], block_tables [S, max_blocks], context_lens [S],
// query_start [S + 1] i32 -> out [T, Hq, D] f32. Hq a multiple of Hkv, 1 <= D <= 256; the
// attention scale finite and > 0; the FP8 cache's kv_scale finite and > 0.
Status paged_attention_shape(const OpAttrs& attrs, const TensorView* inputs, size_t input_count,
                             TensorView* outputs, size_t output_count, Span<const int64_t>,
                             ErrorContext* ctx) {
  const char* op = "paged_attention";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 9, 9, 0, outputs, output_count, ctx));
  const TensorView& q = inputs[0];
  const TensorView& k = inputs[1];
  const TensorView& v = inputs[2];
  const TensorView& kc = inputs[3];
  const TensorView& vc = inputs[4];
  if (q.dtype != ScalarType::F32 || k.dtype != ScalarType::F32 || v.dtype != ScalarType::F32 ||
      q.rank != 3 || k.rank != 3 || v.rank != 3) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: q, k, v must be f32 [T, heads, D], got %s %s, %s %s, %s %s",
                      to_string(q.dtype), dims_text(q).text, to_string(k.dtype), dims_text(k).text,
                      to_string(v.dtype), dims_text(v).text);
  }
  const int64_t T = q.dims[0], hq = q.dims[1], d = q.dims[2], hkv = k.dims[1];
  const bool kv_ok = k.dims[0] == T && k.dims[2] == d && v.dims[0] == T && v.dims[1] == hkv && v.dims[2] == d;
  if (!kv_ok || hq < 1 || hkv < 1 || d < 1 || d > kMaxHeadDim || hq % hkv != 0) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: q %s, k %s, v %s: need equal T and D (1..%lld) and Hq a multiple "
                      "of Hkv >= 1", dims_text(q).text, dims_text(k).text, dims_text(v).text,
                      ll(kMaxHeadDim));
  }
  if (paged_cache_element_bytes(kc.dtype) == 0 || vc.dtype != kc.dtype || kc.rank != 4 || vc.rank != 4 ||
      kc.dims[2] != hkv || kc.dims[3] != d || kc.dims[1] < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: caches must be [blocks, block_size, %lld, %lld] of f32, bf16, f16 or "
                      "f8_e4m3fn, got k_cache %s %s, v_cache %s %s", ll(hkv), ll(d), to_string(kc.dtype),
                      dims_text(kc).text, to_string(vc.dtype), dims_text(vc).text);
  }
  for (int i = 0; i < 4; ++i) {
    if (vc.dims[i] != kc.dims[i]) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: k_cache %s and v_cache %s differ",
                        dims_text(kc).text, dims_text(vc).text);
    }
  }
  EMBER_RETURN_IF_ERROR(check_i32_vector("slot_mapping", inputs[5], T, ctx));
  const TensorView& tables = inputs[6];
  if (tables.dtype != ScalarType::I32 || tables.rank != 2) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: block_tables must be i32 [S, max_blocks], got %s %s",
                      to_string(tables.dtype), dims_text(tables).text);
  }
  const int64_t S = tables.dims[0];
  EMBER_RETURN_IF_ERROR(check_i32_vector("context_lens", inputs[7], S, ctx));
  // query_start has S + 1 entries; its length is a symbol of its own in a graph (S + 1 is not
  // expressible), so the shape function checks only a non-empty vector and the input check
  // (before every kernel call) the exact length.
  EMBER_RETURN_IF_ERROR(check_i32_vector("query_start", inputs[8], -1, ctx));
  if (inputs[8].dims[0] < 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: query_start must not be empty");
  }
  if (!(attrs.attn_scale > 0.0f) || !std::isfinite(attrs.attn_scale)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: scale %g must be finite and > 0",
                      static_cast<double>(attrs.attn_scale));
  }
  if (kc.dtype == ScalarType::F8E4M3FN && (!(attrs.kv_scale > 0.0f) || !std::isfinite(attrs.kv_scale))) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: FP8 kv_scale %g must be finite and > 0",
                      static_cast<double>(attrs.kv_scale));
  }
  if (attrs.attn_window < 0 || !(attrs.attn_softcap >= 0.0f) || !std::isfinite(attrs.attn_softcap)) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "paged_attention: sliding_window %d must be >= 0 and softcap %g finite and >= 0",
                      static_cast<int>(attrs.attn_window), static_cast<double>(attrs.attn_softcap));
  }
  EMBER_RETURN_IF_ERROR(check_output(op, ScalarType::F32, q.dims, 3, ctx));
  set_output(&outputs[0], ScalarType::F32, q.dims, 3);
  return Status::ok();
}

Status paged_attention_check(const OpAttrs& attrs, const TensorView* in, size_t, ErrorContext* ctx) {
  if (in[8].dims[0] != in[6].dims[0] + 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "paged_attention: query_start has %lld entries for %lld sequences (S + 1 needed)",
                      ll(in[8].dims[0]), ll(in[6].dims[0]));
  }
  for (int i = 0; i < 9; ++i) {
    if (in[i].data == nullptr) return Status::ok();  // shapes only
  }
  const TensorView& kc = in[3];
  // `out` is not known here; the kernels check it again. Pass q as a stand-in non-null pointer.
  return check_paged_attention_args(
      in[0].data_as<const float>(), in[1].data_as<const float>(), in[2].data_as<const float>(), in[0].dims[0],
      in[6].dims[0], in[0].dims[1], in[1].dims[1], in[0].dims[2], kc.dtype, kc.data, in[4].data, kc.dims[0],
      kc.dims[1], attrs.kv_scale, in[5].data_as<const int32_t>(), in[6].data_as<const int32_t>(), in[6].dims[1],
      in[7].data_as<const int32_t>(), in[8].data_as<const int32_t>(), in[0].data_as<const float>(), ctx);
}

// hidden [T, H] f32, indices [S] i32 -> [S, H] f32.
Status logits_gather_shape(const OpAttrs&, const TensorView* inputs, size_t input_count, TensorView* outputs,
                           size_t output_count, Span<const int64_t>, ErrorContext* ctx) {
  const char* op = "logits_gather";
  EMBER_RETURN_IF_ERROR(check_args(op, inputs, input_count, 2, 2, 0, outputs, output_count, ctx));
  const TensorView& h = inputs[0];
  const TensorView& idx = inputs[1];
  if (h.dtype != ScalarType::F32 || h.rank != 2 || idx.dtype != ScalarType::I32 || idx.rank != 1) {
    return EMBER_FAIL(ctx, Error::InvalidArgument,
                      "logits_gather: needs hidden f32 [T, H] and indices i32 [S], got %s %s and %s %s",
                      to_string(h.dtype), dims_text(h).text, to_string(idx.dtype), dims_text(idx).text);
  }
  const int64_t dims[2] = {idx.dims[0], h.dims[1]};
  EMBER_RETURN_IF_ERROR(check_output(op, ScalarType::F32, dims, 2, ctx));
  set_output(&outputs[0], ScalarType::F32, dims, 2);
  return Status::ok();
}

// Every index in [-1, T) (-1: a padding row, zeros).
Status logits_gather_check(const OpAttrs&, const TensorView* inputs, size_t, ErrorContext* ctx) {
  const TensorView& idx = inputs[1];
  if (idx.data == nullptr) return Status::ok();
  const int32_t* p = idx.data_as<const int32_t>();
  const int64_t rows = inputs[0].dims[0];
  for (int64_t s = 0; s < idx.dims[0]; ++s) {
    if (p[s] < -1 || p[s] >= rows) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "logits_gather: index %d at %lld is outside [-1, %lld)",
                        static_cast<int>(p[s]), ll(s), ll(rows));
    }
  }
  return Status::ok();
}

}  // namespace ember::internal
