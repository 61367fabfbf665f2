// Bit-exact scalar codecs between f32 and the narrow float formats Ember stores: f16, bf16,
// f8_e4m3fn, f8_e5m2, f4_e2m1, e8m0 and ue4m3 (docs/DESIGN.md §4, "Numerics, one rule for all codecs").
//
// Header-only, inline, allocation-free, no exceptions. The 8- and 4-bit encoders round with
// integer arithmetic on the f32 bits, so their results do not depend on the FPU's rounding mode,
// flush-to-zero or contraction.
// Every function is pure and thread-safe. Pointers of the bulk helpers are borrowed for the call;
// `in` and `out` must not overlap.
//
//   format     layout (sign.exp.man)  bias  max finite  special codes
//   e4m3fn     1.4.3                  7     448         S.1111.111 = NaN; no Inf
//   e5m2       1.5.2                  15    57344       IEEE: S.11111.00 = Inf, S.11111.xx = NaN
//   e2m1       1.2.1 (low nibble)     1     6           none (no Inf, no NaN)
//   e8m0       .8.                    127   2^127       0xFF = NaN; no sign, no zero: 0x00 = 2^-127
//   ue4m3      0.4.3                  7     448         a set sign bit or 0x7F is invalid
//
// Encode = clamp to ±max finite, then round to nearest even; NaN stays NaN where the format has
// one; e4m3fn and e2m1 map ±Inf to ±max, e5m2 keeps ±Inf; subnormals are exact; -0 keeps its sign
// where the format has one. Decoding is exact (every code is an f32 value).
//
// Choices where docs/DESIGN.md is silent (each is tested in tests/runtime/core/float_codecs_test.cc):
// - NaN -> e4m3fn / e5m2 keeps the NaN's sign: S.1111.111 and S.11111.10 (the quiet NaN).
// - NaN -> e2m1 gives +0 (0x0), whatever the NaN's sign: the format has no NaN, and a NaN has no
//   magnitude to saturate towards.
// - ue4m3 has no sign and no NaN: encode clamps to [0, 448], so every negative input (-0 and -Inf
//   included) gives 0x00, and NaN gives the invalid code 0x7F. Decoding 0x7F or any code with the
//   sign bit set gives NaN.
// - e8m0 has no sign and no zero: encode clamps to [2^-127, 2^127], so zero, every negative input
//   (-Inf included) and every value below 2^-127 give 0x00; +Inf and values above 2^127 give 0xFE;
//   NaN gives 0xFF. e8m0 has no mantissa bits, so IEEE's "even" picks neither neighbour of a tie:
//   a value exactly halfway, 1.5·2^k, rounds up to 2^(k+1) (as ml_dtypes does). f32 subnormals are
//   rounded exactly (ml_dtypes 0.5.4 does not: it sends (2^-127, 1.5·2^-127) up to 2^-126).
// - The NaN an 8-bit decoder returns is the quiet NaN with the code's sign (e8m0, ue4m3: positive).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ember {

// ---- f32 bits -----------------------------------------------------------------------------------

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// ---- f16 and bf16 -------------------------------------------------------------------------------

// IEEE binary16 -> f32, exact; a NaN keeps its payload.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in f32
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

// f32 -> IEEE binary16, round to nearest even; overflow gives ±Inf (IEEE, not the clamp rule:
// f16 is a compute type, not a storage codec), NaN stays a quiet NaN with the top payload bits.
inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: inf
  if (abs < 0x38800000u) {
    // Below the smallest normal (2^-14): subnormal result man * 2^-24, rounded to nearest even.
    // Adding 0.5 (2^-1) aligns bit 2^-24 with the f32 ULP of 2^-1, so the FPU does the rounding.
    const float v = f32_from_bits(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (f32_bits(v) - 0x3F000000u));
  }
  // Normal: rebias 127 -> 15 and round the 13 dropped bits to nearest even (may carry into exp).
  const uint32_t odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xFFFu + odd - (112u << 23);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

// bfloat16 (the top half of an f32) -> f32, exact.
inline float bf16_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// f32 -> bfloat16, round to nearest even (overflow gives ±Inf); NaN stays a quiet NaN.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

