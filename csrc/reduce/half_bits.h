// float16 / bfloat16 stored as raw 16-bit patterns, with conversions that compile for host and
// device alike. The core library stays free of torch and CUDA headers, yet reduces 16-bit
// floats exactly as the hardware types would: widen to float, operate, round to nearest even.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/hostdevice.h"

namespace ring {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

RING_HOST_DEVICE float bitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
RING_HOST_DEVICE uint32_t floatToBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

RING_HOST_DEVICE float toFloat(BFloat16 h) { return bitsToFloat(static_cast<uint32_t>(h.bits) << 16); }

RING_HOST_DEVICE BFloat16 toBFloat16(float f) {
  uint32_t u = floatToBits(f);
  BFloat16 out;
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN after truncation
    out.bits = static_cast<uint16_t>((u >> 16) | 0x0040u);
    return out;
  }
  // Round to nearest, ties to even, on the 16 bits that are dropped.
  uint32_t roundingBias = 0x7fffu + ((u >> 16) & 1u);
  out.bits = static_cast<uint16_t>((u + roundingBias) >> 16);
  return out;
}

RING_HOST_DEVICE float toFloat(Half h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1fu) {  // inf / NaN
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return bitsToFloat(sign);
    // Subnormal half: value = mantissa * 2^-24, exact in float.
    float v = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

RING_HOST_DEVICE Half toHalf(float f) {
  uint32_t u = floatToBits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absU = u & 0x7fffffffu;
  Half out;
  if (absU > 0x7f800000u) {  // NaN stays NaN
    out.bits = static_cast<uint16_t>(sign | 0x7e00u);
    return out;
  }
  if (absU >= 0x477ff000u) {  // rounds to a magnitude >= 65520: infinity
    out.bits = static_cast<uint16_t>(sign | 0x7c00u);
    return out;
  }
  if (absU < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Scale so that one unit of the subnormal mantissa is 1.0, then round to nearest even
    // using float's own rounding of the addition of 0.5-ulp magic.
    float a = bitsToFloat(absU) * 16777216.0f;  // * 2^24
    // a < 1024; rounding to integer, ties to even:
    uint32_t whole = static_cast<uint32_t>(a);
    float frac = a - static_cast<float>(whole);
    if (frac > 0.5f || (frac == 0.5f && (whole & 1u))) ++whole;
    out.bits = static_cast<uint16_t>(sign | whole);
    return out;
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits, ties to even. A carry out of
  // the mantissa correctly bumps the exponent.
  uint32_t roundingBias = 0xfffu + ((absU >> 13) & 1u);
  uint32_t rebased = absU - (112u << 23) + roundingBias;
  out.bits = static_cast<uint16_t>(sign | (rebased >> 13));
  return out;
}

}  // namespace ring
