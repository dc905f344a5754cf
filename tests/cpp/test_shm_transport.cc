// The shared-memory transport with threads as ranks: FIFO order and payload integrity across
// slot reuse, the non-blocking calls, bounded waits, group-wide failure, and /dev/shm hygiene.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include "common/errors.h"
#include "memory_store.h"
#include "rank_threads.h"
#include "schedule/partition.h"
#include "transport/shm/shm_transport.h"

namespace ring {
namespace {

using namespace std::chrono_literals;
using testing_support::MemoryStore;
using testing_support::runRanks;
using testing_support::threw;

constexpr int64_t kSlotBytes = 256;
constexpr int kSlots = 4;

std::unique_ptr<ShmTransport> connect(MemoryStore& store, int rank, int n) {
  return std::make_unique<ShmTransport>(store, rank, n, ShmGeometry{n, kSlotBytes, kSlots}, 5s);
}

WaitContext waitFor(Transport& t, std::chrono::milliseconds timeout) {
  WaitContext ctx;
  ctx.start = Clock::now();
  ctx.timeout = timeout;
  ctx.deadline = ctx.start + timeout;
  ctx.describe = [] { return std::string("transport test"); };
  ctx.checkHealth = [&t](int peer) { t.checkHealth(peer); };
  return ctx;
}

uint8_t patternByte(int sender, int64_t message, int64_t i) {
  return static_cast<uint8_t>(sender * 31 + message * 7 + i);
}
int64_t payloadSize(int64_t message) { return (message * 37) % (kSlotBytes + 1); }

// Many more messages than slots, of varying sizes (0 to a full slot), so every slot is reused
// hundreds of times: each must arrive in order with its own header and bytes.
TEST(ShmTransport, MessagesArriveInOrderWithIntactPayloads) {
  constexpr int kWorld = 3;
  constexpr int64_t kMessages = 2000;
  MemoryStore store;
  auto outcomes = runRanks(kWorld, [&](int rank) {
    auto t = connect(store, rank, kWorld);
    const int next = ringNext(rank, kWorld), prev = ringPrev(rank, kWorld);
    std::exception_ptr sendError;
    // Sending runs on its own thread: a rank that only sent would fill its FIFO and stop.
    std::thread sender([&] {
      try {
        SendLink& link = t->sendLink(Channel::Collective, next);
        EXPECT_EQ(link.capacity(), kSlotBytes);
        for (int64_t m = 0; m < kMessages; ++m) {
          OutSlot slot = link.acquire(waitFor(*t, 10s));
          auto* bytes = static_cast<uint8_t*>(slot.payload);
          for (int64_t i = 0; i < payloadSize(m); ++i) bytes[i] = patternByte(rank, m, i);
          slot.header->sender = rank;
          slot.header->step = m;
          slot.header->payloadBytes = payloadSize(m);
          link.publish();
        }
      } catch (...) {
        sendError = std::current_exception();
      }
    });
    // Joined however this rank leaves (a failed receive must not leave the thread running).
    struct Joiner {
      std::thread& thread;
      ~Joiner() {
        if (thread.joinable()) thread.join();
      }
    } joiner{sender};
    RecvLink& link = t->recvLink(Channel::Collective, prev);
    int64_t corrupt = 0;
    for (int64_t m = 0; m < kMessages; ++m) {
      InSlot slot = link.receive(waitFor(*t, 10s));
      // Stop at the first wrong header: every later message would only repeat the failure.
      const MessageHeader& h = *slot.header;
      if (h.sender != prev || h.step != m || h.payloadBytes != payloadSize(m)) {
        ADD_FAILURE() << "rank " << rank << " message " << m << ": sender " << h.sender
                      << " step " << h.step << " bytes " << h.payloadBytes;
        break;
      }
      const auto* bytes = static_cast<const uint8_t*>(slot.payload);
      for (int64_t i = 0; i < payloadSize(m); ++i) corrupt += bytes[i] != patternByte(prev, m, i);
      link.release();
    }
    sender.join();
    if (sendError) std::rethrow_exception(sendError);
    EXPECT_EQ(corrupt, 0) << "bytes differing on rank " << rank;
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// The p2p engine relies on these never blocking: tryAcquire says no on a full FIFO and yes as
// soon as one slot is released; tryReceive says no on an empty one. The two channels are
// separate FIFOs.
TEST(ShmTransport, TryCallsReportFullAndEmptyFifos) {
  MemoryStore store;
  auto outcomes = runRanks(2, [&](int rank) {
    auto t = connect(store, rank, 2);
    InSlot in;
    OutSlot out;
    if (rank == 1) {
      RecvLink& link = t->recvLink(Channel::Collective, 0);
      EXPECT_FALSE(link.tryReceive(&in)) << "nothing was sent yet";
      store.set("checked-empty", "1");
      store.get("full", 5s);
      EXPECT_FALSE(t->recvLink(Channel::PointToPoint, 0).tryReceive(&in)) << "other channel";
      for (int m = 0; m < kSlots; ++m) {
        ASSERT_TRUE(link.tryReceive(&in)) << "message " << m;
        EXPECT_EQ(in.header->step, m);
        link.release();
        if (m == 0) store.set("one-released", "1");
      }
      EXPECT_FALSE(link.tryReceive(&in)) << "drained: " << kSlots << " messages were sent";
      store.set("drained", "1");
      store.get("sent-one-more", 5s);
      ASSERT_TRUE(link.tryReceive(&in));
      EXPECT_EQ(in.header->step, kSlots);
      link.release();
      return;
    }
    SendLink& link = t->sendLink(Channel::Collective, 1);
    store.get("checked-empty", 5s);
    for (int m = 0; m < kSlots; ++m) {
      ASSERT_TRUE(link.tryAcquire(&out)) << "slot " << m << " of " << kSlots;
      out.header->step = m;
      link.publish();
    }
    EXPECT_FALSE(link.tryAcquire(&out)) << "all " << kSlots << " slots are in use";
    store.set("full", "1");
    store.get("one-released", 5s);
    ASSERT_TRUE(link.tryAcquire(&out)) << "the receiver released one slot";
    store.get("drained", 5s);
    out.header->step = kSlots;
    link.publish();
    store.set("sent-one-more", "1");
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// A wait that cannot be satisfied ends at its deadline with a TimeoutError naming the rank it
// waited for (both directions: a receive from a silent peer, a send into a full FIFO).
TEST(ShmTransport, WaitsTimeOutNamingThePeer) {
  MemoryStore store;
  auto outcomes = runRanks(3, [&](int rank) {
    auto t = connect(store, rank, 3);
    if (rank == 1) {
      auto start = Clock::now();
      try {
        t->recvLink(Channel::Collective, 2).receive(waitFor(*t, 200ms));
        ADD_FAILURE() << "receive from a silent rank returned";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("waiting for rank 2"), std::string::npos) << e.what();
      }
      auto waited = Clock::now() - start;
      EXPECT_GE(waited, 200ms);
      EXPECT_LT(waited, 3s);
      SendLink& link = t->sendLink(Channel::Collective, 0);
      for (int m = 0; m < kSlots; ++m) {
        link.acquire(waitFor(*t, 1s));
        link.publish();
      }
      try {
        link.acquire(waitFor(*t, 100ms));
        ADD_FAILURE() << "acquire on a full FIFO returned";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("waiting for rank 0"), std::string::npos) << e.what();
      }
    }
    // Nobody leaves (and unmaps) before rank 1 is done with the others' memory.
    store.set("done/" + std::to_string(rank), "1");
    for (int r = 0; r < 3; ++r) store.get("done/" + std::to_string(r), 10s);
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// markBroken on any rank (here not rank 0, which holds the record) fails another rank's
// ongoing wait promptly with the reason, instead of letting it run into its timeout; the first
// reason is kept.
TEST(ShmTransport, MarkBrokenFailsOtherRanksWaitsWithTheReason) {
  MemoryStore store;
  auto outcomes = runRanks(3, [&](int rank) {
    auto t = connect(store, rank, 3);
    if (rank == 2) {
      std::this_thread::sleep_for(100ms);
      t->markBroken("disk on fire under rank 2");
      t->markBroken("a later consequence");
    }
    if (rank == 1) {
      auto start = Clock::now();
      try {
        t->recvLink(Channel::Collective, 0).receive(waitFor(*t, 10s));
        ADD_FAILURE() << "receive returned on a broken group";
      } catch (const TimeoutError& e) {
        ADD_FAILURE() << "timed out instead of seeing the broken group: " << e.what();
      } catch (const CommError& e) {
        EXPECT_NE(std::string(e.what()).find("disk on fire under rank 2"), std::string::npos)
            << e.what();
      }
      EXPECT_LT(Clock::now() - start, 3s);
    }
    store.set("waited/" + std::to_string(rank), "1");
    for (int r = 0; r < 3; ++r) store.get("waited/" + std::to_string(r), 10s);
    try {
      t->checkHealth(-1);
      ADD_FAILURE() << "rank " << rank << " does not see the broken group";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("disk on fire"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("later"), std::string::npos) << e.what();
    }
    store.set("checked/" + std::to_string(rank), "1");
    for (int r = 0; r < 3; ++r) store.get("checked/" + std::to_string(r), 10s);
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

// Once constructed, no rank's inbox is reachable by name: a crash later cannot leak
// /dev/shm/torch_ring_* files. The names are the ones the ranks published through the store
// (looking at /dev/shm as a whole would race with other processes on the machine).
TEST(ShmTransport, NoSegmentNamesRemainAfterConstruction) {
  constexpr int kWorld = 4;
  MemoryStore store;
  auto outcomes = runRanks(kWorld, [&](int rank) {
    auto t = connect(store, rank, kWorld);
    store.set("constructed/" + std::to_string(rank), "1");
    for (int r = 0; r < kWorld; ++r) store.get("constructed/" + std::to_string(r), 10s);
    if (rank != 0) return;
    for (int r = 0; r < kWorld; ++r) {
      std::string name;
      ASSERT_TRUE(store.peek("ring/shm/inbox/" + std::to_string(r), &name)) << "rank " << r;
      EXPECT_EQ(name.rfind("/torch_ring_", 0), 0u) << name;
      errno = 0;
      EXPECT_NE(access(("/dev/shm" + name).c_str(), F_OK), 0) << name << " still exists";
      EXPECT_EQ(errno, ENOENT) << name;
    }
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].message();
}

}  // namespace
}  // namespace ring
