// encode_e4m3fn and quantize_rows_e4m3fn (e4m3_encode.h): the e4m3fn encoder in vector integer
// arithmetic plus one f32 add for the subnormal range, and its exact decoder.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/e4m3_encode.cc"
#include "kernels/cpu/hwy_dispatch.h"

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/hwy_util-inl.h"

#ifndef EMBER_KERNELS_CPU_E4M3_ENCODE_ONCE_
#define EMBER_KERNELS_CPU_E4M3_ENCODE_ONCE_
#include "kernels/cpu/e4m3_encode.h"
#include "runtime/core/float_codecs.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace ember::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

HWY_INLINE VF QuietNan(DF d) {
  const hn::RebindToSigned<DF> di;
  return hn::BitCast(d, hn::Set(di, 0x7FC00000));
}

// f32 -> e4m3fn code per lane (in the low byte of a u32 lane), bit exact with f32_to_e4m3fn.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> EncodeE4m3(VF v) {
  const hn::RebindToUnsigned<DF> du;
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(du, f32_to_e4m3fn(hn::GetLane(v)));
#else
  const DF d;
  const hn::RebindToSigned<DF> di;
  const auto u = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<24>(u), hn::Set(du, 0x80u));
  const auto abs = hn::And(u, hn::Set(du, 0x7FFFFFFFu));
  const auto abs_i = hn::BitCast(di, abs);  // < 2^31: signed compares order it
  // |v| in [2^-6, 448): round the 20 dropped mantissa bits to nearest even (a carry moves into the
  // exponent), then rebias 127 -> 7. (Wraps for smaller |v|, which take the other branch.)
  const auto odd = hn::And(hn::ShiftRight<20>(abs), hn::Set(du, 1u));
  const auto rounded = hn::Add(abs, hn::Add(hn::Set(du, 0x7FFFFu), odd));
  const auto normal = hn::ShiftRight<20>(hn::Sub(rounded, hn::Set(du, 120u << 23)));
  // |v| < 2^-6: the e4m3 grid is multiples of 2^-9, the ULP of 2^14, so adding 2^14 in f32 rounds
  // to nearest even onto it; the code is the distance in ULPs (8 = 2^-6 when it rounds up).
  const auto grid = hn::BitCast(du, hn::Add(hn::BitCast(d, abs), hn::Set(d, 16384.0f)));
  const auto subnormal = hn::Sub(grid, hn::Set(du, 0x46800000u));
  auto code = hn::IfThenElse(hn::RebindMask(du, hn::Lt(abs_i, hn::Set(di, 0x3C800000))), subnormal,
                             normal);
  // >= 448 (Inf included) saturates to 0x7E; NaN gives 0x7F; the sign goes on top.
  code = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x43DFFFFF))),
                        hn::Set(du, 0x7Eu), code);
  code = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x7F800000))),
                        hn::Set(du, 0x7Fu), code);
  return hn::Or(code, sign);
#endif
}

// e4m3fn code per u32 lane -> f32(code), exact (NaN codes give NaN).
HWY_INLINE VF DecodeE4m3Code(hn::Vec<hn::RebindToUnsigned<DF>> code) {
  const DF d;
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(d, e4m3fn_to_f32(static_cast<uint8_t>(hn::GetLane(code))));
#else
  const hn::RebindToUnsigned<DF> du;
  const auto mag = hn::And(code, hn::Set(du, 0x7Fu));
  const auto bits = hn::Or(hn::ShiftLeft<20>(mag), hn::ShiftLeft<24>(hn::And(code, hn::Set(du, 0x80u))));
  const VF value = hn::Mul(hn::BitCast(d, bits), hn::Set(d, 0x1p120f));
  return hn::IfThenElse(hn::RebindMask(d, hn::Eq(mag, hn::Set(du, 0x7Fu))), QuietNan(d), value);
#endif
}

void encode_e4m3fn_impl(const float* in, uint8_t* out, size_t count) {
  const DF d;
  const hn::Rebind<uint8_t, DF> d8;
  const hn::RebindToSigned<DF> di;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) {
    hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, EncodeE4m3(hn::LoadU(d, in + i)))), d8, out + i);
  }
  if (i < count) {
    const auto codes = hn::DemoteTo(d8, hn::BitCast(di, EncodeE4m3(LoadTail(d, in + i, count - i))));
    StoreTail(d8, codes, out + i, count - i);
  }
}

// See quantize_rows_e4m3fn. amax by the bits: a NaN wins (the reference's NaN-skipping max gives the
// same all-NaN row of y, since the NaN element's own code is NaN).
void quantize_rows_impl(const float* x, int64_t k, size_t row_begin, size_t row_end, float* xq,
                        float* sx) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const size_t lanes = hn::Lanes(d), kn = static_cast<size_t>(k);
  for (size_t i = row_begin; i < row_end; ++i) {
    const float* xr = x + i * kn;
    float* qr = xq + i * kn;
    auto amax = hn::Zero(du);
    const auto abs_mask = hn::Set(du, 0x7FFFFFFFu);
    size_t p = 0;
    for (; p + lanes <= kn; p += lanes) amax = hn::Max(amax, hn::And(hn::BitCast(du, hn::LoadU(d, xr + p)), abs_mask));
    if (p < kn) amax = hn::Max(amax, hn::And(hn::BitCast(du, LoadTail(d, xr + p, kn - p)), abs_mask));
    float s = f32_from_bits(hn::GetLane(hn::MaxOfLanes(du, amax))) / 448.0f;
    if (s == 0.0f) s = 1.0f;
    sx[i] = s;
    const VF sv = hn::Set(d, s);
    for (p = 0; p + lanes <= kn; p += lanes) {
      hn::StoreU(DecodeE4m3Code(EncodeE4m3(hn::Div(hn::LoadU(d, xr + p), sv))), d, qr + p);
    }
    if (p < kn) {
      const VF v = DecodeE4m3Code(EncodeE4m3(hn::Div(LoadTail(d, xr + p, kn - p), sv)));
      StoreTail(d, v, qr + p, kn - p);
    }
  }
}

}  // namespace ember::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::kernels {
EMBER_HWY_EXPORT(encode_e4m3fn_impl);
EMBER_HWY_EXPORT(quantize_rows_impl);

namespace cpu {

void encode_e4m3fn(const float* in, uint8_t* out, size_t count) {
  EMBER_HWY_DISPATCH(encode_e4m3fn_impl)(in, out, count);
}

void quantize_rows_e4m3fn(const float* x, int64_t k, size_t row_begin, size_t row_end,
                          float* values, float* scales) {
  EMBER_HWY_DISPATCH(quantize_rows_impl)(x, k, row_begin, row_end, values, scales);
}

}  // namespace cpu
}  // namespace ember::kernels
#endif  // HWY_ONCE
