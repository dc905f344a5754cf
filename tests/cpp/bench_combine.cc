// The host reduction's speed in each build of its loops (reduce_table.h: the baseline x86-64
// one and the AVX2 one), dst = a op b over float32, bfloat16 and float16 SUM, in bytes of one
// operand per second: a buffer in L1 (4 KiB: the small all_reduce's one combine), in L2
// (256 KiB: a ring slice), and in memory (64 MiB); then AVG's division, v /= 3, at 256 KiB.
//
//   ring_combine_bench [repeats]     # medians of `repeats` timed blocks (default 21)
//
// Why: whether the AVX2 build is worth a second copy of the 90 loops, in time as well as in
// instructions (docs/notes/call_instructions.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/types.h"
#include "reduce/half_bits.h"
#include "reduce/reduce_table.h"

namespace {

using Clock = std::chrono::steady_clock;

// `bytes` of dtype t holding normal values around `base` (no subnormals: their path is the
// slow one and gradients seldom are).
std::vector<char> values(ring::DType t, size_t bytes, float base) {
  std::vector<char> v(bytes);
  const size_t es = ring::elementSize(t);
  for (size_t i = 0; i < bytes / es; ++i) {
    const float x = base + static_cast<float>(i % 97) / 97.0f;
    if (t == ring::DType::Float32) {
      std::memcpy(&v[i * es], &x, es);
    } else {
      const uint16_t bits = t == ring::DType::Float16 ? ring::toHalf(x).bits
                                                      : ring::toBFloat16(x).bits;
      std::memcpy(&v[i * es], &bits, es);
    }
  }
  return v;
}

// Median over `repeats` blocks of the seconds one combine of `bytes` takes.
double secondsPerCombine(ring::DType t, ring::CombineFn fn, size_t bytes, int repeats) {
  const int64_t count = static_cast<int64_t>(bytes / ring::elementSize(t));
  std::vector<char> a = values(t, bytes, 0.5f), b = values(t, bytes, 1.0f), out(bytes);
  // Enough calls per block to run about 2 ms, so the clock's resolution does not count.
  const int calls = static_cast<int>(std::max<size_t>(1, (size_t{1} << 23) / bytes));
  std::vector<double> block;
  fn(out.data(), a.data(), b.data(), count);  // pages touched, caches warm
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int c = 0; c < calls; ++c) fn(out.data(), a.data(), b.data(), count);
    block.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / calls);
  }
  std::sort(block.begin(), block.end());
  return block[block.size() / 2];
}

// Seconds for one call of `step` on `bytes` of fresh values: the median of `repeats` blocks.
template <typename Step>
double secondsOnFresh(ring::DType t, size_t bytes, int repeats, const Step& step) {
  const std::vector<char> fresh = values(t, bytes, 0.5f);
  std::vector<char> v;
  std::vector<double> block;
  for (int r = 0; r < repeats; ++r) {
    v = fresh;
    const auto t0 = Clock::now();
    step(v);
    block.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(block.begin(), block.end());
  return block[block.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 21;
  std::vector<ring::HostIsa> builds;  // every build this CPU runs, served or not
  for (int i = 0; i < ring::kHostIsas; ++i) {
    if (ring::hostSupports(static_cast<ring::HostIsa>(i))) {
      builds.push_back(static_cast<ring::HostIsa>(i));
    }
  }
  std::printf("%-9s %-9s %10s %12s %12s\n", "dtype", "bytes", "build", "ns/combine", "GB/s");
  for (ring::DType t : {ring::DType::Float32, ring::DType::BFloat16, ring::DType::Float16}) {
    for (size_t bytes : {size_t{4} << 10, size_t{256} << 10, size_t{64} << 20}) {
      for (ring::HostIsa isa : builds) {
        const double s =
            secondsPerCombine(t, ring::combineFnOf(isa, t, ring::RedOp::Sum), bytes, repeats);
        std::printf("%-9s %-9zu %10s %12.0f %12.2f\n", ring::dtypeName(t), bytes,
                    ring::hostIsaName(isa), s * 1e9, bytes / s / 1e9);
      }
    }
  }
  // AVG's last step, v /= 3 in place over 256 KiB, and PREMUL_SUM's scaling, v *= 1/3 in
  // place: one call per block, each on fresh values (repeated divisions would reach the
  // subnormals, whose path is the slow one).
  const size_t bytes = size_t{256} << 10;
  for (const char* step : {"divide", "scale"}) {
    std::printf("\n%-9s %-9s %10s %12s %12s\n", step, "bytes", "build", "ns/call", "GB/s");
    for (ring::DType t : {ring::DType::Float32, ring::DType::BFloat16, ring::DType::Float16}) {
      const int64_t count = static_cast<int64_t>(bytes / ring::elementSize(t));
      for (ring::HostIsa isa : builds) {
        const double s = secondsOnFresh(t, bytes, repeats, [&](std::vector<char>& v) {
          if (step[0] == 'd') {
            ring::divideFnOf(isa, t)(v.data(), 3, count);
          } else {
            ring::scaleFnOf(isa, t)(v.data(), v.data(), 1.0 / 3.0, count);
          }
        });
        std::printf("%-9s %-9zu %10s %12.0f %12.2f\n", ring::dtypeName(t), bytes,
                    ring::hostIsaName(isa), s * 1e9, bytes / s / 1e9);
      }
    }
  }
  return 0;
}