namespace internal {

// Magnitude code (exponent and mantissa fields, no sign) of a format with kMan mantissa bits and
// exponent bias kBias, for `abs`: the bits of a finite, non-negative f32 no larger than the
// format's max finite. Rounds to nearest even. The result never exceeds the max finite code,
// because the max finite is itself a grid point.
template <int kMan, int kBias>
inline uint32_t codec_round_magnitude(uint32_t abs) {
  const uint32_t exp_field = abs >> 23;
  const int e = exp_field == 0 ? 1 : static_cast<int>(exp_field);  // abs = sig * 2^(e - 150)
  const uint32_t sig = exp_field == 0 ? abs : ((abs & 0x7FFFFFu) | 0x800000u);
  const int unbiased = e - 127;
  const bool normal = unbiased >= 1 - kBias;  // in the target format
  // One unit of the target's last place is 2^(unbiased - kMan) for a normal result and
  // 2^(1 - kBias - kMan) for a subnormal one; `shift` converts sig's units into it.
  const int unit_exp = (normal ? unbiased : 1 - kBias) - kMan;
  const int shift = unit_exp - (e - 150);  // >= 23 - kMan > 0
  if (shift > 24) return 0;                // sig < 2^24 <= half a unit: rounds to 0
  uint32_t q = sig >> shift;
  const uint32_t rest = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u) != 0)) ++q;
  // A normal result's code is ((biased exp) << kMan) + (q - 2^kMan); q == 2^(kMan+1) after
  // rounding carries into the exponent. A subnormal q == 2^kMan is the smallest normal code.
  const uint32_t base =
      normal ? static_cast<uint32_t>(unbiased + kBias - 1) << kMan : 0u;
  return base + q;
}

// f32 value of a magnitude code (exponent and mantissa fields, no sign) of a finite value.
template <int kMan, int kBias>
inline float codec_decode_magnitude(uint32_t code) {
  const uint32_t exp_field = code >> kMan;
  const uint32_t man = code & ((1u << kMan) - 1u);
  if (exp_field == 0) {  // subnormal: man * 2^(1 - kBias - kMan), a normal f32 for every format here
    return static_cast<float>(man) * f32_from_bits(static_cast<uint32_t>(128 - kBias - kMan) << 23);
  }
  return f32_from_bits((static_cast<uint32_t>(static_cast<int>(exp_field) - kBias + 127) << 23) |
                       (man << (23 - kMan)));
}

inline float codec_with_sign(float v, bool negative) {
  return f32_from_bits(f32_bits(v) | (negative ? 0x80000000u : 0u));
}

constexpr uint32_t kCodecF32Inf = 0x7F800000u;
constexpr uint32_t kCodecF32QuietNan = 0x7FC00000u;

}  // namespace internal

// ---- f8_e4m3fn ----------------------------------------------------------------------------------

inline float e4m3fn_to_f32(uint8_t code) {
  const bool negative = (code & 0x80u) != 0;
  const uint32_t mag = code & 0x7Fu;
  if (mag == 0x7Fu) return f32_from_bits(internal::kCodecF32QuietNan | (negative ? 0x80000000u : 0u));
  return internal::codec_with_sign(internal::codec_decode_magnitude<3, 7>(mag), negative);
}

inline uint8_t f32_to_e4m3fn(float f) {
  const uint32_t u = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > internal::kCodecF32Inf) return static_cast<uint8_t>(sign | 0x7Fu);
  if (abs >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);  // >= 448, Inf included
  return static_cast<uint8_t>(sign | internal::codec_round_magnitude<3, 7>(abs));
}

// ---- f8_e5m2 ------------------------------------------------------------------------------------

inline float e5m2_to_f32(uint8_t code) {
  const bool negative = (code & 0x80u) != 0;
  const uint32_t mag = code & 0x7Fu;
  const uint32_t sign = negative ? 0x80000000u : 0u;
  if (mag == 0x7Cu) return f32_from_bits(sign | internal::kCodecF32Inf);
  if (mag > 0x7Cu) return f32_from_bits(sign | internal::kCodecF32QuietNan);
  return internal::codec_with_sign(internal::codec_decode_magnitude<2, 15>(mag), negative);
}

inline uint8_t f32_to_e5m2(float f) {
  const uint32_t u = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > internal::kCodecF32Inf) return static_cast<uint8_t>(sign | 0x7Eu);
  if (abs == internal::kCodecF32Inf) return static_cast<uint8_t>(sign | 0x7Cu);
  if (abs >= 0x47600000u) return static_cast<uint8_t>(sign | 0x7Bu);  // >= 57344
  return static_cast<uint8_t>(sign | internal::codec_round_magnitude<2, 15>(abs));
}

