#include "reduce/reduce_avx512.h"

#include "reduce/reduce_ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RING_COMBINE_AVX512 1
#include <immintrin.h>
#else
#define RING_COMBINE_AVX512 0
#endif

namespace ring {

#if RING_COMBINE_AVX512
namespace {

// What the AVX-512 build holds: bfloat16's loops only. Measured on this project's machine (an AMD
// EPYC whose 512-bit operations issue as two 256-bit halves; tests/cpp/bench_combine.cc), 512-bit
// float32 and float16 (F16C at 512 bits) loops ran at or below the AVX2 build's speed, so the
// AVX-512 build serves the AVX2 loops for every other dtype (reduce_table.cc); bfloat16's
// narrowing, eleven integer operations per eight lanes in the AVX2 build, is one instruction here,
// and faster (docs/notes/code_comment_figures.md, "Reduction builds", has the figures).
//
// Why the same bits as the baseline build, as reduce_table.cc's AVX2 build: each element is one
// operation on its own two operands whatever the vector width, nothing is reassociated, and this
// file is compiled with -ffp-contract=off (CMakeLists.txt), so no multiply and add are fused
// although AVX-512 machines have FMA. Why `flatten` and internal linkage: combineRange and
// Combine are inline templates, and an out-of-line copy built for AVX-512 must never be the one
// the linker keeps for the baseline callers. Why prefer-vector-width=512: compilers otherwise
// tune AVX-512 code for 256-bit vectors (clang has no such target option, and ignores a whole
// target attribute that names one: it gets the features alone).
#if defined(__clang__)
#define RING_AVX512 "avx512f,avx512bw,avx512dq,avx512vl,f16c"
#else
#define RING_AVX512 "avx512f,avx512bw,avx512dq,avx512vl,f16c,prefer-vector-width=512"
#endif

// Widening is a shift. The narrowing below is toBFloat16's integer rounding on sixteen lanes,
// for CPUs without AVX512_BF16, for AVG's division and PREMUL_SUM's scaling, and for the lanes
// that VCVTNEPS2BF16 would get wrong (narrowBf16x16Native).
__attribute__((target(RING_AVX512))) inline __m512 widenBf16x16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

__attribute__((target(RING_AVX512))) inline void narrowBf16x16(__m512 f, uint16_t* p) {
  const __m512i u = _mm512_castps_si512(f);
  // NaN: the top half with the quiet bit set (toBFloat16's rule).
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 isNaN = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i nanBits = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  // Otherwise to nearest, ties to even, on the sixteen bits dropped.
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb);
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __m512i bits = _mm512_mask_blend_epi32(isNaN, rounded, nanBits);
  // Each lane is below 0x10000: the truncating narrow keeps it whole.
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
}

// The same narrowing through AVX512_BF16's VCVTNEPS2BF16, which rounds to nearest even and
// quiets a NaN as toBFloat16 does, but reads a subnormal input as zero: a lane whose float is
// subnormal (and not zero) takes the integer rounding above instead, which is rare (sums below
// 2^-126), so it costs a compare on the common path.
#define RING_AVX512_BF16 RING_AVX512 ",avx512bf16"
__attribute__((target(RING_AVX512_BF16))) inline void narrowBf16x16Native(__m512 f, uint16_t* p) {
  const __m512i magnitude = _mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(0x7fffffff));
  const __mmask16 subnormal =
      _mm512_cmplt_epu32_mask(_mm512_sub_epi32(magnitude, _mm512_set1_epi32(1)),
                              _mm512_set1_epi32(0x007fffff));
  if (subnormal != 0) {
    narrowBf16x16(f, p);
    return;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(f));
}

