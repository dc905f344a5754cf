// Host-side logic of the CUDA path, tested without a GPU: the handle structs are plain bytes,
// the inbox layout has no overlaps and keeps its alignment promises, the per-link path choice
// declines cleanly in every case it must, peer records survive the store, device error records
// read as the CPU path's messages, and the launcher refuses bad handles before touching CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/errors.h"
#include "executor/cuda_errors.h"
#include "kernels/fifo_layout.h"
#include "kernels/ring_launcher.h"
#include "transport/cuda_ipc/peer_info.h"

namespace ring {
namespace {

TEST(CudaHost, HandlesArePlainBytes) {
  EXPECT_TRUE(std::is_trivially_copyable<RingCudaPeers>::value);
  EXPECT_TRUE(std::is_trivially_copyable<ChannelCounters>::value);
  EXPECT_TRUE(std::is_trivially_copyable<FifoGeometry>::value);
  EXPECT_TRUE(std::is_trivially_copyable<DeviceErrorRecord>::value);
  EXPECT_TRUE(std::is_trivially_copyable<HostMappedControl>::value);
  EXPECT_TRUE(std::is_trivially_copyable<CudaPeerInfo>::value);
  EXPECT_EQ(sizeof(MessageHeader), 64u);
  // The polled abort word and the record the device writes never share a 128-byte line.
  EXPECT_GE(offsetof(HostMappedControl, record), 128u);
}

std::vector<FifoGeometry> geometries() {
  return {{1, 2, 256}, {3, 4, 1024}, {8, 8, 128 * 1024}, {16, 8, 128 * 1024}, {32, 64, 1 << 20}};
}

TEST(CudaHost, GeometryValidity) {
  for (const FifoGeometry& g : geometries()) EXPECT_TRUE(fifoGeometryValid(g));
  EXPECT_FALSE(fifoGeometryValid({0, 8, 1024}));
  EXPECT_FALSE(fifoGeometryValid({kMaxCudaChannels + 1, 8, 1024}));
  EXPECT_FALSE(fifoGeometryValid({4, 1, 1024}));     // one slot could deadlock
  EXPECT_FALSE(fifoGeometryValid({4, 8, 1000}));     // not a multiple of 256
  EXPECT_FALSE(fifoGeometryValid({4, 8, 128}));
}

// Every region of the inbox: the claim line, 2C counter lines, C*S headers, C*S payloads.
TEST(CudaHost, InboxLayoutHasNoOverlapAndKeepsAlignment) {
  for (const FifoGeometry& g : geometries()) {
    SCOPED_TRACE(testing::Message() << g.channels << "x" << g.slots << "x" << g.slotBytes);
    std::vector<std::pair<int64_t, int64_t>> regions;  // [begin, end)
    regions.push_back({fifoClaimOffset(), fifoClaimOffset() + kFifoLineBytes});
    std::set<int64_t> lines;
    for (int c = 0; c < g.channels; ++c) {
      for (int64_t off : {fifoPublishedOffset(g, c), fifoConsumedOffset(g, c)}) {
        EXPECT_EQ(off % kFifoLineBytes, 0);
        EXPECT_TRUE(lines.insert(off / kFifoLineBytes).second) << "counter line shared";
        regions.push_back({off, off + kFifoLineBytes});
      }
      for (int s = 0; s < g.slots; ++s) {
        const int64_t h = fifoHeaderOffset(g, c, s);
        const int64_t p = fifoPayloadOffset(g, c, s);
        EXPECT_EQ(h % kFifoHeaderBytes, 0);
        EXPECT_EQ(p % kFifoPayloadAlign, 0);
        regions.push_back({h, h + kFifoHeaderBytes});
        regions.push_back({p, p + g.slotBytes});
      }
    }
    std::sort(regions.begin(), regions.end());
    for (size_t i = 0; i < regions.size(); ++i) {
      EXPECT_GE(regions[i].first, 0);
      EXPECT_LE(regions[i].second, fifoInboxBytes(g));
      if (i > 0) {
        EXPECT_LE(regions[i - 1].second, regions[i].first) << "regions overlap";
      }
    }
    // Nothing wasted beyond alignment padding.
    int64_t used = 0;
    for (auto& r : regions) used += r.second - r.first;
    EXPECT_LE(fifoInboxBytes(g) - used, 2 * kFifoPayloadAlign);
  }
}

TEST(CudaHost, MessagesCycleThroughSlots) {
  for (int slots : {2, 3, 8}) {
    for (uint64_t m = 0; m < 100; ++m) {
      EXPECT_EQ(fifoSlotOf(m, slots), static_cast<int>(m % slots));
    }
    // Counters are monotonic over the communicator's life: far past 2^32 still cycles.
    const uint64_t big = (uint64_t{1} << 40) + 5;
    EXPECT_EQ(fifoSlotOf(big, slots), static_cast<int>(big % slots));
  }
}

// ---- per-link path choice --------------------------------------------------------------------------

CudaPeerInfo info(uint64_t token, int pid, int device, uint8_t gpu) {
  CudaPeerInfo i;
  std::memset(&i, 0, sizeof i);
  i.version = kCudaPeerInfoVersion;
  i.enabled = 1;
  i.ready = 1;
  i.exported = 1;
  i.pid = pid;
  i.processToken = token;
  i.device = device;
  std::memset(i.uuid, gpu, sizeof i.uuid);
  i.geometry = {8, 8, 131072};
  return i;
}

TEST(CudaHost, PathChoice) {
  const std::string host = "h|boot|ns";
  const CudaPeerInfo me = info(1, 100, 0, 0xaa);

  // Threads of one process on one GPU: a direct pointer (IPC to oneself would fail).
  PathChoice c = choosePeerPath(host, me, host, info(1, 100, 0, 0xaa), -1, false);
  EXPECT_EQ(c.path, PeerPath::Direct);
  EXPECT_FALSE(c.needsPeerAccess);
  // Threads of one process on two GPUs with peer access: direct, after enabling access.
  c = choosePeerPath(host, me, host, info(1, 100, 1, 0xbb), 1, true);
  EXPECT_EQ(c.path, PeerPath::Direct);
  EXPECT_TRUE(c.needsPeerAccess);
  // Two processes on ONE GPU: IPC, no peer access needed (canAccessPeer is not consulted).
  c = choosePeerPath(host, me, host, info(2, 101, 0, 0xaa), -1, false);
  EXPECT_EQ(c.path, PeerPath::Ipc);
  // Two processes, two GPUs with peer access: IPC.
  c = choosePeerPath(host, me, host, info(2, 101, 1, 0xbb), 1, true);
  EXPECT_EQ(c.path, PeerPath::Ipc);

  auto declined = [&](const CudaPeerInfo& mine, const std::string& theirHost,
                      const CudaPeerInfo& theirs, int ordinal, bool access, const char* needle) {
    PathChoice d = choosePeerPath(host, mine, theirHost, theirs, ordinal, access);
    EXPECT_EQ(d.path, PeerPath::Declined) << needle;
    EXPECT_NE(d.reason.find(needle), std::string::npos) << d.reason;
  };
  declined(me, "other|boot|ns", info(2, 101, 0, 0xaa), -1, false, "different hosts");
  declined(me, host, info(2, 101, 1, 0xbb), 1, false, "no peer access");
  // Another process on a GPU this one cannot see (CUDA_VISIBLE_DEVICES): IPC all the same
  // (cudaIpcOpenMemHandle maps memory of other devices; a failed open declines the link)...
  c = choosePeerPath(host, me, host, info(2, 101, 1, 0xbb), -1, false);
  EXPECT_EQ(c.path, PeerPath::Ipc);
  EXPECT_FALSE(c.needsPeerAccess);
  // ... while a thread of this process could only use a GPU it sees.
  declined(me, host, info(1, 100, 1, 0xbb), -1, false, "not visible");
  CudaPeerInfo off = info(2, 101, 0, 0xaa);
  off.enabled = 0;
  declined(me, host, off, -1, false, "TORCH_RING_CUDA_KERNELS=0");
  CudaPeerInfo notReady = info(2, 101, 0, 0xaa);
  notReady.ready = 0;
  std::strcpy(notReady.problem, "cudaMalloc failed: out of memory");
  declined(me, host, notReady, -1, false, "out of memory");
  CudaPeerInfo noIpc = info(2, 101, 0, 0xaa);
  noIpc.exported = 0;
  std::strcpy(noIpc.problem, "cudaIpcGetMemHandle failed: operation not supported");
  declined(me, host, noIpc, -1, false, "operation not supported");
  // ... but a thread of the same process does not need the export.
  CudaPeerInfo sameProcessNoIpc = info(1, 100, 0, 0xaa);
  sameProcessNoIpc.exported = 0;
  EXPECT_EQ(choosePeerPath(host, me, host, sameProcessNoIpc, -1, false).path, PeerPath::Direct);
  CudaPeerInfo otherGeometry = info(2, 101, 0, 0xaa);
  otherGeometry.geometry.slots = 4;
  declined(me, host, otherGeometry, -1, false, "geometry differs");
  // A forked child inherits the token but not the pid: not the same process.
  c = choosePeerPath(host, me, host, info(1, 102, 0, 0xaa), -1, false);
  EXPECT_EQ(c.path, PeerPath::Ipc);
}

// Ranks whose kernels run at the same time: threads of one process on one GPU. Other
// processes time-slice the GPU; ranks on other GPUs use other SMs.
TEST(CudaHost, RanksSharingAGpuInOneProcessAreCounted) {
  const CudaPeerInfo me = info(1, 100, 0, 0xaa);
  std::vector<CudaPeerInfo> all = {me, info(1, 100, 0, 0xaa), info(1, 100, 1, 0xbb),
                                   info(2, 101, 0, 0xaa), info(1, 102, 0, 0xaa)};
  EXPECT_EQ(ranksSharingGpuInProcess(all, me), 2);
  all[1].ready = 0;  // a rank without an inbox runs no kernel
  EXPECT_EQ(ranksSharingGpuInProcess(all, me), 1);
  EXPECT_EQ(ranksSharingGpuInProcess({me}, me), 1);
}

TEST(CudaHost, CoResidencyIsRefusedWithTheNumbers) {
  // H200: 132 SMs; one 512-thread ring-kernel block per SM, say.
  EXPECT_EQ(coResidencyProblem(1, 32, 132, 1), "");
  EXPECT_EQ(coResidencyProblem(4, 32, 132, 1), "");      // 128 blocks
  EXPECT_EQ(coResidencyProblem(8, 16, 132, 1), "");      // exactly 128
  const std::string text = coResidencyProblem(8, 32, 132, 1);  // 256 > 132
  EXPECT_NE(text.find("8 ranks of this process share one GPU"), std::string::npos) << text;
  EXPECT_NE(text.find("256 blocks must be resident at once, but the GPU holds 132"),
            std::string::npos) << text;
  EXPECT_NE(text.find("TORCH_RING_CUDA_CHANNELS to at most 16"), std::string::npos) << text;
  // A kernel the GPU cannot hold at all (0 blocks per SM) is refused too.
  EXPECT_NE(coResidencyProblem(1, 1, 132, 0), "");
}

TEST(CudaHost, PeerInfoSurvivesTheStore) {
  CudaPeerInfo a = info(0x1234567890abcdefULL, 4242, 3, 0x5c);
  for (int i = 0; i < 64; ++i) a.ipcHandle[i] = static_cast<uint8_t>(i * 7);
  a.inboxAddress = 0x7f0000001000ULL;
  std::strcpy(a.problem, "nothing");
  const std::string value = encodePeerInfo("host|boot|4026531839/4026531836", a);
  std::string host;
  CudaPeerInfo b;
  decodePeerInfo(value, &host, &b);
  EXPECT_EQ(host, "host|boot|4026531839/4026531836");
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);

