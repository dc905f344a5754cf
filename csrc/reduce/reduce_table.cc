#include "reduce/reduce_table.h"

#include "common/env.h"
#include "common/errors.h"
#include "reduce/reduce_avx512.h"
#include "reduce/reduce_neon.h"
#include "reduce/reduce_ops.h"

// The AVX2 build of the combine loops (combineHostAvx2): x86-64 with GCC or clang, which
// have the target attribute and __builtin_cpu_supports.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RING_COMBINE_AVX2 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define RING_COMBINE_AVX2 0
#endif

namespace ring {
namespace {

template <DType D, RedOp Op>
void combineHost(void* dst, const void* a, const void* b, int64_t count) {
  combineRange<D, Op>(dst, a, b, 0, count);
}

#if RING_COMBINE_AVX2
// The same loop built for AVX2, 256-bit vectors where the baseline x86-64 build has 128-bit
// ones (SSE2), which makes the reduction the largest single item of a small call's instructions
// (docs/notes/call_instructions.md).
// Why the results are the same bits: each element is one IEEE operation (or integer, bool
// or 16-bit-float-through-float operation) on its own two operands, whatever the vector
// width; the loop reassociates nothing, and the AVX2 target has no FMA, so no multiply-add
// is contracted (PREMUL_SUM's scaling is a separate baseline step anyway). Ranks on CPUs
// with and without AVX2 therefore agree bit for bit (ReduceOps.Avx2BuildGivesTheBaselineBits).
// Why an attribute and not a translation unit built with -mavx2: combineRange and Combine are
// inline templates of namespace ring, and an out-of-line copy built for AVX2 could be the one
// the linker keeps for every caller; `flatten` inlines them here, and this function's own
// linkage is internal.
template <DType D, RedOp Op>
__attribute__((target("avx2,f16c"), flatten)) void combineHostAvx2(void* dst, const void* a,
                                                                    const void* b,
                                                                    int64_t count) {
  combineRange<D, Op>(dst, a, b, 0, count);
}

// float16 in the AVX2 build: eight elements at a time widened by the CPU's own conversion (F16C, on
// every CPU with AVX2), combined as float32 by the same functor, and rounded back to nearest even
// by the CPU. Why: the portable conversions (half_bits.h) branch on the exponent, so no compiler
// vectorizes them, and a float16 combine ran some twenty times slower than float32's
// (docs/notes/code_comment_figures.md, "Reduction builds"). The same bits: widening a half is
// exact, the functor computes in float as Combine<Float16> does, and the hardware rounds to nearest
// even as toHalf does; only a NaN's payload may differ (toHalf makes every NaN 0x7e00 with its
// sign, the CPU keeps the top of the payload), and a NaN stays a NaN.
__attribute__((target("avx2,f16c"))) inline __m256 widenHalfx8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

__attribute__((target("avx2,f16c"))) inline void narrowHalfx8(__m256 f, uint16_t* p) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
}

// bfloat16 in the AVX2 build, eight lanes at a time as float16's, with toFloat's and toBFloat16's
// bit operations written for eight lanes (no CPU before AVX-512 BF16 converts bfloat16, and that
// one flushes subnormals, which toBFloat16 rounds). Why by hand: the compiler's own vectorization
// of the portable loop ran several times slower than float32's in cache
// (docs/notes/code_comment_figures.md). The same bits: widening is the same shift, and the
// narrowing below is toBFloat16's, NaN rule included.
__attribute__((target("avx2"))) inline __m256 widenBf16x8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2"))) inline void narrowBf16x8(__m256 f, uint16_t* p) {
  const __m256i u = _mm256_castps_si256(f);
  // NaN (toBFloat16): the top half with the quiet bit set.
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i isNaN = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i nanBits = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  // Otherwise to nearest, ties to even, on the 16 bits that are dropped.
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb);
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  const __m256i bits = _mm256_blendv_epi8(rounded, nanBits, isNaN);
  // Eight 32-bit lanes, each below 0x10000, to eight 16-bit ones in order: the pack works
  // within each 128-bit half, the permute puts the halves' results side by side.
  const __m256i packed = _mm256_packus_epi32(bits, bits);
  const __m256i ordered = _mm256_permute4x64_epi64(packed, 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(ordered));
}

