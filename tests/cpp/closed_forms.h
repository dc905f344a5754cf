// Inputs with closed-form reductions for the Communicator tests: rank r's element i, and what
// every reduction over n ranks must give, written without looping over the ranks.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/types.h"

namespace ring {
namespace testing_support {

// Rank r's element i is base(i) + dir(i) * r: small integers (exact in every dtype), with the
// largest contribution sometimes on the first rank and sometimes on the last.
inline double base(int64_t i) { return static_cast<double>(i % 11) - 5; }
inline double dir(int64_t i) { return i % 2 ? 1.0 : -1.0; }
inline double linearValue(int r, int64_t i) { return base(i) + dir(i) * r; }
inline double linearSum(int n, int64_t i) { return n * base(i) + dir(i) * n * (n - 1) / 2.0; }
// PRODUCT uses factors 1 or 2 (1 + [r + i even]); the product is 2^(ranks with r + i even).
inline double productFactor(int r, int64_t i) { return (r + i) % 2 == 0 ? 2 : 1; }
inline double productOf(int n, int64_t i) { return std::ldexp(1.0, (n + (i % 2 == 0 ? 1 : 0)) / 2); }
// Bool: rank r holds (r + i) % 3 == 0. OR: some r < n is congruent to -i; AND: only one rank.
inline double boolValue(int r, int64_t i) { return (r + i) % 3 == 0; }
inline double anyRankTrue(int n, int64_t i) { return (3 - i % 3) % 3 < n; }
inline double allRanksTrue(int n, int64_t i) { return n == 1 && i % 3 == 0; }

inline double inputFor(DType t, RedOp op, int r, int64_t i) {
  if (t == DType::Bool) return boolValue(r, i);
  if (op == RedOp::Product) return productFactor(r, i);
  // PREMUL_SUM scales by 0.5 first: doubled inputs keep every contribution exact.
  if (op == RedOp::PreMulSum) return 2 * linearValue(r, i);
  return linearValue(r, i);
}

inline double expectedFor(DType t, RedOp op, int n, int64_t i) {
  if (t == DType::Bool) {
    return op == RedOp::Sum || op == RedOp::Max ? anyRankTrue(n, i) : allRanksTrue(n, i);
  }
  switch (op) {
    case RedOp::Sum: case RedOp::PreMulSum: return linearSum(n, i);
    case RedOp::Max: return base(i) + (dir(i) > 0 ? n - 1 : 0);
    case RedOp::Min: return base(i) - (dir(i) > 0 ? 0 : n - 1);
    case RedOp::Product: return productOf(n, i);
    case RedOp::Avg:
      // Integers truncate toward zero; floats divide once in float (then round to 16 bits).
      if (t == DType::Int64) return static_cast<double>(static_cast<int64_t>(linearSum(n, i)) / n);
      return static_cast<double>(static_cast<float>(linearSum(n, i)) / static_cast<float>(n));
    default: return NAN;
  }
}

}  // namespace testing_support
}  // namespace ring
