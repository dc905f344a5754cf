// Reduction functors through the CPU executor's type-erased table, checked against references
// written from each operator's definition (integer wraparound, NaN propagation, bool algebra);
// the 16-bit float conversions are checked in test_half_bits.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "common/errors.h"
#include "common/types.h"
#include "combine_builds.h"
#include "float16_reference.h"
#include "reduce/half_bits.h"
#include "reduce/reduce_table.h"

namespace ring {
namespace {

const RedOp kAllOps[] = {RedOp::Sum,  RedOp::Avg, RedOp::Product, RedOp::Min,      RedOp::Max,
                         RedOp::BAnd, RedOp::BOr, RedOp::BXor,    RedOp::PreMulSum};

// Runs the combine of (t, op) over the pairs (a[i], b[i]) in every build this CPU has: the
// pairs repeated to 71 elements or more, so that the vector loop and its scalar tail both see
// every pair, once into a separate output and once in place into `a` (the executor does
// both). Every build, every repeat and both forms must give the same bits (an element is one
// operation on its own operands); returns one repeat, checked against the definitions.
template <typename T>
std::vector<T> combineAll(DType t, RedOp op, const std::vector<T>& a, const std::vector<T>& b) {
  const size_t m = a.size();
  std::vector<T> x, y;
  while (x.size() < 71 || x.size() % m != 0) {
    x.push_back(a[x.size() % m]);
    y.push_back(b[y.size() % m]);
  }
  const auto n = static_cast<int64_t>(x.size());
  std::vector<T> first;
  for (HostIsa isa : buildsHere()) {
    const char* build = buildName(isa);
    std::vector<T> out(x.size()), inPlace = x;
    combineFnOf(isa, t, op)(out.data(), x.data(), y.data(), n);
    combineFnOf(isa, t, op)(inPlace.data(), inPlace.data(), y.data(), n);
    EXPECT_EQ(0, std::memcmp(out.data(), inPlace.data(), out.size() * sizeof(T)))
        << build << ": in place differs";
    for (size_t i = m; i < out.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(&out[i], &out[i % m], sizeof(T)))
          << build << ": element " << i << " differs from element " << i % m
          << " of the same operands";
    }
    if (first.empty()) {
      first = out;
    } else {
      EXPECT_EQ(0, std::memcmp(out.data(), first.data(), out.size() * sizeof(T)))
          << build << " differs from the baseline build";
    }
  }
  first.resize(m);
  return first;
}

// Two's-complement wraparound into T (what the hardware and torch do for narrow integers).
template <typename T> T wrap(int64_t x) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<uint64_t>(x)));
}

template <typename T> T integerReference(RedOp op, T a, T b) {
  const int64_t x = a, y = b;
  switch (op) {
    case RedOp::Sum: case RedOp::Avg: case RedOp::PreMulSum: return wrap<T>(x + y);
    case RedOp::Product: return wrap<T>(x * y);
    case RedOp::Min: return x < y ? a : b;
    case RedOp::Max: return x > y ? a : b;
    case RedOp::BAnd: return wrap<T>(x & y);
    case RedOp::BOr: return wrap<T>(x | y);
    case RedOp::BXor: return wrap<T>(x ^ y);
    default: ADD_FAILURE() << "no reference for " << redOpName(op); return 0;
  }
}

// Every op that opSupported() accepts for integer type T, over the given operand pairs.
template <typename T>
void expectIntegerOps(DType t, const std::vector<std::pair<T, T>>& pairs) {
  std::vector<T> a, b;
  for (auto& p : pairs) a.push_back(p.first), b.push_back(p.second);
  int tested = 0;
  for (RedOp op : kAllOps) {
    if (!opSupported(t, op)) continue;
    ++tested;
    std::vector<T> got = combineAll(t, op, a, b);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(int64_t{got[i]}, int64_t{integerReference(op, a[i], b[i])})
          << dtypeName(t) << " " << redOpName(op) << " of " << int64_t{a[i]} << ", "
          << int64_t{b[i]};
    }
  }
  EXPECT_EQ(tested, 9) << "every op applies to integers";
}