// The float16 and bfloat16 loop of the AVX2 build: eight elements at a time widened to float,
// combined by the float32 functor (the arithmetic Combine<D> does in float), narrowed back;
// the last 0-7 as the baseline does them.
template <DType D, RedOp Op>
__attribute__((target("avx2,f16c"), flatten)) void combineSixteenBitAvx2(void* dst,
                                                                          const void* a,
                                                                          const void* b,
                                                                          int64_t count) {
  constexpr bool kHalf = D == DType::Float16;
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    alignas(32) float fx[8], fy[8];  // both read before the write: dst may be a or b
    _mm256_store_ps(fx, kHalf ? widenHalfx8(x + i) : widenBf16x8(x + i));
    _mm256_store_ps(fy, kHalf ? widenHalfx8(y + i) : widenBf16x8(y + i));
    for (int k = 0; k < 8; ++k) fx[k] = Combine<DType::Float32, Op>::apply(fx[k], fy[k]);
    if (kHalf) {
      narrowHalfx8(_mm256_load_ps(fx), out + i);
    } else {
      narrowBf16x8(_mm256_load_ps(fx), out + i);
    }
  }
  combineRange<D, Op>(dst, a, b, i, count);
}

// AVG's last step in the AVX2 build, as combineHostAvx2 (the same bits: one division per
// element, in the type divideRange divides in).
template <DType D>
__attribute__((target("avx2,f16c"), flatten)) void divideHostAvx2(void* data, int64_t divisor,
                                                                   int64_t count) {
  divideRange<D>(data, divisor, 0, count);
}

// float16's, through F16C as its combine: widened, divided in float by the divisor as a
// float (divideRange's arithmetic for float16), rounded to nearest even by the CPU.
__attribute__((target("avx2,f16c"), flatten)) void divideHalfF16c(void* data, int64_t divisor,
                                                                   int64_t count) {
  auto* v = static_cast<uint16_t*>(data);
  const __m256 by = _mm256_set1_ps(static_cast<float>(divisor));
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    narrowHalfx8(_mm256_div_ps(widenHalfx8(v + i), by), v + i);
  }
  divideRange<DType::Float16>(data, divisor, i, count);  // the last 0-7, as the baseline
}

// What the AVX2 build serves for (D, Op), and for AVG's division of D.
template <DType D, RedOp Op>
constexpr CombineFn avx2Combine() {
  if constexpr (D == DType::Float16 || D == DType::BFloat16) {
    return &combineSixteenBitAvx2<D, Op>;
  } else {
    return &combineHostAvx2<D, Op>;
  }
}
// PREMUL_SUM's scaling in the AVX2 build. The 16-bit floats eight lanes at a time: widened to
// float, each float to double (exact), multiplied by the factor in double, rounded to float,
// narrowed as the combine narrows. Why: the portable loop converts through half_bits.h's
// branches, so a float16 PREMUL_SUM scaled at the speed float16's combine had before its AVX2
// build. The same bits: scaleRange's three roundings per element, in the same order (the
// double product, to float, to the 16-bit type), all to nearest even; the target has no FMA to
// contract anything. The other types as scaleRange, compiled for AVX2 (one operation per
// element whatever the width, as combineHostAvx2).
template <DType D>
__attribute__((target("avx2,f16c"), flatten)) void scaleHostAvx2(void* out, const void* in,
                                                                  double factor, int64_t count) {
  int64_t i = 0;
  if constexpr (D == DType::Float16 || D == DType::BFloat16) {
    constexpr bool kHalf = D == DType::Float16;
    const auto* x = static_cast<const uint16_t*>(in);
    auto* o = static_cast<uint16_t*>(out);
    const __m256d by = _mm256_set1_pd(factor);
    for (; i + 8 <= count; i += 8) {
      const __m256 f = kHalf ? widenHalfx8(x + i) : widenBf16x8(x + i);  // read before the write
      const __m128 lo =
          _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), by));
      const __m128 hi =
          _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), by));
      const __m256 product = _mm256_set_m128(hi, lo);
      if (kHalf) {
        narrowHalfx8(product, o + i);
      } else {
        narrowBf16x8(product, o + i);
      }
    }
  }
  scaleRange<D>(out, in, factor, i, count);  // the rest (every element of the other types)
}

