// SetupKeys: each set-up of a group sees only its own keys, even on a store that still
// holds the keys of an earlier set-up under the same group prefix, and a set-up failure that
// one rank reports ends the other ranks' waits at once, with its reason.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "memory_store.h"
#include "transport/setup_keys.h"
#include "transport/wait.h"

namespace ring {
namespace {

using testing_support::MemoryStore;
using namespace std::chrono_literals;

TEST(SetupKeys, EachSetUpSeesOnlyItsOwnKeys) {
  MemoryStore store;  // outlives both set-ups, as a TCPStore kept alive does
  SetupKeys first0(store, 0, 2), first1(store, 1, 2);
  EXPECT_EQ(first0.incarnation(), 1);
  EXPECT_EQ(first1.incarnation(), 1);
  first0.set("ring/tcp/token", "old");
  EXPECT_EQ(first1.get("ring/tcp/token", 1s), "old");

  // The same ranks set the group up again on the same store: the old token is not visible...
  SetupKeys second0(store, 0, 2), second1(store, 1, 2);
  EXPECT_EQ(second0.incarnation(), 2);
  EXPECT_EQ(second1.incarnation(), 2);
  EXPECT_FALSE(second1.check("ring/tcp/token"));
  EXPECT_THROW(second1.get("ring/tcp/token", 50ms), TimeoutError);
  // ...and the new one is.
  second0.set("ring/tcp/token", "new");
  EXPECT_EQ(second1.get("ring/tcp/token", 1s), "new");
  EXPECT_EQ(first1.get("ring/tcp/token", 1s), "old");
}

TEST(SetupKeys, ANameReusedWithOtherMembersOrAnotherSizeStillAgrees) {
  MemoryStore store;
  // Group "1" of 2 ranks, twice (other processes may hold the slots the second time).
  for (int round = 1; round <= 2; ++round) {
    SetupKeys a(store, 0, 2), b(store, 1, 2);
    EXPECT_EQ(a.incarnation(), round);
    EXPECT_EQ(b.incarnation(), round);
    a.set("ring/tcp/token", "size 2, round " + std::to_string(round));
  }
  // The same name with 3 ranks: all three slots agree, and none sees the 2-rank keys.
  SetupKeys c0(store, 0, 3), c1(store, 1, 3), c2(store, 2, 3);
  EXPECT_EQ(c0.incarnation(), c2.incarnation());
  EXPECT_EQ(c1.incarnation(), c2.incarnation());
  EXPECT_NE(c0.prefix(), SetupKeys(store, 0, 2).prefix());
  EXPECT_FALSE(c2.check("ring/tcp/token"));
}

TEST(SetupKeys, TimeoutNamesTheKeyAndTheSetUpNumber) {
  MemoryStore store;
  SetupKeys r(store, 3, 4);
  try {
    r.get("ring/host/0", 30ms);
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("rank 3"), std::string::npos) << what;
    EXPECT_NE(what.find("ring/host/0"), std::string::npos) << what;
    EXPECT_NE(what.find("set-up number 1"), std::string::npos) << what;
  }
}

TEST(SetupKeys, ManyKeysAtOnceComeInOrderAndATimeoutNamesOnlyTheMissingOnes) {
  MemoryStore store;
  SetupKeys r0(store, 0, 4), r1(store, 1, 4), r2(store, 2, 4), r3(store, 3, 4);
  r1.set("ring/host/1", "b");
  r3.set("ring/host/3", "d");
  // Rank 2 publishes while rank 0 already waits for all three.
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    r2.set("ring/host/2", "c");
  });
  EXPECT_EQ(r0.getAll({"ring/host/3", "ring/host/1", "ring/host/2"}, 5s),
            (std::vector<std::string>{"d", "b", "c"}));
  late.join();
  try {
    r0.getAll({"ring/host/1", "ring/plans/2", "ring/host/3", "ring/plans/1"}, 30ms);
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'ring/plans/2', 'ring/plans/1'"), std::string::npos) << what;
    EXPECT_EQ(what.find("ring/host/"), std::string::npos) << what;  // those were there
    EXPECT_NE(what.find("set-up number 1"), std::string::npos) << what;
  }
  EXPECT_TRUE(r0.checkAll({"ring/host/1", "ring/host/2"}));
  EXPECT_FALSE(r0.checkAll({"ring/host/1", "ring/plans/2"}));
}

TEST(SetupKeys, AReportedFailureEndsOtherRanksWaitsWithItsReason) {
  MemoryStore store;
  SetupKeys waiter(store, 0, 2), failing(store, 1, 2);
  std::thread fail([&] {
    std::this_thread::sleep_for(100ms);
    reportSetupFailure(failing, 1, "TORCH_RING_TRANSPORT 'bogus' must be auto, shm or tcp");
    reportSetupFailure(failing, 1, "a later consequence");  // the first reason stays
  });
  auto start = Clock::now();
  try {
    waiter.get("ring/host/1", 60s);
    FAIL() << "expected the failure notice";
  } catch (const CommError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("rank 1 failed to set up"), std::string::npos) << what;
    EXPECT_NE(what.find("bogus"), std::string::npos) << what;
  }
  fail.join();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_NE(reportedSetupFailure(waiter).find("bogus"), std::string::npos);
  // A later set-up of the group starts clean.
  SetupKeys next(store, 0, 2);
  EXPECT_EQ(reportedSetupFailure(next), "");
}

}  // namespace
}  // namespace ring