// Signed overflow is undefined behaviour for int32/int64 arithmetic in C++, so those pairs stay
// in range; the narrow types are computed in int and must wrap like torch's.
TEST(ReduceOps, IntegerOpsIncludingNegativesAndWraparound) {
  expectIntegerOps<int8_t>(DType::Int8,
      {{100, 100}, {-128, -1}, {127, 1}, {-7, 3}, {-6, 5}, {0, -128}, {16, 9}});
  expectIntegerOps<uint8_t>(DType::UInt8, {{200, 100}, {255, 255}, {0, 7}, {12, 10}});
  expectIntegerOps<int16_t>(DType::Int16, {{300, 300}, {-32768, -1}, {32767, 2}, {-5, 12}});
  expectIntegerOps<int32_t>(DType::Int32, {{-40000, 3}, {1234, -5678}, {-1, -1}, {7, 0}});
  expectIntegerOps<int64_t>(DType::Int64,
      {{-(int64_t{1} << 40), 3}, {int64_t{1} << 33, -5}, {-9, -9}, {0x0f0f, 0x00ff}});
}

bool sameFloat(double x, double y) {
  return (std::isnan(x) && std::isnan(y)) || (x == y && std::signbit(x) == std::signbit(y));
}

// Reference in double for float operands; `round` brings it back to the storage format.
double floatReference(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::Sum: case RedOp::Avg: case RedOp::PreMulSum: return a + b;
    case RedOp::Product: return a * b;
    // torch.maximum / minimum: a NaN operand makes the result NaN.
    case RedOp::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case RedOp::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    default: ADD_FAILURE() << "no reference for " << redOpName(op); return 0;
  }
}

const std::vector<std::pair<float, float>> kFloatPairs = {
    {1.5f, -2.25f}, {NAN, 1.0f}, {1.0f, NAN}, {-3.0f, -3.5f}, {INFINITY, 2.0f},
    {0.1f, 0.2f},   {-0.0f, 4.0f}, {1000.0f, 0.001f}};

template <typename T>
void expectFloatOps(DType t) {
  std::vector<T> a, b;
  for (auto& p : kFloatPairs) a.push_back(p.first), b.push_back(p.second);
  int tested = 0;
  for (RedOp op : kAllOps) {
    if (!opSupported(t, op)) continue;
    ++tested;
    std::vector<T> got = combineAll(t, op, a, b);
    for (size_t i = 0; i < a.size(); ++i) {
      // The sum of two floats rounded once to T is exactly what T's own + computes.
      double want = static_cast<T>(floatReference(op, a[i], b[i]));
      EXPECT_TRUE(sameFloat(got[i], want)) << dtypeName(t) << " " << redOpName(op) << " of "
                                           << a[i] << ", " << b[i] << ": " << got[i];
    }
  }
  EXPECT_EQ(tested, 6) << "bitwise ops do not apply to floats";
}

TEST(ReduceOps, FloatOpsPropagateNaNThroughMinAndMax) {
  expectFloatOps<float>(DType::Float32);
  expectFloatOps<double>(DType::Float64);
}

// 16-bit floats: operands decoded exactly, combined in double, rounded to float (as the
// functor computes in float) and then to the 16-bit format.
template <typename Storage>
void expectSixteenBitOps(DType t, uint16_t (*encode)(float), double (*decode)(uint16_t)) {
  std::vector<Storage> a, b;
  for (auto& p : kFloatPairs) a.push_back({encode(p.first)}), b.push_back({encode(p.second)});
  a.push_back({encode(65504.0f)}), b.push_back({encode(65504.0f)});  // overflows half
  int tested = 0;
  for (RedOp op : kAllOps) {
    if (!opSupported(t, op)) continue;
    ++tested;
    std::vector<Storage> got = combineAll(t, op, a, b);
    for (size_t i = 0; i < a.size(); ++i) {
      double x = decode(a[i].bits), y = decode(b[i].bits);
      uint16_t want = encode(static_cast<float>(floatReference(op, x, y)));
      EXPECT_TRUE(sameFloat(decode(got[i].bits), decode(want)))
          << dtypeName(t) << " " << redOpName(op) << " of " << x << ", " << y << ": bits 0x"
          << std::hex << got[i].bits << " vs 0x" << want;
    }
  }
  EXPECT_EQ(tested, 6);
}

TEST(ReduceOps, SixteenBitFloatOpsRoundOnce) {
  expectSixteenBitOps<Half>(DType::Float16, ref::halfBits, ref::halfValue);
  expectSixteenBitOps<BFloat16>(DType::BFloat16, ref::bfloat16Bits, ref::bfloat16Value);
}