// ---- f4_e2m1 (the code is the low nibble; the high nibble is ignored on decode) -----------------

inline float e2m1_to_f32(uint8_t code) {
  return internal::codec_with_sign(internal::codec_decode_magnitude<1, 1>(code & 0x7u), (code & 0x8u) != 0);
}

inline uint8_t f32_to_e2m1(float f) {
  const uint32_t u = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 28) & 0x8u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > internal::kCodecF32Inf) return 0x0u;                            // NaN: +0
  if (abs >= 0x40C00000u) return static_cast<uint8_t>(sign | 0x7u);   // >= 6, Inf included
  return static_cast<uint8_t>(sign | internal::codec_round_magnitude<1, 1>(abs));
}

// ---- e8m0 (MX block scale) ----------------------------------------------------------------------

inline float e8m0_to_f32(uint8_t code) {
  if (code == 0xFFu) return f32_from_bits(internal::kCodecF32QuietNan);
  if (code == 0x00u) return f32_from_bits(0x00400000u);  // 2^-127, an f32 subnormal
  return f32_from_bits(static_cast<uint32_t>(code) << 23);
}

// Nearest power of two in [2^-127, 2^127]; ties (1.5·2^k) round up. See the header comment.
inline uint8_t f32_to_e8m0(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > internal::kCodecF32Inf) return 0xFFu;
  if ((u & 0x80000000u) != 0) return 0x00u;  // negative (or -0): clamps to the smallest code
  const uint32_t exp_field = abs >> 23;
  const uint32_t man = abs & 0x7FFFFFu;
  if (exp_field == 0xFFu) return 0xFEu;                        // +Inf
  if (exp_field == 0) return man >= 0x600000u ? 0x01u : 0x00u;  // subnormal: vs 1.5·2^-127
  const uint32_t code = exp_field + (man >= 0x400000u ? 1u : 0u);
  return static_cast<uint8_t>(code > 0xFEu ? 0xFEu : code);
}

// MX "RCEIL": the e8m0 code of the smallest power of two >= |f|, by the bit rule (add 1 to the
// exponent when any mantissa bit is set; an f32 subnormal rounds up only above 2^-127), as torchao's
// `_f32_to_e8m0_rceil` does. Clamping: |f| <= 2^-127 (zero included) gives 0x00; a finite
// |f| > 2^127 gives 0xFE (2^127, the one case where the result is below |f|; torchao would give
// 0xFF, but amax/448 never gets there); NaN and ±Inf give 0xFF. The sign bit is ignored.
inline uint8_t e8m0_rceil(float f) {
  const uint32_t abs = f32_bits(f) & 0x7FFFFFFFu;
  const uint32_t exp_field = abs >> 23;
  const uint32_t man = abs & 0x7FFFFFu;
  if (exp_field == 0xFFu) return 0xFFu;
  if (exp_field == 0) return man > 0x400000u ? 0x01u : 0x00u;
  const uint32_t code = exp_field + (man != 0 ? 1u : 0u);
  return static_cast<uint8_t>(code > 0xFEu ? 0xFEu : code);
}

// ---- ue4m3 (NVFP4 block scale) ------------------------------------------------------------------

// The largest valid ue4m3 code (448); every code above it (0x7F, and any with the sign bit set) is
// invalid. The one definition of validity: decoders, dequantizers and kernels compare against it.
constexpr uint8_t kUe4m3MaxValidCode = 0x7Eu;

inline bool ue4m3_is_valid(uint8_t code) { return code <= kUe4m3MaxValidCode; }

inline float ue4m3_to_f32(uint8_t code) {
  if (!ue4m3_is_valid(code)) return f32_from_bits(internal::kCodecF32QuietNan);
  return internal::codec_decode_magnitude<3, 7>(code);
}

inline uint8_t f32_to_ue4m3(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > internal::kCodecF32Inf) return 0x7Fu;
  if ((u & 0x80000000u) != 0) return 0x00u;  // negative (or -0): clamps to 0
  if (abs >= 0x43E00000u) return 0x7Eu;      // >= 448, +Inf included
  return static_cast<uint8_t>(internal::codec_round_magnitude<3, 7>(abs));
}

