// The CUDA ring kernels themselves (ring_kernels.cuh through the ring_launcher entry points),
// compiled for the host under kernels/host_shim.h and run with threads as ranks and as CUDA
// threads. Each result is compared bit for bit with the CPU executor (Communicator over shared
// memory) given the same inputs in the same run: every collective the kernels cover, every
// dtype, every op, worlds 1-5, channels 1-4, counts {0, 1, n-1, n+1, odd, several times the
// slot ring}, unaligned and rank-skewed buffers, all-gather in place and not. Then the
// failure paths: a mismatch found by the device-side header check (the CPU path's message),
// the host's abort word stopping a spinning kernel, the spin limit with its record, and a
// kernel queued behind an abort exiting at its start. scripts/tsan.sh runs this binary under
// ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "comm_test_support.h"
#include "common/errors.h"
#include "executor/cuda_errors.h"
#include "host_kernel_ring.h"
#include "kernel_case_space.h"
#include "kernels/host_shim.h"
#include "schedule/ring_walk.h"

namespace ring {
namespace {

using namespace testing_support;
using Clock = std::chrono::steady_clock;

// ---- the covering selection of cases ----------------------------------------------------------

constexpr int kMaxWorld = 5;
constexpr int kMaxChannels = 4;

struct KernelCase {
  Collective kind;
  DType dtype;
  RedOp op;
  int world;
  int channels;
  int countIndex;  // into countsFor(world)
  int offset;      // elements past a 256-byte boundary where every buffer of the case starts
  bool skew;       // rank r's buffers start r elements further still (ranks misaligned)
  bool inPlace;    // all_gather: the input is block `rank` of the output
  int root;        // broadcast
};

const int kOffsets[] = {0, 1, 3};

// 0, 1, n-1, n+1, an odd prime, and one that cycles every slot ring many times.
std::vector<int64_t> countsFor(int n) { return {0, 1, n - 1, n + 1, 1009, 6007}; }
constexpr int kCountChoices = 6;

// Three passes over every (collective, dtype, op) the kernels support; each pass gives every
// combination a world, channel count, size, offset and form by rotating through their values
// with different strides, so that every value of every dimension appears (checked below).
std::vector<KernelCase> allCases() {
  const std::vector<std::tuple<Collective, DType, RedOp>> combos = kernelCombinations();
  std::vector<KernelCase> cases;
  int g = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& [k, t, op] : combos) {
      KernelCase c;
      c.kind = k;
      c.dtype = t;
      c.op = op;
      c.world = 1 + g % kMaxWorld;
      c.channels = 1 + (g / kMaxWorld + pass) % kMaxChannels;
      c.countIndex = (g * 5 + pass) % kCountChoices;
      c.offset = kOffsets[(g / 2) % 3];
      c.skew = g % 7 == 3;
      c.inPlace = k == Collective::AllGather && (g / 3) % 2 == 1;
      c.root = (g / kMaxWorld + pass) % c.world;
      cases.push_back(c);
      ++g;
    }
  }
  return cases;
}

std::string describeCase(const KernelCase& c, int64_t count) {
  return strCat(collectiveName(c.kind), " ", dtypeName(c.dtype), " op ", redOpName(c.op),
                " world ", c.world, " channels ", c.channels, " count ", count, " offset ",
                c.offset, c.skew ? " skewed" : "", c.inPlace ? " in place" : "", " root ",
                c.root);
}