// Bool is one byte holding 0 or 1: SUM and MAX are OR, PRODUCT and MIN are AND (as NCCL).
bool truthOf(RedOp op, bool p, bool q, bool* known) {
  *known = true;
  switch (op) {
    case RedOp::Sum: case RedOp::Max: case RedOp::BOr: return p || q;
    case RedOp::Product: case RedOp::Min: case RedOp::BAnd: return p && q;
    case RedOp::BXor: return p != q;
    default: *known = false; return false;
  }
}

TEST(ReduceOps, BoolOpsAreLogical) {
  const std::vector<uint8_t> a = {0, 0, 1, 1}, b = {0, 1, 0, 1};
  int tested = 0;
  for (RedOp op : kAllOps) {
    if (!opSupported(DType::Bool, op)) continue;
    ++tested;
    std::vector<uint8_t> got = combineAll(DType::Bool, op, a, b);
    for (size_t i = 0; i < a.size(); ++i) {
      bool known = false;
      bool want = truthOf(op, a[i] != 0, b[i] != 0, &known);
      ASSERT_TRUE(known) << "bool accepts " << redOpName(op) << " but it has no truth table";
      EXPECT_EQ(got[i], want ? 1 : 0) << redOpName(op) << " of " << int{a[i]} << ", " << int{b[i]};
    }
  }
  EXPECT_EQ(tested, 7) << "all but AVG and PREMUL_SUM apply to bool";
}

TEST(ReduceOps, OpSupportedRefusesMeaninglessPairs) {
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (RedOp op : {RedOp::BAnd, RedOp::BOr, RedOp::BXor}) {
      EXPECT_FALSE(opSupported(t, op)) << dtypeName(t) << " " << redOpName(op);
      // The table refuses loudly instead of returning a null function.
      EXPECT_THROW(combineFn(t, op), RingError);
    }
  }
  EXPECT_FALSE(opSupported(DType::Bool, RedOp::Avg));
  EXPECT_FALSE(opSupported(DType::Bool, RedOp::PreMulSum));
  EXPECT_THROW(combineFn(DType::Bool, RedOp::Avg), RingError);
  for (DType t : {DType::Int8, DType::UInt8, DType::Int16, DType::Int32, DType::Int64}) {
    for (RedOp op : kAllOps) EXPECT_TRUE(opSupported(t, op)) << dtypeName(t) << redOpName(op);
  }
}

// AVG's division of v by divisor in every build this CPU has, each element repeated to 19
// elements so that the vector builds' 8- and 16-wide loops and their tails see it: every build and
// every repeat must give the same bits; returns one of them.
template <typename T> std::vector<T> divided(DType t, const std::vector<T>& v, int64_t divisor) {
  std::vector<T> first;
  for (HostIsa isa : buildsHere()) {
    std::vector<T> out;
    for (const T& x : v) out.insert(out.end(), 19, x);
    divideFnOf(isa, t)(out.data(), divisor, static_cast<int64_t>(out.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(&out[i], &out[i / 19 * 19], sizeof(T)))
          << buildName(isa) << ": element " << i;
    }
    if (first.empty()) {
      first = out;
    } else {
      EXPECT_EQ(0, std::memcmp(out.data(), first.data(), out.size() * sizeof(T)))
          << "the " << buildName(isa) << " build divides otherwise than the baseline";
    }
  }
  std::vector<T> one;
  for (size_t i = 0; i < first.size(); i += 19) one.push_back(first[i]);
  return one;
}