// ---- Bulk helpers -------------------------------------------------------------------------------
// encode_X(in, out, count) writes count codes; the _from_f16 / _from_bf16 forms take f16 / bf16
// bits (widening to f32 is exact, so each element is rounded once). decode_X writes count floats.

namespace internal {

template <typename Src, typename Widen, typename Encode>
inline void codec_encode_each(const Src* in, uint8_t* out, size_t count, Widen widen, Encode encode) {
  for (size_t i = 0; i < count; ++i) out[i] = encode(widen(in[i]));
}

template <typename Decode>
inline void codec_decode_each(const uint8_t* in, float* out, size_t count, Decode decode) {
  for (size_t i = 0; i < count; ++i) out[i] = decode(in[i]);
}

// Packs two e2m1 codes per byte: element 2i in the low nibble, 2i+1 in the high nibble. An odd
// count leaves the last byte's high nibble 0. `out` holds (count + 1) / 2 bytes.
template <typename Src, typename Widen>
inline void codec_encode_e2m1_pairs(const Src* in, uint8_t* out, size_t count, Widen widen) {
  for (size_t i = 0; i < count; i += 2) {
    const uint8_t lo = f32_to_e2m1(widen(in[i]));
    const uint8_t hi = i + 1 < count ? f32_to_e2m1(widen(in[i + 1])) : 0u;
    out[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

inline float codec_identity_f32(float f) { return f; }

}  // namespace internal

inline void encode_e4m3fn(const float* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, internal::codec_identity_f32, f32_to_e4m3fn);
}
inline void encode_e4m3fn_from_f16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, f16_to_f32, f32_to_e4m3fn);
}
inline void encode_e4m3fn_from_bf16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, bf16_to_f32, f32_to_e4m3fn);
}
inline void decode_e4m3fn(const uint8_t* in, float* out, size_t count) {
  internal::codec_decode_each(in, out, count, e4m3fn_to_f32);
}

inline void encode_e5m2(const float* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, internal::codec_identity_f32, f32_to_e5m2);
}
inline void encode_e5m2_from_f16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, f16_to_f32, f32_to_e5m2);
}
inline void encode_e5m2_from_bf16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, bf16_to_f32, f32_to_e5m2);
}
inline void decode_e5m2(const uint8_t* in, float* out, size_t count) {
  internal::codec_decode_each(in, out, count, e5m2_to_f32);
}

inline void encode_e8m0(const float* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, internal::codec_identity_f32, f32_to_e8m0);
}
inline void encode_e8m0_from_f16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, f16_to_f32, f32_to_e8m0);
}
inline void encode_e8m0_from_bf16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, bf16_to_f32, f32_to_e8m0);
}
inline void decode_e8m0(const uint8_t* in, float* out, size_t count) {
  internal::codec_decode_each(in, out, count, e8m0_to_f32);
}

inline void encode_ue4m3(const float* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, internal::codec_identity_f32, f32_to_ue4m3);
}
inline void encode_ue4m3_from_f16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, f16_to_f32, f32_to_ue4m3);
}
inline void encode_ue4m3_from_bf16(const uint16_t* in, uint8_t* out, size_t count) {
  internal::codec_encode_each(in, out, count, bf16_to_f32, f32_to_ue4m3);
}
inline void decode_ue4m3(const uint8_t* in, float* out, size_t count) {
  internal::codec_decode_each(in, out, count, ue4m3_to_f32);
}

// e2m1, two codes per byte (element 2i in the low nibble); `packed` holds (count + 1) / 2 bytes.
inline void encode_e2m1_packed(const float* in, uint8_t* packed, size_t count) {
  internal::codec_encode_e2m1_pairs(in, packed, count, internal::codec_identity_f32);
}
inline void encode_e2m1_packed_from_f16(const uint16_t* in, uint8_t* packed, size_t count) {
  internal::codec_encode_e2m1_pairs(in, packed, count, f16_to_f32);
}
inline void encode_e2m1_packed_from_bf16(const uint16_t* in, uint8_t* packed, size_t count) {
  internal::codec_encode_e2m1_pairs(in, packed, count, bf16_to_f32);
}
inline void decode_e2m1_packed(const uint8_t* packed, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    out[i] = e2m1_to_f32(static_cast<uint8_t>(packed[i / 2] >> ((i & 1u) * 4)));
  }
}

}  // namespace ember
