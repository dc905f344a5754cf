// Single-copy messages (transport/link.h, SendLink::lendsFrom; shm/peer_memory.h), threads as
// ranks (process_vm_readv of one's own process is always allowed): the reader's contract as
// process_vm_readv(2) documents it, the links' set-up, the ring collectives on the lent path
// against closed forms and bit for bit against the slot path, the sender's wait for its
// reader, and the refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm_test_support.h"
#include "made_up_hosts.h"
#include "common/errors.h"
#include "executor/cpu_executor.h"
#include "memory_store.h"
#include "rank_threads.h"
#include "schedule/partition.h"
#include "transport/shm/peer_memory.h"
#include "transport/shm/shm_transport.h"
#include "transport/stamped_link.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::call;
using testing_support::MemoryStore;
using testing_support::runGroup;
using testing_support::runRanks;
using testing_support::smallSlotOptions;
using testing_support::runAllGather;
using testing_support::runAllReduce;
using testing_support::runBroadcast;
using testing_support::runReduceScatter;

// Why a test may skip: qemu-user, which runs the aarch64 build's tests here, answers
// process_vm_readv with ENOSYS. There a rank reads no peer, lends nothing and is lent nothing
// (TheProbesAnswerDecidesEveryLink checks that); the tests of the lent path itself need a
// kernel that reads.
std::string whyNoReader() { return probePeerMemory(getpid(), peerProbeAddress()); }
#define SKIP_WITHOUT_A_READER()                                                        \
  do {                                                                                 \
    const std::string why = whyNoReader();                                             \
    if (!why.empty()) GTEST_SKIP() << "this process cannot read its own memory: " << why; \
  } while (0)

// ---- the reader ------------------------------------------------------------------------------

TEST(PeerMemory, ReadsWhatTheProcessHoldsAcrossPages) {
  SKIP_WITHOUT_A_READER();
  std::vector<char> from(3 * 4096 + 123), to(from.size());
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<char>(i * 7 + 1);
  ASSERT_EQ(readPeerMemory(getpid(), reinterpret_cast<uintptr_t>(from.data()), to.data(),
                           static_cast<int64_t>(to.size())),
            0);
  EXPECT_EQ(from, to);
}

// process_vm_readv(2): ESRCH where no process has the pid, EFAULT where the remote range is not
// mapped.
TEST(PeerMemory, SaysWhyItCannotRead) {
  SKIP_WITHOUT_A_READER();
  char byte = 0;
  EXPECT_EQ(readPeerMemory(getpid(), 8, &byte, 1), EFAULT);  // page 0 is never mapped
  // A pid beyond pid_max (at most 2^22 on Linux) names no process.
  EXPECT_EQ(readPeerMemory(1 << 23, peerProbeAddress(), &byte, 1), ESRCH);
  EXPECT_EQ(probePeerMemory(getpid(), peerProbeAddress()), "");
  const std::string gone = probePeerMemory(1 << 23, peerProbeAddress());
  EXPECT_NE(gone.find("No such process"), std::string::npos) << gone;
  // The right process, another word: the probe compares the value, not only the read.
  static const uint64_t other = 42;
  const std::string wrong = probePeerMemory(getpid(), reinterpret_cast<uintptr_t>(&other));
  EXPECT_NE(wrong.find("read 42"), std::string::npos) << wrong;
}

// ---- the links ---------------------------------------------------------------------------

std::unique_ptr<ShmTransport> connect(MemoryStore& store, int rank, int n, int64_t singleCopy) {
  ShmGeometry g{n, 4096, 4};
  g.singleCopyBytes = singleCopy;
  return std::make_unique<ShmTransport>(store, rank, n, g, 5s);
}

WaitContext waitFor(Transport& t) {
  WaitContext ctx;
  ctx.start = Clock::now();
  ctx.timeout = 5000ms;
  ctx.deadline = ctx.start + ctx.timeout;
  ctx.describe = [] { return std::string("single-copy test"); };
  ctx.checkHealth = [&t](int peer) { t.checkHealth(peer); };
  return ctx;
}