TEST(HostKernelCases, TheSelectionCoversEveryValueOfEveryDimension) {
  std::set<std::tuple<int, int, int>> combos;
  std::set<int> kinds, dtypes, ops, worlds, channels, countIdx, offsets, skews, inPlace, roots;
  std::set<int> wrapsFor;  // collectives with a case whose FIFO wraps at least twice
  for (const KernelCase& c : allCases()) {
    combos.insert({static_cast<int>(c.kind), static_cast<int>(c.dtype), static_cast<int>(c.op)});
    kinds.insert(static_cast<int>(c.kind));
    dtypes.insert(static_cast<int>(c.dtype));
    ops.insert(static_cast<int>(c.op));
    worlds.insert(c.world);
    channels.insert(c.channels);
    countIdx.insert(c.countIndex);
    offsets.insert(c.offset);
    skews.insert(c.skew);
    if (c.kind == Collective::AllGather) inPlace.insert(c.inPlace);
    if (c.kind == Collective::Broadcast) roots.insert(c.root);
    const FifoGeometry g = geometryFor(c.channels);
    const int64_t count = countsFor(c.world)[c.countIndex];
    WalkShape w{c.kind, c.world, 0, c.root, count, c.channels, 0,
                fifoMessageCapacity(g) / static_cast<int64_t>(elementSize(c.dtype))};
    int64_t sends = 0, receives = 0;
    walkMessages(w, &sends, &receives);
    if (sends > 2 * g.slots) wrapsFor.insert(static_cast<int>(c.kind));
  }
  int reducingPairs = 0;
  for (DType t : kDTypes) {
    for (RedOp op : kOps) reducingPairs += opSupported(t, op) ? 1 : 0;
  }
  EXPECT_EQ(combos.size(), static_cast<size_t>(2 * reducingPairs + 2 * 15));
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_EQ(dtypes.size(), 15u);
  EXPECT_EQ(ops.size(), 9u);
  EXPECT_EQ(worlds, (std::set<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(channels, (std::set<int>{1, 2, 3, 4}));
  EXPECT_EQ(countIdx.size(), static_cast<size_t>(kCountChoices));
  EXPECT_EQ(offsets.size(), 3u);
  EXPECT_EQ(skews.size(), 2u);
  EXPECT_EQ(inPlace.size(), 2u);
  EXPECT_EQ(roots.size(), static_cast<size_t>(kMaxWorld));
  EXPECT_EQ(wrapsFor.size(), 4u) << "every collective needs a case whose slots wrap";
}

// ---- inputs ---------------------------------------------------------------------------------------

// Element i of rank r's input for case number `id`: full-width integers, floats with many
// mantissa bits (so that sums round), values near one for PRODUCT (no overflow to inf).
void fillInput(DType t, RedOp op, char* data, int64_t count, uint64_t id, int rank) {
  const size_t es = elementSize(t);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t h = mix(id * 1000003u + static_cast<uint64_t>(rank) * 7919u +
                           static_cast<uint64_t>(i));
    char* at = data + i * static_cast<int64_t>(es);
    double v = (static_cast<double>(h % 200001) - 100000.0) / 1024.0;
    if (op == RedOp::Product) v = 1.0 + (static_cast<double>(h % 201) - 100.0) / 997.0;
    switch (t) {
      case DType::Float32: {
        const float f = static_cast<float>(v);
        std::memcpy(at, &f, 4);
        break;
      }
      case DType::Float64:
        std::memcpy(at, &v, 8);
        break;
      case DType::Float16: {
        const uint16_t b = ref::halfBits(static_cast<float>(v));
        std::memcpy(at, &b, 2);
        break;
      }
      case DType::BFloat16: {
        const uint16_t b = ref::bfloat16Bits(static_cast<float>(v));
        std::memcpy(at, &b, 2);
        break;
      }
      case DType::Float8E4M3:
        *at = static_cast<char>(ref::float8Bits(static_cast<float>(v), ref::kE4M3));
        break;
      case DType::Float8E5M2:
        *at = static_cast<char>(ref::float8Bits(static_cast<float>(v), ref::kE5M2));
        break;
      case DType::Bool:
        *at = static_cast<char>(h & 1);
        break;
      default:  // integers: any bit pattern (sums and products wrap, as torch's do)
        std::memcpy(at, &h, es);
        break;
    }
  }
}

// Bytes with room for `elements` starting `offset` elements past a 256-byte boundary.
struct Buffer {
  std::vector<char> storage;
  char* data = nullptr;
  Buffer(int64_t elements, size_t es, int offset) {
    storage.resize(static_cast<size_t>(elements + offset) * es + 512, '\x5a');
    const uintptr_t base = reinterpret_cast<uintptr_t>(storage.data());
    const uintptr_t aligned = (base + 255) & ~uintptr_t{255};
    data = reinterpret_cast<char*>(aligned) + static_cast<size_t>(offset) * es;
  }
};

// ---- running one case on one rank, both ways -------------------------------------------------

// What one rank ends with after one case, through the kernels and through the CPU executor.
struct RankResult {
  std::vector<char> kernelOut, cpuOut;  // the output bytes (the whole output)
  bool inputUntouched = true;           // reduce-scatter's input (kernel path)
  std::string kernelError;              // launch error or the device's stop
};

RingWaitLimits testLimits() { return RingWaitLimits{20ull * 1000 * 1000 * 1000}; }

RankResult runCase(const KernelCase& c, uint64_t id, uint64_t seq, int rank, HostKernelRing& ring,
                   Communicator& comm) {
  const int n = c.world;
  const int64_t count = countsFor(n)[c.countIndex];
  const size_t es = elementSize(c.dtype);
  const int offset = c.offset + (c.skew ? rank : 0);
  const double factor = c.op == RedOp::PreMulSum ? kPreMulFactor : 1.0;
  const RedOp fpOp = reduces(c.kind) ? c.op : RedOp::Sum;
  const int root = c.kind == Collective::Broadcast ? c.root : -1;
  const Fingerprint fp = makeFingerprint(c.kind, seq, count, c.dtype, fpOp, root);
  const CallInfo info = call(seq);
  RankResult out;

  // input elements, output elements
  int64_t inElems = count, outElems = count;
  if (c.kind == Collective::ReduceScatter) inElems = count * n;
  if (c.kind == Collective::AllGather) outElems = count * n;
  std::vector<char> input(static_cast<size_t>(inElems) * es + 1);
  fillInput(c.dtype, c.op, input.data(), inElems, id, rank);

  for (int path = 0; path < 2; ++path) {
    const bool kernel = path == 0;
    Buffer inBuf(inElems, es, offset), outBuf(outElems, es, offset);
    char* in = inBuf.data;
    char* outPtr = outBuf.data;
    if (c.kind == Collective::AllReduce || c.kind == Collective::Broadcast) {
      in = outPtr;  // in place
    } else if (c.kind == Collective::AllGather && c.inPlace) {
      in = outPtr + static_cast<int64_t>(rank) * count * static_cast<int64_t>(es);
    }
    std::memcpy(in, input.data(), static_cast<size_t>(inElems) * es);
    std::string error;
    if (kernel) {
      const RingCudaPeers peers = ring.peers(rank);
      ChannelCounters* counters = ring.counters(rank);
      switch (c.kind) {
        case Collective::AllReduce:
          error = launchAllReduce(peers, counters, outPtr, count, c.dtype, c.op, factor, fp,
                                  testLimits(), nullptr);
          break;
        case Collective::ReduceScatter:
          error = launchReduceScatter(peers, counters, in, outPtr, count, c.dtype, c.op, factor,
                                      fp, testLimits(), nullptr);
          break;
        case Collective::AllGather:
          error = launchAllGather(peers, counters, in, outPtr, count, c.dtype, fp, testLimits(),
                                  nullptr);
          break;
        default:
          error = launchBroadcast(peers, counters, outPtr, count, c.dtype, c.root, fp,
                                  testLimits(), nullptr);
          break;
      }
      if (error.empty()) error = explainDeviceStop(readErrorRecord(ring.control(rank)), rank);
      out.kernelError = error;
      if (c.kind == Collective::ReduceScatter) {
        out.inputUntouched =
            std::memcmp(in, input.data(), static_cast<size_t>(inElems) * es) == 0;
      }
    } else {
      switch (c.kind) {
        case Collective::AllReduce:
          runAllReduce(comm, outPtr, count, c.dtype, c.op, factor, info);
          break;
        case Collective::ReduceScatter:
          runReduceScatter(comm, in, outPtr, count, c.dtype, c.op, factor, info);
          break;
        case Collective::AllGather:
          runAllGather(comm, in, outPtr, count, c.dtype, info);
          break;
        default:
          runBroadcast(comm, outPtr, count, c.dtype, c.root, info);
          break;
      }
    }
    std::vector<char>& dest = kernel ? out.kernelOut : out.cpuOut;
    dest.assign(outPtr, outPtr + static_cast<size_t>(outElems) * es);
  }
  return out;
}

// ---- every case of one (world, channels) --------------------------------------------------------

class HostKernels : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(HostKernels, MatchTheCpuExecutorBitForBit) {
  const int world = std::get<0>(GetParam());
  const int channels = std::get<1>(GetParam());
  // An odd block size here and there: the kernels stride by blockDim.x, whatever it is.
  hostshim::setBlockThreads((world + channels) % 3 == 0 ? 5 : 8);
  std::vector<std::pair<uint64_t, KernelCase>> mine;
  const std::vector<KernelCase> cases = allCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].world == world && cases[i].channels == channels) mine.emplace_back(i, cases[i]);
  }
  ASSERT_FALSE(mine.empty());

  HostKernelRing ring(world, geometryFor(channels));
  MemoryStore store;
  std::vector<std::vector<RankResult>> results(static_cast<size_t>(world));
  auto outcomes = runRanks(world, [&](int rank) {
    Communicator comm(store, rank, world, smallSlotOptions());
    for (size_t k = 0; k < mine.size(); ++k) {
      results[rank].push_back(runCase(mine[k].second, mine[k].first, k, rank, ring, comm));
    }
  });
  for (int r = 0; r < world; ++r) ASSERT_TRUE(outcomes[r].ok()) << "rank " << r << ": " << outcomes[r].message();

  for (size_t k = 0; k < mine.size(); ++k) {
    const KernelCase& c = mine[k].second;
    const std::string what = describeCase(c, countsFor(world)[c.countIndex]);
    for (int r = 0; r < world; ++r) {
      const RankResult& res = results[r][k];
      EXPECT_EQ(res.kernelError, "") << what << ", rank " << r;
      EXPECT_TRUE(res.inputUntouched) << what << ", rank " << r << ": the kernel wrote its input";
      ASSERT_EQ(res.kernelOut.size(), res.cpuOut.size()) << what;
      const size_t es = elementSize(c.dtype);
      for (size_t b = 0; b < res.kernelOut.size(); ++b) {
        if (res.kernelOut[b] != res.cpuOut[b]) {
          ADD_FAILURE() << what << ", rank " << r << ": element " << b / es
                        << " differs from the CPU executor's";
          break;
        }
      }
      // The collectives that end with one result everywhere end with the same bits everywhere.
      if (c.kind != Collective::ReduceScatter && r > 0) {
        EXPECT_EQ(res.kernelOut, results[0][k].kernelOut) << what << ": rank " << r << " vs rank 0";
      }
    }
  }
  // Each kernel leaves the counters in its inbox exactly where the host's running counts say:
  // every message received, every sent message consumed (the drain at the end of each kernel).
  for (int r = 0; r < world; ++r) {
    for (int ch = 0; ch < channels; ++ch) {
      EXPECT_EQ(ring.published(r, ch), ring.counters(r)->received[ch]) << "rank " << r << " channel " << ch;
      EXPECT_EQ(ring.consumed(r, ch), ring.counters(r)->sent[ch]) << "rank " << r << " channel " << ch;
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return strCat("world", std::get<0>(info.param), "_channels", std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(WorldsAndChannels, HostKernels,
                         ::testing::Combine(::testing::Range(1, kMaxWorld + 1),
                                            ::testing::Range(1, kMaxChannels + 1)),
                         paramName);

// ---- failures -------------------------------------------------------------------------------------

Fingerprint allReduceOf(uint64_t seq, int64_t count) {
  return makeFingerprint(Collective::AllReduce, seq, count, DType::Float32, RedOp::Sum, -1);
}

// Ranks disagree on the size of an all_reduce: the receiving rank's header check stops its kernel,
// and the record reads exactly as the CPU executor's error for the same two calls.
TEST(HostKernelFailures, AMismatchReadsAsTheCpuPathsMessage) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "world " << n);
    auto countOf = [](int rank) -> int64_t { return rank == 1 ? 100 : 200; };
    const uint64_t seq = 5;

    HostKernelRing ring(n, geometryFor(2));
    std::vector<std::string> kernelText(static_cast<size_t>(n));
    runRanks(n, [&](int rank) {
      std::vector<float> data(static_cast<size_t>(countOf(rank)), 1.0f);
      const std::string e = launchAllReduce(ring.peers(rank), ring.counters(rank), data.data(),
                                            countOf(rank), DType::Float32, RedOp::Sum, 1.0,
                                            allReduceOf(seq, countOf(rank)),
                                            RingWaitLimits{2ull * 1000 * 1000 * 1000}, nullptr);
      kernelText[rank] = e.empty() ? explainDeviceStop(readErrorRecord(ring.control(rank)), rank) : e;
    });
    // Rank 1 receives rank 0's first message: its own header check must have caught it.
    const DeviceErrorRecord r1 = readErrorRecord(ring.control(1));
    EXPECT_EQ(r1.status, kDeviceMismatch);
    EXPECT_EQ(r1.peer, 0);
    const std::string expected = strCat(
        "ring: collective mismatch: rank 0 called ", describe(allReduceOf(seq, 200)), ", rank 1 called ",
        describe(allReduceOf(seq, 100)));
    EXPECT_EQ(kernelText[1].rfind(expected, 0), 0u) << kernelText[1];

    // The CPU executor, given the same two calls, says the same thing on rank 1.
    MemoryStore store;
    std::vector<std::string> cpuText(static_cast<size_t>(n));
    runRanks(n, [&](int rank) {
      Communicator comm(store, rank, n, smallSlotOptions());
      std::vector<float> data(static_cast<size_t>(countOf(rank)), 1.0f);
      try {
        runAllReduce(comm, data.data(), countOf(rank), DType::Float32, RedOp::Sum, 1.0,
                       call(seq, std::chrono::seconds(5)));
      } catch (const CommError& e) {
        cpuText[rank] = e.what();
      }
    });
    // Whichever rank the CPU path heard it from first, its reason is, word for word, what the
    // kernel of that same receiving rank recorded.
    int reasons = 0;
    for (int r = 0; r < n; ++r) {
      const size_t at = cpuText[r].find("ring: collective mismatch:");
      ASSERT_NE(at, std::string::npos) << "cpu rank " << r << ": " << cpuText[r];
      const std::string reason = cpuText[r].substr(at);
      bool same = false;
      for (const std::string& k : kernelText) same = same || k == reason;
      EXPECT_TRUE(same) << "cpu rank " << r << ": " << reason;
      reasons += same ? 1 : 0;
    }
    EXPECT_EQ(reasons, n);
  }
}

