// The space of ring-kernel cases the kernel tests cover, shared by the host-run kernel tests
// (test_host_kernels.cc) and the tests over the emulated CUDA runtime (emulated_ring_support.cc):
// every collective the kernels run, every dtype, every op, the (collective, dtype, op)
// combinations the kernels support, the PREMUL_SUM factor, the small FIFO geometries that make
// slots wrap, and the bit mixer the inputs are drawn from. One list, so that both suites cover
// the same combinations.
#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

#include "common/types.h"
#include "kernels/fifo_layout.h"

namespace ring {
namespace testing_support {

inline constexpr Collective kKinds[] = {Collective::AllReduce, Collective::ReduceScatter,
                                        Collective::AllGather, Collective::Broadcast};
inline constexpr DType kDTypes[] = {DType::Float32,    DType::Float64,   DType::Float16,
                                    DType::BFloat16,   DType::Int8,      DType::Int16,
                                    DType::Int32,      DType::Int64,     DType::UInt8,
                                    DType::Bool,       DType::UInt16,    DType::UInt32,
                                    DType::UInt64,     DType::Float8E4M3, DType::Float8E5M2};
inline constexpr RedOp kOps[] = {RedOp::Sum, RedOp::Avg, RedOp::Product,
                                 RedOp::Min, RedOp::Max, RedOp::BAnd,
                                 RedOp::BOr, RedOp::BXor, RedOp::PreMulSum};
inline constexpr double kPreMulFactor = 0.3711;

inline bool reduces(Collective k) {
  return k == Collective::AllReduce || k == Collective::ReduceScatter;
}

// Every (collective, dtype, op) the kernels support: the reducing collectives with each op the
// dtype supports, the others once per dtype (op SUM).
inline std::vector<std::tuple<Collective, DType, RedOp>> kernelCombinations() {
  std::vector<std::tuple<Collective, DType, RedOp>> out;
  for (Collective k : kKinds) {
    for (DType t : kDTypes) {
      if (!reduces(k)) {
        out.emplace_back(k, t, RedOp::Sum);
        continue;
      }
      for (RedOp op : kOps) {
        if (opSupported(t, op)) out.emplace_back(k, t, op);
      }
    }
  }
  return out;
}

// One ring per channel count: slot counts and sizes vary with it; slots of 256 and 512 bytes
// make every count above a few hundred elements cycle the slot ring many times.
inline FifoGeometry geometryFor(int channels) {
  FifoGeometry g;
  g.channels = channels;
  g.slots = channels == 1 ? 2 : (channels == 2 ? 3 : 4);
  g.slotBytes = channels % 2 == 1 ? 256 : 512;
  return g;
}

// A 64-bit finalizer (splitmix64's): well-spread input bits from a case, rank and index.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace testing_support
}  // namespace ring