// Whatever the kernel says, the probe's answer decides: where this process may read its peers
// every link lends from the setting; where it may not (qemu-user: ENOSYS), none does, and the
// set-up report says why.
TEST(SingleCopyLinks, TheProbesAnswerDecidesEveryLink) {
  const std::string why = whyNoReader();
  MemoryStore store;
  std::vector<int64_t> lends(2, -2);
  std::vector<std::string> reports(2);
  auto outcomes = runRanks(2, [&](int rank) {
    auto t = connect(store, rank, 2, 4096);
    lends[static_cast<size_t>(rank)] = t->sendLink(Channel::Collective, 1 - rank).lendsFrom();
    reports[static_cast<size_t>(rank)] = t->singleCopyReport();
  });
  for (const auto& o : outcomes) ASSERT_TRUE(o.ok()) << o.message();
  for (int r = 0; r < 2; ++r) {
    if (why.empty()) {
      EXPECT_EQ(lends[static_cast<size_t>(r)], 4096);
      EXPECT_NE(reports[static_cast<size_t>(r)].find("lent to rank(s) "), std::string::npos);
    } else {
      EXPECT_EQ(lends[static_cast<size_t>(r)], -1);
      EXPECT_NE(reports[static_cast<size_t>(r)].find(why), std::string::npos)
          << reports[static_cast<size_t>(r)];
    }
  }
}

// A rank lends to a peer only where that peer reads lent messages: a rank with
// TORCH_RING_SINGLE_COPY_BYTES=0 is lent nothing, and lends nothing.
TEST(SingleCopyLinks, LendWhereTheReceiverReads) {
  SKIP_WITHOUT_A_READER();
  MemoryStore store;
  const std::vector<int64_t> setting = {1024, 0, 64};
  std::vector<std::vector<int64_t>> lends(3, std::vector<int64_t>(3, -2));
  std::vector<std::string> reports(3);
  auto outcomes = runRanks(3, [&](int rank) {
    auto t = connect(store, rank, 3, setting[static_cast<size_t>(rank)]);
    for (int peer = 0; peer < 3; ++peer) {
      if (peer != rank) lends[rank][peer] = t->sendLink(Channel::Collective, peer).lendsFrom();
    }
    reports[static_cast<size_t>(rank)] = t->singleCopyReport();
  });
  for (const auto& o : outcomes) ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(lends[0][1], -1);  // rank 1 reads nobody
  EXPECT_EQ(lends[0][2], 1024);
  EXPECT_EQ(lends[1][0], -1);  // rank 1 lends nothing
  EXPECT_EQ(lends[1][2], -1);
  EXPECT_EQ(lends[2][0], 64);
  EXPECT_EQ(lends[2][1], -1);
  EXPECT_NE(reports[0].find("lent to rank(s) 2"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("rank 1 does not read"), std::string::npos) << reports[0];
  EXPECT_EQ(reports[1], "off (TORCH_RING_SINGLE_COPY_BYTES=0)");
}

// A lent message reaches only the receives that take one; anywhere else the receiver names the
// sender instead of reading an address as data.
TEST(SingleCopyLinks, ALentMessageWhereCopiesAreExpectedIsRefused) {
  SKIP_WITHOUT_A_READER();
  MemoryStore store;
  std::vector<char> data(2048, 'x');
  const Fingerprint fp = makeFingerprint(Collective::AllReduce, 3, 512, DType::Float32,
                                         RedOp::Sum, -1);
  auto outcomes = runRanks(2, [&](int rank) {
    auto t = connect(store, rank, 2, 64);
    const WaitContext ctx = waitFor(*t);
    if (rank == 0) {
      StampedSender out(t->sendLink(Channel::Collective, 1), 0, fp);
      ASSERT_TRUE(out.lends(2048));
      ASSERT_FALSE(out.lends(63));
      out.acquire(ctx);
      out.publishLent(data.data(), 2048);
      out.waitLentRead(ctx);  // the receiver releases the slot as it fails
    } else {
      CheckedReceiver in(t->recvLink(Channel::Collective, 0), 1, fp);
      try {
        in.receive(ctx, 2048);
        ADD_FAILURE() << "a lent message was taken as copied data";
      } catch (const CommError& e) {
        EXPECT_NE(std::string(e.what()).find("received a lent message of 2048 bytes from rank 0"),
                  std::string::npos)
            << e.what();
      }
      in.release();
    }
  });
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.message();
}

// A lent address the reader cannot read fails the call naming both ranks and the system call.
TEST(SingleCopyLinks, AnUnreadableLentAddressFailsNamingTheRanks) {
  SKIP_WITHOUT_A_READER();
  MemoryStore store;
  auto outcomes = runRanks(2, [&](int rank) {
    auto t = connect(store, rank, 2, 64);
    const WaitContext ctx = waitFor(*t);
    const Fingerprint fp = makeFingerprint(Collective::Broadcast, 0, 100, DType::UInt8,
                                           RedOp::Sum, 0);
    if (rank == 0) {
      StampedSender out(t->sendLink(Channel::Collective, 1), 0, fp);
      out.acquire(ctx);
      out.publishLent(reinterpret_cast<const void*>(uintptr_t{64}), 100);
      out.waitLentRead(ctx);
    } else {
      CheckedReceiver in(t->recvLink(Channel::Collective, 0), 1, fp);
      bool lent = false;
      const void* payload = in.receiveMaybeLent(ctx, 100, &lent);
      ASSERT_TRUE(lent);
      char dst[100];
      try {
        in.readLent(payload, dst, 100, ctx);
        ADD_FAILURE() << "an unmapped address was read";
      } catch (const CommError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("rank 1 could not read the 100 bytes that rank 0"), std::string::npos)
            << m;
        EXPECT_NE(m.find("process_vm_readv: Bad address"), std::string::npos) << m;
      }
      in.release();
    }
  });
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.message();
}