// One rank launches, its peer never does: the kernel spins on the first message it needs until
// the host raises the abort word, then stops with a record naming that wait.
TEST(HostKernelFailures, TheAbortWordStopsASpinningKernel) {
  for (int channels : {1, 4}) {
    HostKernelRing ring(2, geometryFor(channels));
    std::vector<float> data(4096, 1.0f);
    const auto start = Clock::now();
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raiseAbort(ring.control(0));
    });
    const std::string e = launchAllReduce(ring.peers(0), ring.counters(0), data.data(), 4096,
                                          DType::Float32, RedOp::Sum, 1.0, allReduceOf(0, 4096),
                                          RingWaitLimits{60ull * 1000 * 1000 * 1000}, nullptr);
    aborter.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_EQ(e, "");
    EXPECT_GE(seconds, 0.3);
    EXPECT_LT(seconds, 10.0) << "the kernel did not see the abort word";
    const DeviceErrorRecord r = readErrorRecord(ring.control(0));
    EXPECT_EQ(r.status, kDeviceAborted);
    EXPECT_EQ(r.wait, kWaitMessage);
    EXPECT_EQ(r.peer, 1);
    const std::string text = explainDeviceStop(r, 0);
    EXPECT_NE(text.find("while waiting for message 0 from rank 1"), std::string::npos) << text;
    EXPECT_NE(text.find("the group was aborted"), std::string::npos) << text;
  }
}