// AVG's last step. Integer division truncates toward zero (as torch's integer division in
// c10d's AVG does), never toward minus infinity.
TEST(ReduceOps, DivideTruncatesIntegersTowardZero) {
  const std::vector<int64_t> in = {-7, 7, -8, 9, -1, 0};
  for (int64_t d : {2, 3, 7}) {
    std::vector<int64_t> got = divided(DType::Int64, in, d);
    std::vector<int8_t> got8 = divided(DType::Int8, std::vector<int8_t>(in.begin(), in.end()), d);
    for (size_t i = 0; i < in.size(); ++i) {
      auto want = static_cast<int64_t>(std::trunc(static_cast<double>(in[i]) / d));
      EXPECT_EQ(got[i], want) << in[i] << " / " << d;
      EXPECT_EQ(int64_t{got8[i]}, want) << in[i] << " / " << d << " (int8)";
    }
  }
  EXPECT_EQ(divided(DType::Int8, std::vector<int8_t>{-128}, 3)[0], -42);
  EXPECT_EQ(divided(DType::UInt8, std::vector<uint8_t>{255}, 4)[0], 63);
  EXPECT_EQ(divided(DType::Float32, std::vector<float>{7.0f, -1.0f}, 2)[0], 3.5f);
  EXPECT_EQ(divided(DType::Float32, std::vector<float>{-1.0f}, 3)[0], -1.0f / 3.0f);
  auto h = divided(DType::Float16, std::vector<Half>{{ref::halfBits(1.0f)}}, 3);
  EXPECT_EQ(h[0].bits, ref::halfBits(1.0f / 3.0f));
  auto bf = divided(DType::BFloat16, std::vector<BFloat16>{{ref::bfloat16Bits(7.0f)}}, 2);
  EXPECT_EQ(bf[0].bits, ref::bfloat16Bits(3.5f));
}

// PREMUL_SUM's pre-multiplication, computed in double; integers truncate toward zero. Every
// build, on 19 copies of each list so that the AVX2 build's eight-lane loop and its tail both
// run.
TEST(ReduceOps, ScaleMultipliesAndTruncatesIntegers) {
  const auto tiled = [](auto v) {
    auto out = v;
    for (int k = 1; k < 19; ++k) out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  for (HostIsa isa : buildsHere()) {
    for (double factor : {0.5, -2.0, 0.1}) {
      auto ints = tiled(std::vector<int32_t>{7, -7, 100, -3, 0});
      std::vector<int32_t> outInts(ints.size());
      scaleFnOf(isa, DType::Int32)(outInts.data(), ints.data(), factor,
                                   static_cast<int64_t>(ints.size()));
      auto fl = tiled(std::vector<float>{3.0f, -1.25f, 0.1f});
      std::vector<float> outFl(fl.size());
      scaleFnOf(isa, DType::Float32)(outFl.data(), fl.data(), factor,
                                     static_cast<int64_t>(fl.size()));
      auto hf = tiled(std::vector<Half>{{ref::halfBits(3.0f)}, {ref::halfBits(-0.3f)}});
      std::vector<Half> outHf(hf.size());
      scaleFnOf(isa, DType::Float16)(outHf.data(), hf.data(), factor,
                                     static_cast<int64_t>(hf.size()));
      auto bf = tiled(std::vector<BFloat16>{{ref::bfloat16Bits(3.0f)},
                                            {ref::bfloat16Bits(-0.3f)}});
      std::vector<BFloat16> outBf(bf.size());
      scaleFnOf(isa, DType::BFloat16)(outBf.data(), bf.data(), factor,
                                      static_cast<int64_t>(bf.size()));
      for (size_t i = 0; i < ints.size(); ++i) {
        EXPECT_EQ(outInts[i], static_cast<int32_t>(std::trunc(ints[i] * factor)))
            << ints[i] << " * " << factor;
      }
      for (size_t i = 0; i < fl.size(); ++i) {
        EXPECT_EQ(outFl[i], static_cast<float>(static_cast<double>(fl[i]) * factor));
      }
      for (size_t i = 0; i < hf.size(); ++i) {
        float want = static_cast<float>(ref::halfValue(hf[i].bits) * factor);
        EXPECT_EQ(outHf[i].bits, ref::halfBits(want))
            << ref::halfValue(hf[i].bits) << " * " << factor << ", element " << i;
      }
      for (size_t i = 0; i < bf.size(); ++i) {
        float want = static_cast<float>(ref::bfloat16Value(bf[i].bits) * factor);
        EXPECT_EQ(outBf[i].bits, ref::bfloat16Bits(want))
            << ref::bfloat16Value(bf[i].bits) << " * " << factor << ", element " << i;
      }
    }
  }
}

// ---- the builds of the combine loops --------------------------------------------------------

// The CPU's own word (/proc/cpuinfo's flags) on which vector builds it runs: combineFn must
// serve the widest (AVX-512 F/BW/DQ/VL, else AVX2 with F16C), not fall back unnoticed.
TEST(ReduceOps, TheWidestBuildTheCpuHasServes) {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string text;
  char buf[4096];
  for (size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, got);
  std::fclose(f);
#if defined(__x86_64__)
  auto has = [&](const char* flag) { return text.find(strCat(" ", flag, " ")) != std::string::npos; };
  const bool avx2 = has("avx2") && has("f16c");
  const bool avx512 = avx2 && has("avx512f") && has("avx512bw") && has("avx512dq") &&
                      has("avx512vl");
  EXPECT_EQ(hostIsa(), avx512 ? HostIsa::Avx512 : avx2 ? HostIsa::Avx2 : HostIsa::Baseline)
      << "cpuinfo avx2+f16c: " << avx2 << ", avx512 f/bw/dq/vl: " << avx512;
  EXPECT_EQ(hostSupports(HostIsa::Avx2), avx2);
  EXPECT_EQ(hostSupports(HostIsa::Avx512), avx512);
#elif defined(__aarch64__)
  // The kernel's word: the auxiliary vector's hardware capabilities, which /proc/cpuinfo's
  // "Features" line spells out (qemu-user before 8.2 shows the host's /proc/cpuinfo, which has
  // no such line: the auxiliary vector is then qemu's, the CPU it emulates).
  const unsigned long caps = getauxval(AT_HWCAP);
  const bool asimd = (caps & HWCAP_ASIMD) != 0 && (caps & HWCAP_FP) != 0;
  if (text.find("\nFeatures") != std::string::npos) {
    EXPECT_EQ(asimd, text.find(" asimd") != std::string::npos) << "auxv and /proc/cpuinfo";
  }
  EXPECT_EQ(hostIsa(), asimd ? HostIsa::Neon : HostIsa::Baseline) << "HWCAP asimd+fp: " << asimd;
  EXPECT_FALSE(hostSupports(HostIsa::Avx2)) << "AVX2 is an x86-64 extension";
  EXPECT_FALSE(hostSupports(HostIsa::Avx512)) << "AVX-512 is an x86-64 extension";
#else
  EXPECT_EQ(hostIsa(), HostIsa::Baseline) << "AVX2 is an x86-64 extension";
#endif
#if !defined(__aarch64__)
  EXPECT_FALSE(hostSupports(HostIsa::Neon)) << "NEON is served on aarch64 only";
#endif
  // What the executor calls is that build's: the combine, AVG's division, PREMUL_SUM's
  // scaling.
  for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
    const DType t = static_cast<DType>(d);
    EXPECT_EQ(divideFn(t), divideFnOf(hostIsa(), t)) << dtypeName(t);
    EXPECT_EQ(scaleFn(t), scaleFnOf(hostIsa(), t)) << dtypeName(t);
    for (RedOp op : kAllOps) {
      if (opSupported(t, op)) {
        EXPECT_EQ(combineFn(t, op), combineFnOf(hostIsa(), t, op)) << dtypeName(t);
      }
    }
  }
}

