// Reference float16 / bfloat16 encoders and decoders for the tests, written from the formats'
// definitions with exact double arithmetic (no bit tricks), so that they check half_bits.h
// rather than repeat it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ring {
namespace ref {

// Rounds finite |x| to a binary format with `mantissaBits` stored bits and minimum normal
// exponent `minExp`, ties to even, and returns the rounded magnitude (exact in double).
inline double roundToFormat(double x, int mantissaBits, int minExp) {
  double a = std::fabs(x);
  if (a == 0) return 0;
  int e = std::ilogb(a);
  if (e < minExp) e = minExp;  // subnormals share the smallest normal exponent's spacing
  double ulp = std::ldexp(1.0, e - mantissaBits);
  return std::nearbyint(a / ulp) * ulp;  // default rounding mode: to nearest, ties to even
}

// IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits.
inline uint16_t halfBits(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7e00;  // any NaN; callers compare NaN-ness only
  if (std::isinf(f)) return sign | 0x7c00;
  double v = roundToFormat(f, 10, -14);
  if (v == 0) return sign;
  int e = std::ilogb(v);
  if (e > 15) return sign | 0x7c00;  // rounded past the largest finite half (65504)
  if (e < -14) return sign | static_cast<uint16_t>(std::ldexp(v, 24));  // subnormal: v / 2^-24
  auto mantissa = static_cast<uint16_t>(std::ldexp(v, -e) * 1024.0 - 1024.0);
  return sign | static_cast<uint16_t>((e + 15) << 10) | mantissa;
}

inline double halfValue(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
  if (e == 0x1f) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024.0 + m, e - 25);
}

// bfloat16: float's exponent (8 bits, bias 127), 7 mantissa bits.
inline uint16_t bfloat16Bits(float f) {
  if (std::isnan(f)) return 0x7fc0;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isinf(f)) return sign | 0x7f80;
  double v = roundToFormat(f, 7, -126);
  if (v >= std::ldexp(1.0, 128)) return sign | 0x7f80;
  // v has at most 8 significant bits, so it is exact in float, whose top half is the answer.
  float exact = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &exact, sizeof u);
  return sign | static_cast<uint16_t>(u >> 16);
}

inline double bfloat16Value(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int e = (bits >> 7) & 0xff, m = bits & 0x7f;
  if (e == 0xff) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -133);
  return sign * std::ldexp(128.0 + m, e - 134);
}

// The 8-bit floats of torch, from their definitions: e4m3fn (4 exponent bits, bias 7, 3
// mantissa bits; no infinity, S.1111.111 is NaN, so the largest finite is 448) and e5m2 (IEEE
// style: bias 15, 2 mantissa bits, largest finite 57344). Narrowing as torch 2.13+ casts a float:
// e4m3fn saturates (infinity too), e5m2 overflows to infinity.
struct Float8Spec {
  int mantissaBits, bias;
  double largestFinite;
  bool saturates;
};
inline constexpr Float8Spec kE4M3{3, 7, 448.0, true};
inline constexpr Float8Spec kE5M2{2, 15, 57344.0, false};

inline double float8Value(uint8_t bits, const Float8Spec& s) {
  const double sign = (bits & 0x80) ? -1.0 : 1.0;
  const int e = (bits & 0x7f) >> s.mantissaBits, m = bits & ((1 << s.mantissaBits) - 1);
  const int top = 0x7f >> s.mantissaBits;
  if (s.saturates && (bits & 0x7f) == 0x7f) return NAN;
  if (!s.saturates && e == top) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - s.bias - s.mantissaBits);
  return sign * std::ldexp((1 << s.mantissaBits) + m, e - s.bias - s.mantissaBits);
}

// The pattern of a value: found among the 256 by its decoded value, not computed by bit tricks.
inline uint8_t float8Pattern(double v, const Float8Spec& s) {
  for (int b = 0; b < 256; ++b) {
    const double x = float8Value(static_cast<uint8_t>(b), s);
    if (x == v && std::signbit(x) == std::signbit(v)) return static_cast<uint8_t>(b);
  }
  return 0x7f;  // NaN (callers compare NaN-ness only)
}

inline uint8_t float8Bits(float f, const Float8Spec& s) {
  if (std::isnan(f)) return std::signbit(f) ? 0xff : 0x7f;
  const double sign = std::signbit(f) ? -1.0 : 1.0;
  double v = std::isinf(f) ? INFINITY : roundToFormat(f, s.mantissaBits, 1 - s.bias);
  if (v > s.largestFinite) v = s.saturates ? s.largestFinite : INFINITY;
  return float8Pattern(sign * v, s);
}

}  // namespace ref
}  // namespace ring