// ---- the collectives -------------------------------------------------------------------------

CommOptions lendingOptions(int64_t singleCopy) {
  CommOptions o = smallSlotOptions();
  o.slotBytes = 4096;
  o.singleCopyBytes = singleCopy;
  return o;
}

// Lent messages this rank has read from its ring predecessor so far.
uint64_t lentReadFromPrev(Communicator& comm) {
  const int prev = ringPrev(comm.rank(), comm.size());
  return dynamic_cast<ShmRecvLink&>(comm.transport().recvLink(Channel::Collective, prev))
      .lentRead();
}

// Every rank's outputs of one all_reduce (sum and avg), all_gather, broadcast (root 1) and
// reduce_scatter over values that make float sums depend on their order, and how many lent
// messages it read.
struct Outputs {
  std::vector<std::vector<float>> perRank;
  std::vector<uint64_t> lentRead;
};

constexpr int64_t kCount = 20000;  // 80 KB: 20 slices of 4 KiB

float valueAt(int rank, int64_t i) {
  return 1.0f / static_cast<float>(1 + ((i * 7919 + rank * 104729) % 1000)) +
         static_cast<float>(rank) * 1e-3f;
}

Outputs runCollectives(int n, int64_t singleCopy) {
  Outputs out;
  out.perRank.assign(static_cast<size_t>(n), {});
  out.lentRead.assign(static_cast<size_t>(n), 0);
  auto outcomes = runGroup(
      n,
      [&](Communicator& comm) {
        const int r = comm.rank();
        std::vector<float>& keep = out.perRank[static_cast<size_t>(r)];
        uint64_t seq = 0;
        std::vector<float> sum(kCount), avg(kCount);
        for (int64_t i = 0; i < kCount; ++i) sum[i] = avg[i] = valueAt(r, i);
        runAllReduce(comm, sum.data(), kCount, DType::Float32, RedOp::Sum, 1.0, call(seq++));
        runAllReduce(comm, avg.data(), kCount, DType::Float32, RedOp::Avg, 1.0, call(seq++));
        std::vector<float> gathered(static_cast<size_t>(kCount * n));
        runAllGather(comm, sum.data(), gathered.data(), kCount, DType::Float32, call(seq++));
        std::vector<float> bcast(kCount);
        for (int64_t i = 0; i < kCount; ++i) bcast[i] = r == 1 ? valueAt(7, i) : -1.0f;
        runBroadcast(comm, bcast.data(), kCount, DType::Float32, 1, call(seq++));
        std::vector<float> scattered(kCount / n);
        std::vector<float> whole(static_cast<size_t>(kCount / n * n));
        for (size_t i = 0; i < whole.size(); ++i) whole[i] = valueAt(r, static_cast<int64_t>(i));
        runReduceScatter(comm, whole.data(), scattered.data(), kCount / n, DType::Float32, RedOp::Sum,
                           1.0, call(seq++));
        for (const auto* v : {&sum, &avg, &gathered, &bcast, &scattered}) {
          keep.insert(keep.end(), v->begin(), v->end());
        }
        out.lentRead[static_cast<size_t>(r)] = lentReadFromPrev(comm);
      },
      lendingOptions(singleCopy));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.message();
  return out;
}