// Whether the element at `p` of dtype t is a NaN (the floating types).
bool isNaNAt(DType t, const uint8_t* p) {
  switch (t) {
    case DType::Float32: { float v; std::memcpy(&v, p, 4); return v != v; }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); return v != v; }
    case DType::Float16: { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
    case DType::BFloat16: { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }
    case DType::Float8E4M3: return (*p & 0x7f) == 0x7f;
    case DType::Float8E5M2: return (*p & 0x7c) == 0x7c && (*p & 0x03);
    default: return false;
  }
}

// Operands of dtype t: random bit patterns (every value of an integer type; floats with
// subnormals, infinities and NaNs among them), bool as 0 or 1, and for the floating types the
// values where the ops are delicate set in: +-0, +-inf, a NaN, the largest finite value.
std::vector<uint8_t> operands(DType t, int64_t count, uint64_t seed) {
  const size_t es = elementSize(t);
  std::vector<uint8_t> v(static_cast<size_t>(count) * es);
  for (auto& byte : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    byte = static_cast<uint8_t>(seed >> 56);
  }
  if (t == DType::Bool) {
    for (auto& byte : v) byte &= 1;
  }
  const std::vector<std::vector<uint8_t>> special = [&]() -> std::vector<std::vector<uint8_t>> {
    auto bytesOf = [](auto x) {
      std::vector<uint8_t> b(sizeof x);
      std::memcpy(b.data(), &x, sizeof x);
      return b;
    };
    switch (t) {
      case DType::Float32: return {bytesOf(0.0f), bytesOf(-0.0f), bytesOf(INFINITY),
                                   bytesOf(-INFINITY), bytesOf(NAN), bytesOf(FLT_MAX)};
      case DType::Float64: return {bytesOf(0.0), bytesOf(-0.0), bytesOf(double(INFINITY)),
                                   bytesOf(-double(INFINITY)), bytesOf(double(NAN)),
                                   bytesOf(DBL_MAX)};
      case DType::Float16: return {bytesOf(uint16_t{0}), bytesOf(uint16_t{0x8000}),
                                   bytesOf(uint16_t{0x7c00}), bytesOf(uint16_t{0xfc00}),
                                   bytesOf(uint16_t{0x7e00}), bytesOf(uint16_t{0x7bff})};
      case DType::BFloat16: return {bytesOf(uint16_t{0}), bytesOf(uint16_t{0x8000}),
                                    bytesOf(uint16_t{0x7f80}), bytesOf(uint16_t{0xff80}),
                                    bytesOf(uint16_t{0x7fc0}), bytesOf(uint16_t{0x7f7f})};
      case DType::Float8E4M3: return {bytesOf(uint8_t{0}), bytesOf(uint8_t{0x80}),
                                      bytesOf(uint8_t{0x7f}), bytesOf(uint8_t{0x7e}),
                                      bytesOf(uint8_t{0xfe}), bytesOf(uint8_t{0x01})};
      case DType::Float8E5M2: return {bytesOf(uint8_t{0}), bytesOf(uint8_t{0x80}),
                                      bytesOf(uint8_t{0x7c}), bytesOf(uint8_t{0xfc}),
                                      bytesOf(uint8_t{0x7e}), bytesOf(uint8_t{0x7b})};
      default: return {};
    }
  }();
  for (int64_t i = 0; !special.empty() && i < count; i += 3) {
    const auto& x = special[static_cast<size_t>((i / 3 + seed % 7) % special.size())];
    std::memcpy(&v[static_cast<size_t>(i) * es], x.data(), es);
  }
  return v;
}