template <DType D>
constexpr DivideFn avx2Divide() {
  if constexpr (D == DType::Float16) {
    return &divideHalfF16c;
  } else {
    return &divideHostAvx2<D>;
  }
}
#endif
template <DType D>
void divideHost(void* data, int64_t divisor, int64_t count) {
  divideRange<D>(data, divisor, 0, count);
}
template <DType D>
void scaleHost(void* out, const void* in, double factor, int64_t count) {
  scaleRange<D>(out, in, factor, 0, count);
}

constexpr int kTypes = static_cast<int>(DType::kCount);
constexpr int kOps = static_cast<int>(RedOp::kCount);

// AVX2 with F16C (x86-64-v3 has both), and the OS saving the 256-bit registers (which
// __builtin_cpu_supports checks for AVX2).
bool cpuHasAvx2() {
#if RING_COMBINE_AVX2
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return f16c && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

// Which builds this CPU runs: the AVX-512 one only beside the AVX2 one (every AVX-512 CPU
// has AVX2 and F16C; the pair keeps the choice below a simple order); the NEON one on aarch64
// alone (cpuHasNeon is false in an x86 binary, cpuHasAvx2 in an Arm one).
bool cpuRuns(HostIsa isa) {
  switch (isa) {
    case HostIsa::Baseline: return true;
    case HostIsa::Avx2: return cpuHasAvx2();
    case HostIsa::Avx512: return cpuHasAvx2() && cpuHasAvx512();
    case HostIsa::Neon: return cpuHasNeon();
  }
  return false;
}

// TORCH_RING_CPU_ISA's build (common/env.h): the one named, or the widest this CPU runs.
HostIsa chosenIsa() {
  const std::string& asked = env().cpuIsa;
  if (asked == "baseline") return HostIsa::Baseline;
  if (asked == "avx2" || asked == "avx512" || asked == "neon") {
    const HostIsa isa = asked == "avx2"     ? HostIsa::Avx2
                        : asked == "avx512" ? HostIsa::Avx512
                                            : HostIsa::Neon;
    if (!cpuRuns(isa)) {
      throw UsageError(strCat("TORCH_RING_CPU_ISA='", asked, "' but this CPU has no ",
                              isa == HostIsa::Avx2     ? "AVX2 with F16C"
                              : isa == HostIsa::Avx512 ? "AVX-512 F/BW/DQ/VL"
                                                       : "Advanced SIMD (aarch64 NEON)",
                              " (or its system does not save the vector registers); use auto "
                              "or baseline"));
    }
    return isa;
  }
  if (cpuRuns(HostIsa::Neon)) return HostIsa::Neon;
  return cpuRuns(HostIsa::Avx512) ? HostIsa::Avx512
                                  : cpuRuns(HostIsa::Avx2) ? HostIsa::Avx2 : HostIsa::Baseline;
}

struct Table {
  // combine[isa], divide[isa], scale[isa]: the baseline build, and each vector build this CPU
  // runs (served or not: tests compare them).
  CombineFn combine[kHostIsas][kTypes][kOps] = {};
  DivideFn divide[kHostIsas][kTypes] = {};
  ScaleFn scale[kHostIsas][kTypes] = {};
  bool runs[kHostIsas] = {true, cpuRuns(HostIsa::Avx2), cpuRuns(HostIsa::Avx512),
                          cpuRuns(HostIsa::Neon)};
  HostIsa best = chosenIsa();
  Table() {
#if RING_COMBINE_AVX2
#define RING_ADD_AVX2(OP)                                                             \
  if (runs[1]) {                                                                      \
    combine[1][static_cast<int>(kType)][static_cast<int>(RedOp::OP)] =                \
        avx2Combine<kType, RedOp::OP>();                                              \
  }                                                                                   \
  if (runs[2]) {                                                                      \
    CombineFn own = avx512Combine(kType, RedOp::OP);                                  \
    combine[2][static_cast<int>(kType)][static_cast<int>(RedOp::OP)] =                \
        own != nullptr ? own : avx2Combine<kType, RedOp::OP>();                       \
  }
#else
#define RING_ADD_AVX2(OP)
#endif
// The NEON build: its own loops where it has them (reduce_neon.h), else the baseline's, which
// the compiler vectorizes with Advanced SIMD on aarch64.
#define RING_ADD_NEON(OP)                                                                 \
  if (runs[3]) {                                                                          \
    CombineFn own = neonCombine(kType, RedOp::OP);                                        \
    combine[3][static_cast<int>(kType)][static_cast<int>(RedOp::OP)] =                    \
        own != nullptr ? own : &combineHost<kType, RedOp::OP>;                            \
  }
#define RING_ADD_OP(OP)                                                                   \
  combine[0][static_cast<int>(kType)][static_cast<int>(RedOp::OP)] =                      \
      &combineHost<kType, RedOp::OP>;                                                     \
  RING_ADD_AVX2(OP)                                                                       \
  RING_ADD_NEON(OP)
#if RING_COMBINE_AVX2
#define RING_ADD_AVX2_DIVIDE_SCALE                                \
  if (runs[1]) {                                                  \
    divide[1][static_cast<int>(kType)] = avx2Divide<kType>();     \
    scale[1][static_cast<int>(kType)] = &scaleHostAvx2<kType>;    \
  }                                                               \
  if (runs[2]) {                                                  \
    divide[2][static_cast<int>(kType)] =                          \
        avx512Divide(kType) ? avx512Divide(kType) : avx2Divide<kType>(); \
    scale[2][static_cast<int>(kType)] =                           \
        avx512Scale(kType) ? avx512Scale(kType) : &scaleHostAvx2<kType>; \
  }
#else
#define RING_ADD_AVX2_DIVIDE_SCALE
#endif
#define RING_ADD_TYPE(TYPE)                                        \
  {                                                                \
    constexpr DType kType = DType::TYPE;                           \
    RING_FOR_EACH_OP(RING_ADD_OP)                                  \
    divide[0][static_cast<int>(kType)] = &divideHost<kType>;       \
    RING_ADD_AVX2_DIVIDE_SCALE                                     \
    scale[0][static_cast<int>(kType)] = &scaleHost<kType>;         \
    if (runs[3]) {                                                 \
      divide[3][static_cast<int>(kType)] =                         \
          neonDivide(kType) ? neonDivide(kType) : &divideHost<kType>; \
      scale[3][static_cast<int>(kType)] =                          \
          neonScale(kType) ? neonScale(kType) : &scaleHost<kType>; \
    }                                                              \
  }
    RING_FOR_EACH_DTYPE(RING_ADD_TYPE)
#undef RING_ADD_TYPE
#undef RING_ADD_OP
#undef RING_ADD_AVX2
#undef RING_ADD_NEON
#undef RING_ADD_AVX2_DIVIDE_SCALE
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

HostIsa hostIsa() { return table().best; }

bool hostSupports(HostIsa isa) { return table().runs[static_cast<int>(isa)]; }

const char* hostIsaName(HostIsa isa) {
  switch (isa) {
    case HostIsa::Baseline: return "baseline";
    case HostIsa::Avx2: return "avx2";
    case HostIsa::Avx512: return "avx512";
    case HostIsa::Neon: return "neon";
  }
  return "?";
}

CombineFn combineFn(DType t, RedOp op) {
  // Per call: the served build straight from the table, without combineFnOf's build check.
  RING_ASSERT(opSupported(t, op), dtypeName(t), " x ", redOpName(op));
  const Table& tb = table();
  return tb.combine[static_cast<int>(tb.best)][static_cast<int>(t)][static_cast<int>(op)];
}

CombineFn combineFnOf(HostIsa isa, DType t, RedOp op) {
  RING_ASSERT(opSupported(t, op), dtypeName(t), " x ", redOpName(op));
  RING_ASSERT(hostSupports(isa), "the ", hostIsaName(isa), " combine asked for on a CPU without it");
  return table().combine[static_cast<int>(isa)][static_cast<int>(t)][static_cast<int>(op)];
}
DivideFn divideFn(DType t) { return divideFnOf(hostIsa(), t); }

DivideFn divideFnOf(HostIsa isa, DType t) {
  RING_ASSERT(hostSupports(isa), "the ", hostIsaName(isa), " division asked for on a CPU without it");
  return table().divide[static_cast<int>(isa)][static_cast<int>(t)];
}
ScaleFn scaleFn(DType t) {
  const Table& tb = table();
  return tb.scale[static_cast<int>(tb.best)][static_cast<int>(t)];
}

ScaleFn scaleFnOf(HostIsa isa, DType t) {
  RING_ASSERT(hostSupports(isa), "the ", hostIsaName(isa), " scaling asked for on a CPU without it");
  return table().scale[static_cast<int>(isa)][static_cast<int>(t)];
}

}  // namespace ring
