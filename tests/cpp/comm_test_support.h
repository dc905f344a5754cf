// Helpers for Communicator tests: a group of threads as ranks meeting through an in-memory
// store, small FIFO slots (so that every collective takes many slices), and typed element
// access for the dtypes the tests use.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "collective_calls.h"
#include "common/types.h"
#include "executor/communicator.h"
#include "float16_reference.h"
#include "memory_store.h"
#include "rank_threads.h"

namespace ring {
namespace testing_support {

using namespace std::chrono_literals;

// 256-byte slots: a 20000-element float all-reduce on 7 ranks takes ~45 pipeline loops. Every
// collective goes around the ring (whatever TORCH_RING_DIRECT_BYTES and TORCH_RING_LL_BYTES
// say) unless a test sets directBytes or mailboxBytes.
inline CommOptions smallSlotOptions() {
  CommOptions o;
  o.timeout = std::chrono::seconds(10);
  o.groupName = "unit";
  o.slotBytes = 256;
  o.slots = 4;
  o.directBytes = 0;
  o.mailboxBytes = 0;
  return o;
}

// Every path of a small call on n ranks of one host: through the mailbox up to 4 KiB, a direct
// round up to one 64 KiB slot, the ring (through the FIFOs) beyond.
inline CommOptions threePathOptions(int n) {
  CommOptions o = smallSlotOptions();
  o.slotBytes = 64 * 1024;
  o.directBytes = o.slotBytes * (n - 1);
  o.mailboxBytes = 4096;
  return o;
}

inline CallInfo call(uint64_t seq, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  return CallInfo{seq, timeout};
}

// Every rank builds its Communicator on its own thread and runs `body`; returns what each threw.
inline std::vector<RankOutcome> runGroup(int n, const std::function<void(Communicator&)>& body,
                                         const CommOptions& opts = smallSlotOptions()) {
  MemoryStore store;
  return runRanks(n, [&](int rank) {
    Communicator comm(store, rank, n, opts);
    body(comm);
  });
}

// The same with each rank its own options (a rank whose environment differs from the
// others').
inline std::vector<RankOutcome> runGroupEach(int n, const std::vector<CommOptions>& opts,
                                             const std::function<void(Communicator&)>& body) {
  MemoryStore store;
  return runRanks(n, [&](int rank) {
    Communicator comm(store, rank, n, opts[static_cast<size_t>(rank)]);
    body(comm);
  });
}

// Stores `v` (an exactly representable value) as element i of a buffer of dtype t.
inline void storeElement(DType t, void* buffer, int64_t i, double v) {
  char* at = static_cast<char*>(buffer) + i * static_cast<int64_t>(elementSize(t));
  auto put = [at](auto x) { std::memcpy(at, &x, sizeof x); };
  switch (t) {
    case DType::Float32: put(static_cast<float>(v)); break;
    case DType::Float64: put(v); break;
    case DType::Float16: put(ref::halfBits(static_cast<float>(v))); break;
    case DType::BFloat16: put(ref::bfloat16Bits(static_cast<float>(v))); break;
    case DType::Int8: put(static_cast<int8_t>(v)); break;
    case DType::Int16: put(static_cast<int16_t>(v)); break;
    case DType::Int32: put(static_cast<int32_t>(v)); break;
    case DType::Int64: put(static_cast<int64_t>(v)); break;
    case DType::UInt8: put(static_cast<uint8_t>(v)); break;
    case DType::Bool: put(static_cast<uint8_t>(v != 0)); break;
    // Through int64: a negative value wraps into the unsigned type, as torch's cast does.
    case DType::UInt16: put(static_cast<uint16_t>(static_cast<int64_t>(v))); break;
    case DType::UInt32: put(static_cast<uint32_t>(static_cast<int64_t>(v))); break;
    case DType::UInt64: put(static_cast<uint64_t>(static_cast<int64_t>(v))); break;
    case DType::Float8E4M3: put(ref::float8Bits(static_cast<float>(v), ref::kE4M3)); break;
    case DType::Float8E5M2: put(ref::float8Bits(static_cast<float>(v), ref::kE5M2)); break;
    default: break;
  }
}

inline std::vector<char> buffer(DType t, int64_t count, const std::function<double(int64_t)>& f) {
  std::vector<char> b(static_cast<size_t>(count) * elementSize(t) + 1);  // +1: never empty
  for (int64_t i = 0; i < count; ++i) storeElement(t, b.data(), i, f(i));
  return b;
}

// Index of the first element whose bytes differ from `expected(i)` stored as dtype t, or -1.
inline int64_t firstMismatch(DType t, const void* got, int64_t count,
                             const std::function<double(int64_t)>& expected) {
  const size_t es = elementSize(t);
  char want[8];
  for (int64_t i = 0; i < count; ++i) {
    storeElement(t, want, 0, expected(i));
    if (std::memcmp(static_cast<const char*>(got) + i * static_cast<int64_t>(es), want, es) != 0) {
      return i;
    }
  }
  return -1;
}

// FNV-1a over the bytes: lets ranks compare results without sharing buffers.
inline uint64_t fingerprintBytes(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= static_cast<const unsigned char*>(data)[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace testing_support
}  // namespace ring