// Each vector build against the baseline one, over every (dtype, op) pair, at lengths around the
// vector widths and one element past an aligned start: the same bits, so that ranks on CPUs
// of different vector widths hold the same result. A NaN result only has to be a NaN in both:
// which operand's payload an x86 add keeps follows the operand order the compiler chose.
TEST(ReduceOps, VectorBuildsGiveTheBaselineBits) {
  if (vectorBuildsHere().empty()) GTEST_SKIP() << "this CPU has no vector build to compare";
  for (HostIsa isa : vectorBuildsHere()) {
    int pairs = 0;
    for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
      const DType t = static_cast<DType>(d);
      const size_t es = elementSize(t);
      for (RedOp op : kAllOps) {
        if (!opSupported(t, op)) continue;
        ++pairs;
        for (int64_t count : {1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 1000, 1037}) {
          const auto a = operands(t, count + 1, 11u + d * 31u + count);
          const auto b = operands(t, count + 1, 97u + d * 17u + count);
          std::vector<uint8_t> base(a.size()), vec(a.size());
          combineFnOf(HostIsa::Baseline, t, op)(base.data() + es, a.data() + es, b.data() + es,
                                                count);
          combineFnOf(isa, t, op)(vec.data() + es, a.data() + es, b.data() + es, count);
          for (int64_t i = 1; i <= count; ++i) {
            const uint8_t* x = &base[static_cast<size_t>(i) * es];
            const uint8_t* y = &vec[static_cast<size_t>(i) * es];
            if (isNaNAt(t, x) && isNaNAt(t, y)) continue;
            ASSERT_EQ(0, std::memcmp(x, y, es))
                << buildName(isa) << " " << dtypeName(t) << " " << redOpName(op) << ", element "
                << i - 1 << " of " << count;
          }
        }
      }
    }
    // Floats 6 ops each, signed integers and uint8 9, the wider unsigned 8 (no PREMUL_SUM), bool 7.
    EXPECT_EQ(pairs, 6 * 6 + 5 * 9 + 3 * 8 + 7);
  }
}

