// Threads of one process as ranks on several "hosts" (CommOptions::hostId): ranks with the same
// label share memory, the others talk TCP on loopback. For the two-level plans' tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/errors.h"
#include "executor/communicator.h"
#include "rank_threads.h"

namespace ring {
namespace testing_support {

struct Layout {
  const char* name;
  std::vector<int> hostOf;  // per rank: its host's label
};

// 256-byte slots (parts of many slices), 3 per FIFO; auto's limits: the direct round between
// hosts up to 1 KiB x (hosts-1), all_reduce by recursive doubling up to 2 KiB, a ring above.
inline CommOptions madeUpHostOptions(const Layout& l, int rank, const std::string& algo,
                                     const char* group) {
  CommOptions o;
  o.timeout = std::chrono::seconds(20);
  o.groupName = group;
  o.slotBytes = 256;
  o.slots = 3;
  o.transport = "auto";
  o.listenAddress = "127.0.0.1";
  o.hostId = strCat("host-", l.hostOf[static_cast<size_t>(rank)]);
  o.algo = algo;
  o.rdBytes = 2048;
  o.directBytes = 1024;
  return o;
}

inline void expectEveryRankOk(const std::vector<RankOutcome>& out, const std::string& what) {
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_TRUE(out[r].ok()) << what << ", rank " << r << ": " << out[r].message();
  }
}

}  // namespace testing_support
}  // namespace ring