// The same plan either way, so the same bits on every rank; and the lent path was taken.
TEST(SingleCopyCollectives, MatchTheSlotPathBitForBit) {
  SKIP_WITHOUT_A_READER();
  for (int n : {2, 3, 4}) {
    const Outputs slots = runCollectives(n, 0);
    const Outputs lent = runCollectives(n, 1);
    for (int r = 0; r < n; ++r) {
      const auto& a = slots.perRank[static_cast<size_t>(r)];
      const auto& b = lent.perRank[static_cast<size_t>(r)];
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << "world " << n << " rank " << r;
      EXPECT_EQ(slots.lentRead[static_cast<size_t>(r)], 0u);
      // At least the all_gather's: n - 1 blocks of 20 slices, each read lent from the
      // predecessor.
      EXPECT_GE(lent.lentRead[static_cast<size_t>(r)], static_cast<uint64_t>(20 * (n - 1)))
          << "world " << n << " rank " << r;
    }
    // Identical on every rank where the result is the group's (all_reduce, all_gather,
    // broadcast: the first 2 + n + 1 blocks of kCount).
    const size_t shared = static_cast<size_t>((3 + n) * kCount);
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(std::memcmp(lent.perRank[0].data(), lent.perRank[static_cast<size_t>(r)].data(),
                            shared * sizeof(float)),
                0)
          << "world " << n << " rank " << r;
    }
  }
}

// Closed forms on the lent path: all_gather's block r is rank r's, broadcast is the root's.
TEST(SingleCopyCollectives, MoveExactlyTheSendersData) {
  SKIP_WITHOUT_A_READER();
  constexpr int n = 3;
  auto outcomes = runGroup(
      n,
      [&](Communicator& comm) {
        const int r = comm.rank();
        std::vector<int32_t> mine(kCount), all(static_cast<size_t>(kCount * n));
        for (int64_t i = 0; i < kCount; ++i) mine[i] = static_cast<int32_t>(r * 1000003 + i);
        runAllGather(comm, mine.data(), all.data(), kCount, DType::Int32, call(0));
        for (int k = 0; k < n; ++k) {
          for (int64_t i = 0; i < kCount; ++i) {
            ASSERT_EQ(all[static_cast<size_t>(k * kCount + i)], k * 1000003 + i)
                << "rank " << r << " block " << k << " element " << i;
          }
        }
        for (int64_t i = 0; i < kCount; ++i) mine[i] = r == 2 ? static_cast<int32_t>(~i) : 0;
        runBroadcast(comm, mine.data(), kCount, DType::Int32, 2, call(1));
        for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(mine[i], ~i) << "rank " << r;
        EXPECT_GT(lentReadFromPrev(comm), 0u);
      },
      lendingOptions(1));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.message();
}