// bfloat16's combine: sixteen elements widened to float, combined by the float32 functor (the
// arithmetic Combine<BFloat16> does in float), narrowed back by `kNative`'s narrowing (through
// VCVTNEPS2BF16 where the CPU has AVX512_BF16, which the attribute must then allow); the last
// 0-15 as the baseline does them.
#define RING_BF16_COMBINE_BODY(NARROW)                                                    \
  const auto* x = static_cast<const uint16_t*>(a);                                       \
  const auto* y = static_cast<const uint16_t*>(b);                                       \
  auto* out = static_cast<uint16_t*>(dst);                                               \
  int64_t i = 0;                                                                         \
  for (; i + 16 <= count; i += 16) {                                                     \
    alignas(64) float fx[16], fy[16]; /* both read before the write: dst may be a or b */ \
    _mm512_store_ps(fx, widenBf16x16(x + i));                                            \
    _mm512_store_ps(fy, widenBf16x16(y + i));                                            \
    for (int k = 0; k < 16; ++k) fx[k] = Combine<DType::Float32, Op>::apply(fx[k], fy[k]); \
    NARROW(_mm512_load_ps(fx), out + i);                                                 \
  }                                                                                      \
  combineRange<DType::BFloat16, Op>(dst, a, b, i, count);

template <RedOp Op>
__attribute__((target(RING_AVX512), flatten)) void combineBf16Avx512(void* dst, const void* a,
                                                                      const void* b,
                                                                      int64_t count) {
  RING_BF16_COMBINE_BODY(narrowBf16x16)
}

template <RedOp Op>
__attribute__((target(RING_AVX512_BF16), flatten)) void combineBf16NativeAvx512(
    void* dst, const void* a, const void* b, int64_t count) {
  RING_BF16_COMBINE_BODY(narrowBf16x16Native)
}
#undef RING_BF16_COMBINE_BODY

// AVG's division: sixteen lanes widened, divided in float by the divisor as a float (as
// divideRange does for bfloat16), narrowed as the combine narrows without AVX512_BF16.
__attribute__((target(RING_AVX512), flatten)) void divideBf16Avx512(void* data, int64_t divisor,
                                                                     int64_t count) {
  auto* v = static_cast<uint16_t*>(data);
  const __m512 by = _mm512_set1_ps(static_cast<float>(divisor));
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) narrowBf16x16(_mm512_div_ps(widenBf16x16(v + i), by), v + i);
  divideRange<DType::BFloat16>(data, divisor, i, count);
}

// PREMUL_SUM's scaling: scaleRange's three roundings per element in its order (the product in
// double, to float, to bfloat16), sixteen lanes at a time.
__attribute__((target(RING_AVX512), flatten)) void scaleBf16Avx512(void* out, const void* in,
                                                                    double factor,
                                                                    int64_t count) {
  const auto* x = static_cast<const uint16_t*>(in);
  auto* o = static_cast<uint16_t*>(out);
  const __m512d by = _mm512_set1_pd(factor);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 f = widenBf16x16(x + i);  // read before the write
    const __m256 lo =
        _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(f)), by));
    const __m256 hi =
        _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1)), by));
    narrowBf16x16(_mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1), o + i);
  }
  scaleRange<DType::BFloat16>(out, in, factor, i, count);
}

constexpr int kOps = static_cast<int>(RedOp::kCount);

struct Bf16Table {
  CombineFn combine[kOps] = {};
  Bf16Table() {
    const bool native = __builtin_cpu_supports("avx512bf16");
#define RING_ADD_OP(OP)                                                               \
  combine[static_cast<int>(RedOp::OP)] =                                              \
      native ? &combineBf16NativeAvx512<RedOp::OP> : &combineBf16Avx512<RedOp::OP>;
    RING_FOR_EACH_OP(RING_ADD_OP)
#undef RING_ADD_OP
  }
};

}  // namespace

bool cpuHasAvx512() {
  // __builtin_cpu_supports checks the OS's saving of the 512-bit state for these (XCR0).
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

CombineFn avx512Combine(DType t, RedOp op) {
  static const Bf16Table table;
  return t == DType::BFloat16 ? table.combine[static_cast<int>(op)] : nullptr;
}
DivideFn avx512Divide(DType t) { return t == DType::BFloat16 ? &divideBf16Avx512 : nullptr; }
ScaleFn avx512Scale(DType t) { return t == DType::BFloat16 ? &scaleBf16Avx512 : nullptr; }

#else  // no AVX-512 build in this binary

bool cpuHasAvx512() { return false; }
CombineFn avx512Combine(DType, RedOp) { return nullptr; }
DivideFn avx512Divide(DType) { return nullptr; }
ScaleFn avx512Scale(DType) { return nullptr; }

#endif

}  // namespace ring
