// PREMUL_SUM in float64 rounds the product before the sum, in the kernels as in the CPU path.
//
// Why this needs its own test: nvcc contracts `a + b * factor` into one fused multiply-add by
// default, which rounds once where the CPU executor rounds twice, so the GPU would give other
// bits than every CPU rank. The host build of the kernels is compiled with FMA contraction where
// the CPU has it (CMakeLists.txt), so this test sees what a GPU would do. The expected value is
// the closed form of IEEE 754 double arithmetic, not the CPU executor: round(round(x0 * f) +
// round(x1 * f)) for two ranks, and the inputs are chosen so that the fused form differs from
// it for many elements (checked first, so the test cannot pass by having nothing to catch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm_test_support.h"
#include "executor/cuda_errors.h"
#include "host_kernel_ring.h"
#include "kernels/host_control.h"

namespace ring {
namespace {

using namespace testing_support;

// A product rounded to double on its own (the volatile store forbids contraction here, whatever
// the flags of this file).
double roundedProduct(double a, double b) {
  volatile double p = a * b;
  return p;
}

// Full 53-bit mantissas in [1, 2), from a fixed generator.
double inputOf(int rank, int i) {
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i * 2 + rank + 1);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  return 1.0 + static_cast<double>(x >> 11) * 0x1.0p-53;
}

TEST(HostKernelRounding, Float64PreMulSumRoundsTheProductBeforeTheSum) {
  constexpr int kWorld = 2;
  constexpr int kCount = 256;
  constexpr double kFactor = 0.1;  // not a power of two: every product rounds
  std::vector<double> expected(kCount);
  int fusedDiffers = 0;
  for (int i = 0; i < kCount; ++i) {
    const double p0 = roundedProduct(inputOf(0, i), kFactor);
    const double p1 = roundedProduct(inputOf(1, i), kFactor);
    expected[i] = p0 + p1;
    // Either rank may be the one whose own product meets the received one in a fused add.
    const double fused0 = std::fma(inputOf(0, i), kFactor, p1);
    const double fused1 = std::fma(inputOf(1, i), kFactor, p0);
    if (fused0 != expected[i] || fused1 != expected[i]) ++fusedDiffers;
  }
  ASSERT_GE(fusedDiffers, kCount / 8) << "the inputs must tell a fused multiply-add apart";

  FifoGeometry geometry;
  geometry.channels = 1;
  geometry.slots = 2;
  geometry.slotBytes = 512;
  HostKernelRing ring(kWorld, geometry);
  std::vector<std::vector<double>> data(kWorld, std::vector<double>(kCount));
  std::vector<std::string> errors(kWorld);
  const Fingerprint fp =
      makeFingerprint(Collective::AllReduce, 0, kCount, DType::Float64, RedOp::PreMulSum, -1);
  runRanks(kWorld, [&](int rank) {
    for (int i = 0; i < kCount; ++i) data[rank][i] = inputOf(rank, i);
    std::string e = launchAllReduce(ring.peers(rank), ring.counters(rank), data[rank].data(),
                                    kCount, DType::Float64, RedOp::PreMulSum, kFactor, fp,
                                    RingWaitLimits{20ull * 1000 * 1000 * 1000}, nullptr);
    if (e.empty()) e = explainDeviceStop(readErrorRecord(ring.control(rank)), rank);
    errors[rank] = e;
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_EQ(errors[rank], "") << "rank " << rank;
    int wrong = 0;
    for (int i = 0; i < kCount; ++i) {
      if (std::memcmp(&data[rank][i], &expected[i], sizeof(double)) != 0) {
        if (wrong++ == 0) {
          ADD_FAILURE() << "rank " << rank << ", element " << i << ": got " << data[rank][i]
                        << ", expected round(round(x0*f) + round(x1*f)) = " << expected[i];
        }
      }
    }
    EXPECT_EQ(wrong, 0) << "rank " << rank << ": elements with other bits than the closed form";
  }
}

}  // namespace
}  // namespace ring