// No host watchdog at all: the kernel's own spin limit ends the wait and says where it was.
TEST(HostKernelFailures, TheSpinLimitFiresWithItsRecord) {
  HostKernelRing ring(3, geometryFor(3));
  std::vector<float> data(3000, 1.0f);
  const uint64_t limitNs = 400ull * 1000 * 1000;
  const auto start = Clock::now();
  const std::string e = launchAllReduce(ring.peers(1), ring.counters(1), data.data(), 3000,
                                        DType::Float32, RedOp::Sum, 1.0, allReduceOf(9, 3000),
                                        RingWaitLimits{limitNs}, nullptr);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(e, "");
  EXPECT_GE(seconds, 0.4);
  EXPECT_LT(seconds, 10.0);
  const DeviceErrorRecord r = readErrorRecord(ring.control(1));
  EXPECT_EQ(r.status, kDeviceSpinLimit);
  EXPECT_EQ(r.wait, kWaitMessage);
  EXPECT_EQ(r.peer, 0);
  EXPECT_EQ(r.counterSeen, 0u);
  EXPECT_EQ(r.counterTarget, 1u);
  EXPECT_EQ(r.expected, allReduceOf(9, 3000));
  // The block that stopped first raised the abort word, so every other channel stopped too.
  EXPECT_TRUE(abortRaised(ring.control(1)));
  const std::string text = explainDeviceStop(r, 1);
  EXPECT_NE(text.find("after the kernel's spin limit, waiting for message 0 from rank 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(counter at 0, needed 1)"), std::string::npos) << text;
}

