// The vector builds of the host reductions (AVX2, AVX-512) against the portable one over every
// float16 and bfloat16 pattern: each of the 65,536 patterns combined with 256 partners that
// together take every exponent and sign (pattern 257 * j: its high byte is j), and divided by
// the divisors of small groups. The same bits in every build, so that ranks on CPUs of
// different widths hold the same results (a NaN only has to be a NaN in both: which operand's
// payload the CPU keeps is the compiler's choice of operand order).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "combine_builds.h"
#include "common/types.h"
#include "reduce/reduce_table.h"

namespace ring {
namespace {

bool isNaN16(DType t, uint16_t h) {
  return t == DType::Float16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff)
                             : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

std::vector<uint16_t> everyPattern() {
  std::vector<uint16_t> v(65536);
  for (uint32_t b = 0; b < 65536; ++b) v[b] = static_cast<uint16_t>(b);
  return v;
}

TEST(SixteenBitBuilds, EveryPatternCombinesToTheBaselineBits) {
  if (vectorBuildsHere().empty()) GTEST_SKIP() << "this CPU has no vector build to compare";
  const std::vector<uint16_t> every = everyPattern();
  std::vector<uint16_t> partner(every.size()), base(every.size()), vec(every.size());
  for (HostIsa isa : vectorBuildsHere()) {
    for (DType t : {DType::Float16, DType::BFloat16}) {
      for (RedOp op : {RedOp::Sum, RedOp::Product, RedOp::Min, RedOp::Max}) {
        for (uint32_t j = 0; j < 256; ++j) {
          std::fill(partner.begin(), partner.end(), static_cast<uint16_t>(j * 257));
          combineFnOf(HostIsa::Baseline, t, op)(base.data(), every.data(), partner.data(),
                                                65536);
          combineFnOf(isa, t, op)(vec.data(), every.data(), partner.data(), 65536);
          for (size_t b = 0; b < every.size(); ++b) {
            if (base[b] == vec[b] || (isNaN16(t, base[b]) && isNaN16(t, vec[b]))) continue;
            FAIL() << buildName(isa) << " " << dtypeName(t) << " " << redOpName(op) << " of 0x"
                   << std::hex << b << " and 0x" << j * 257 << ": 0x" << vec[b]
                   << ", the baseline 0x" << base[b];
          }
        }
      }
    }
  }
}

TEST(SixteenBitBuilds, EveryPatternDividesToTheBaselineBits) {
  if (vectorBuildsHere().empty()) GTEST_SKIP() << "this CPU has no vector build to compare";
  for (HostIsa isa : vectorBuildsHere()) {
    for (DType t : {DType::Float16, DType::BFloat16}) {
      for (int64_t divisor : {2, 3, 5, 7, 1000}) {
        std::vector<uint16_t> base = everyPattern(), vec = everyPattern();
        divideFnOf(HostIsa::Baseline, t)(base.data(), divisor, 65536);
        divideFnOf(isa, t)(vec.data(), divisor, 65536);
        for (size_t b = 0; b < base.size(); ++b) {
          if (base[b] == vec[b] || (isNaN16(t, base[b]) && isNaN16(t, vec[b]))) continue;
          FAIL() << buildName(isa) << " " << dtypeName(t) << " 0x" << std::hex << b << " / "
                 << std::dec << divisor << ": 0x" << std::hex << vec[b] << ", the baseline 0x"
                 << base[b];
        }
      }
    }
  }
}

}  // namespace
}  // namespace ring
