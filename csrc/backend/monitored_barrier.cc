#include "backend/monitored_barrier.h"

#include <c10/util/Exception.h>

#include <thread>
#include <vector>

#include "common/errors.h"

namespace ring {
namespace {

std::string keyOf(const MonitoredBarrierCall& c, const std::string& what) {
  return strCat("ring/monitored_barrier/", c.call, "/", what);
}

std::string where(const MonitoredBarrierCall& c) {
  return strCat("ring: monitored_barrier on rank ", c.rank, " of ", c.size, " in group '",
                c.group, "'");
}

// Whether `key` is set within `wait` (zero or less: only whether it is set now). Polled with
// check() rather than a store wait with a timeout: a wait that runs out logs torch's socket
// warnings, and running out is what this barrier is for. 10 ms apart: a debugging barrier.
bool arrives(c10d::Store& store, const std::string& key, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    if (store.check({key})) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void waitForEveryRank(c10d::Store& store, const MonitoredBarrierCall& c,
                      const std::function<std::string(int)>& describeRank) {
  const auto deadline = std::chrono::steady_clock::now() + c.timeout;
  std::vector<int> missing;
  for (int r = 1; r < c.size; ++r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (arrives(store, keyOf(c, strCat("in/", r)), left)) continue;
    missing.push_back(r);
    if (!c.waitAllRanks) break;  // fail fast, as gloo does by default
  }
  if (missing.empty()) return;
  std::string ranks;
  std::string details;
  for (int r : missing) {
    ranks += strCat(ranks.empty() ? "" : ", ", r);
    const std::string d = describeRank ? describeRank(r) : "";
    if (!d.empty()) details += strCat(" Rank ", r, ": ", d, ".");
  }
  C10_THROW_ERROR(DistBackendError,
                  strCat(where(c), ": rank", missing.size() > 1 ? "s " : " ", ranks,
                         " did not reach it within ",
                         c.timeout.count(), " ms",
                         c.waitAllRanks ? "" : " (the first missing rank; wait_all_ranks=True "
                                               "names them all)",
                         ".", details));
}

}  // namespace

void runMonitoredBarrier(c10d::Store& store, const MonitoredBarrierCall& c,
                         const std::function<std::string(int)>& describeRank) {
  if (c.size == 1) return;
  if (c.rank != 0) {
    store.set(keyOf(c, strCat("in/", c.rank)), std::vector<uint8_t>{1});
    if (!arrives(store, keyOf(c, "out"), c.timeout)) {
      C10_THROW_ERROR(DistBackendError,
                      strCat(where(c), ": rank 0 did not release it within ", c.timeout.count(),
                             " ms. Rank 0's error names the rank(s) that did not arrive (or rank "
                             "0 itself did not reach the barrier)."));
    }
    return;
  }
  waitForEveryRank(store, c, describeRank);
  for (int r = 1; r < c.size; ++r) store.deleteKey(keyOf(c, strCat("in/", r)));
  store.set(keyOf(c, "out"), std::vector<uint8_t>{1});
}

}  // namespace ring