// A sender returns only once its reader has read what it lent: the caller may then overwrite
// its buffer at once (the root here, many times in a row), and every peer still holds the data
// the call was given.
TEST(SingleCopyCollectives, ASenderReturnsOnlyAfterItsDataWasRead) {
  SKIP_WITHOUT_A_READER();
  constexpr int n = 2;
  constexpr int kRounds = 30;
  CommOptions o = lendingOptions(1);
  o.slots = 8;  // deep FIFOs: the root could run far ahead of its reader
  auto outcomes = runGroup(
      n,
      [&](Communicator& comm) {
        const int r = comm.rank();
        std::vector<uint8_t> data(static_cast<size_t>(kCount));
        int64_t wrong = 0;
        for (int round = 0; round < kRounds; ++round) {
          std::fill(data.begin(), data.end(), r == 0 ? static_cast<uint8_t>(round + 1) : 0);
          runBroadcast(comm, data.data(), kCount, DType::UInt8, 0, call(static_cast<uint64_t>(round)));
          if (r == 0) {
            std::fill(data.begin(), data.end(), 0xEE);  // the caller's next use of its buffer
          } else {
            for (uint8_t v : data) wrong += v != static_cast<uint8_t>(round + 1);
          }
        }
        EXPECT_EQ(wrong, 0) << "bytes rank " << r << " read after the root had moved on";
      },
      o);
  for (const auto& oc : outcomes) EXPECT_TRUE(oc.ok()) << oc.message();
}

// The two-level plans run the ring inside each host on parts of the buffer and on staging
// buffers, between steps over TCP: lent where the ranks share memory, the same bits as with slots.
TEST(SingleCopyCollectives, TwoLevelPlansMatchTheSlotPathBitForBit) {
  SKIP_WITHOUT_A_READER();
  using testing_support::Layout;
  const std::vector<Layout> layouts = {{"2 hosts of 2", {0, 0, 1, 1}},
                                       {"hosts of 3 and 1", {0, 0, 1, 0}}};
  for (const Layout& l : layouts) {
    const int n = static_cast<int>(l.hostOf.size());
    std::vector<std::vector<float>> kept[2];
    uint64_t lentReads = 0;
    for (int lend = 0; lend < 2; ++lend) {
      kept[lend].assign(static_cast<size_t>(n), {});
      std::vector<uint64_t> reads(static_cast<size_t>(n), 0);
      MemoryStore store;
      auto outcomes = runRanks(n, [&](int rank) {
        CommOptions o = testing_support::madeUpHostOptions(l, rank, "hier_ring", "lend");
        o.singleCopyBytes = lend;
        Communicator comm(store, rank, n, o);
        std::vector<float> x(kCount), gathered(static_cast<size_t>(kCount * n));
        for (int64_t i = 0; i < kCount; ++i) x[i] = valueAt(rank, i);
        runAllReduce(comm, x.data(), kCount, DType::Float32, RedOp::Sum, 1.0, call(0));
        runAllGather(comm, x.data(), gathered.data(), kCount, DType::Float32, call(1));
        std::vector<float> part(kCount / n);
        runReduceScatter(comm, gathered.data(), part.data(), kCount / n, DType::Float32, RedOp::Sum,
                           1.0, call(2));
        std::vector<float>& keep = kept[lend][static_cast<size_t>(rank)];
        for (const auto* v : {&x, &gathered, &part}) keep.insert(keep.end(), v->begin(), v->end());
        for (int peer = 0; peer < n; ++peer) {
          if (peer == rank) continue;
          auto* shm = dynamic_cast<ShmRecvLink*>(
              &comm.transport().recvLink(Channel::Collective, peer));
          if (shm != nullptr) reads[static_cast<size_t>(rank)] += shm->lentRead();
        }
      });
      testing_support::expectEveryRankOk(outcomes, l.name);
      if (lend == 1) {
        for (uint64_t r : reads) lentReads += r;
      }
    }
    for (int r = 0; r < n; ++r) {
      const auto& a = kept[0][static_cast<size_t>(r)];
      const auto& b = kept[1][static_cast<size_t>(r)];
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << l.name << " rank " << r;
    }
    EXPECT_GT(lentReads, 0u) << l.name;
  }
}

}  // namespace
}  // namespace ring