  EXPECT_THROW(decodePeerInfo("host\n00ff", &host, &b), CommError);
  EXPECT_THROW(decodePeerInfo("no newline", &host, &b), CommError);
  std::string bad = value;
  bad[bad.size() - 1] = 'z';
  EXPECT_THROW(decodePeerInfo(bad, &host, &b), CommError);
  CudaPeerInfo future = a;
  future.version = kCudaPeerInfoVersion + 1;
  EXPECT_THROW(decodePeerInfo(encodePeerInfo("h", future), &host, &b), CommError);
}

// ---- device error records ------------------------------------------------------------------------

Fingerprint allReduceFp(uint64_t seq, int64_t count) {
  Fingerprint f;
  f.seq = seq;
  f.count = count;
  f.collective = Collective::AllReduce;
  f.dtype = DType::Float32;
  f.op = RedOp::Sum;
  return f;
}

TEST(CudaHost, DeviceMismatchReadsLikeTheCpuPath) {
  DeviceErrorRecord r{};
  r.status = kDeviceMismatch;
  r.wait = kWaitMessage;
  r.peer = 0;
  r.expectedStep = 0;
  r.expectedBytes = 400;
  r.expected = allReduceFp(7, 100);
  r.got.magic = kMessageMagic;
  r.got.sender = 0;
  r.got.step = 0;
  r.got.payloadBytes = 800;
  r.got.fingerprint = allReduceFp(7, 200);
  const std::string text = explainDeviceStop(r, 1);
  EXPECT_NE(text.find("collective mismatch"), std::string::npos) << text;
  EXPECT_NE(text.find("all_reduce of 200 float32"), std::string::npos) << text;
  EXPECT_NE(text.find("all_reduce of 100 float32"), std::string::npos) << text;

  r.got.magic = 0;
  EXPECT_NE(explainDeviceStop(r, 1).find("corrupt"), std::string::npos);
}

TEST(CudaHost, DeviceStopsNameTheWait) {
  DeviceErrorRecord r{};
  EXPECT_EQ(explainDeviceStop(r, 0), "");
  r.expected = allReduceFp(3, 10);
  r.status = kDeviceAborted;
  r.wait = kWaitMessage;
  r.peer = 2;
  r.channel = 5;
  r.expectedStep = 9;
  std::string text = explainDeviceStop(r, 3);
  EXPECT_NE(text.find("message 9 from rank 2 on channel 5"), std::string::npos) << text;
  EXPECT_NE(text.find("aborted"), std::string::npos) << text;
  r.status = kDeviceSpinLimit;
  r.wait = kWaitSlot;
  r.counterSeen = 4;
  r.counterTarget = 5;
  text = explainDeviceStop(r, 3);
  EXPECT_NE(text.find("free slot at rank 2"), std::string::npos) << text;
  EXPECT_NE(text.find("counter at 4, needed 5"), std::string::npos) << text;
}

// ---- the launcher refuses bad handles before any CUDA call -----------------------------------------

TEST(CudaHost, LauncherRefusesBadHandlesWithoutTouchingCuda) {
  RingCudaPeers peers;
  std::memset(&peers, 0, sizeof peers);
  peers.geometry = {8, 8, 1000};  // not a multiple of 256
  peers.nranks = 2;
  ChannelCounters counters;
  std::memset(&counters, 0, sizeof counters);
  const Fingerprint fp = allReduceFp(0, 4);
  const RingWaitLimits limits{1000000000ULL};
  std::string e = launchAllReduce(peers, &counters, nullptr, 4, DType::Float32, RedOp::Sum, 1.0,
                                  fp, limits, nullptr);
  EXPECT_NE(e.find("invalid FIFO geometry"), std::string::npos) << e;
  peers.geometry = {8, 8, 1024};
  e = launchAllReduce(peers, &counters, nullptr, 4, DType::Float32, RedOp::Sum, 1.0, fp, limits,
                      nullptr);
  EXPECT_NE(e.find("not set up"), std::string::npos) << e;
  e = launchBroadcast(peers, &counters, nullptr, 4, DType::Float32, 5, fp, limits, nullptr);
  EXPECT_FALSE(e.empty());
  // A group of one with nothing to scale or divide: no kernel, no CUDA call, no error.
  peers.nranks = 1;
  EXPECT_EQ(launchAllReduce(peers, &counters, nullptr, 0, DType::Float32, RedOp::Sum, 1.0, fp,
                            limits, nullptr),
            "");
  EXPECT_EQ(launchBroadcast(peers, &counters, nullptr, 4, DType::Float32, 0, fp, limits, nullptr),
            "");
  for (int c = 0; c < kMaxCudaChannels; ++c) {
    EXPECT_EQ(counters.sent[c], 0u);
    EXPECT_EQ(counters.received[c], 0u);
  }
}

}  // namespace
}  // namespace ring