// AVG's division likewise, by the divisors of groups of 1 to 1,000 ranks.
TEST(ReduceOps, VectorBuildsDivideToTheBaselineBits) {
  if (vectorBuildsHere().empty()) GTEST_SKIP() << "this CPU has no vector build to compare";
  for (HostIsa isa : vectorBuildsHere()) {
    for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
      const DType t = static_cast<DType>(d);
      if (!opSupported(t, RedOp::Avg)) continue;
      const size_t es = elementSize(t);
      for (int64_t divisor : {1, 2, 3, 7, 8, 1000}) {
        for (int64_t count : {1, 7, 9, 17, 1037}) {
          const auto v = operands(t, count + 1, 5u + d * 13u + count + divisor);
          auto base = v, vec = v;
          divideFnOf(HostIsa::Baseline, t)(base.data() + es, divisor, count);
          divideFnOf(isa, t)(vec.data() + es, divisor, count);
          for (int64_t i = 1; i <= count; ++i) {
            const uint8_t* x = &base[static_cast<size_t>(i) * es];
            const uint8_t* y = &vec[static_cast<size_t>(i) * es];
            if (isNaNAt(t, x) && isNaNAt(t, y)) continue;
            ASSERT_EQ(0, std::memcmp(x, y, es)) << buildName(isa) << " " << dtypeName(t) << " / "
                                                << divisor << ", element " << i - 1 << " of "
                                                << count;
          }
        }
      }
    }
  }
}

// PREMUL_SUM's scaling: each vector build gives the baseline's bits, in place and apart, for
// factors that are exact in float and ones that are not (a third, 0.1), and ones that overflow
// or flush the 16-bit types; and over every float16 and bfloat16 pattern for 3.353773474374694,
// a factor whose rounding to float would change 62 float16 products (found by search over the
// 63,488 finite halves against the same arithmetic with the factor rounded): the factor must
// stay a double, as scaleRange keeps it.
TEST(ReduceOps, VectorBuildsScaleToTheBaselineBits) {
  if (vectorBuildsHere().empty()) GTEST_SKIP() << "this CPU has no vector build to compare";
  for (HostIsa isa : vectorBuildsHere()) {
    for (DType t : {DType::Float16, DType::BFloat16}) {
      std::vector<uint16_t> every(65536), base(65536), vec(65536);
      for (uint32_t b = 0; b < 65536; ++b) every[b] = static_cast<uint16_t>(b);
      for (double factor : {3.353773474374694, 1.0 / 3.0}) {
        scaleFnOf(HostIsa::Baseline, t)(base.data(), every.data(), factor, 65536);
        scaleFnOf(isa, t)(vec.data(), every.data(), factor, 65536);
        for (size_t b = 0; b < every.size(); ++b) {
          const auto* x = reinterpret_cast<const uint8_t*>(&base[b]);
          const auto* y = reinterpret_cast<const uint8_t*>(&vec[b]);
          if (isNaNAt(t, x) && isNaNAt(t, y)) continue;
          ASSERT_EQ(base[b], vec[b]) << buildName(isa) << " " << dtypeName(t) << " pattern 0x"
                                      << std::hex << b
                                      << " x " << factor;
        }
      }
    }
    for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
      const DType t = static_cast<DType>(d);
      if (!opSupported(t, RedOp::PreMulSum)) continue;
      const size_t es = elementSize(t);
      for (double factor : {1.0, 0.5, 1.0 / 3.0, 0.1, -2.75, 1e-9, 1e30, 1.0 + 0x1p-40}) {
        for (int64_t count : {1, 7, 9, 17, 1037}) {
          const auto v = operands(t, count + 1, 7u + d * 17u + count);
          auto base = v, vec = v, apart = v;
          std::vector<uint8_t> out(v.size());
          scaleFnOf(HostIsa::Baseline, t)(base.data() + es, base.data() + es, factor, count);
          scaleFnOf(isa, t)(vec.data() + es, vec.data() + es, factor, count);
          scaleFnOf(isa, t)(out.data() + es, apart.data() + es, factor, count);
          for (int64_t i = 1; i <= count; ++i) {
            const uint8_t* x = &base[static_cast<size_t>(i) * es];
            for (const uint8_t* y : {&vec[static_cast<size_t>(i) * es],
                                     &out[static_cast<size_t>(i) * es]}) {
              if (isNaNAt(t, x) && isNaNAt(t, y)) continue;
              ASSERT_EQ(0, std::memcmp(x, y, es)) << buildName(isa) << " " << dtypeName(t) << " x "
                                                  << factor << ", element " << i - 1 << " of "
                                                  << count;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ring