// A kernel launched after the abort word went up must not touch its peers: the FIFO counters
// are out of step once any kernel stopped.
TEST(HostKernelFailures, AKernelQueuedBehindAnAbortExitsAtItsStart) {
  HostKernelRing ring(2, geometryFor(4));
  raiseAbort(ring.control(0));
  std::vector<float> data(5000, 2.0f);
  const std::vector<float> before = data;
  const std::string e = launchAllReduce(ring.peers(0), ring.counters(0), data.data(), 5000,
                                        DType::Float32, RedOp::Sum, 1.0, allReduceOf(0, 5000),
                                        RingWaitLimits{60ull * 1000 * 1000 * 1000}, nullptr);
  EXPECT_EQ(e, "");
  const DeviceErrorRecord r = readErrorRecord(ring.control(0));
  EXPECT_EQ(r.status, kDeviceAborted);
  EXPECT_EQ(r.wait, kWaitNone);
  EXPECT_EQ(data, before);
  // Not one byte written into the peer's inbox: no payload, no header, no counter.
  const int64_t bytes = fifoInboxBytes(ring.geometry());
  const char* peer = ring.inbox(1);
  EXPECT_EQ(std::count(peer, peer + bytes, 0), bytes);
  EXPECT_NE(explainDeviceStop(r, 0).find("while waiting for its start"), std::string::npos)
      << explainDeviceStop(r, 0);
}

}  // namespace
}  // namespace ring
