#include "transport/setup_keys.h"

#include <algorithm>
#include <thread>

#include "common/errors.h"
#include "transport/wait.h"

namespace ring {
namespace {

const char* kFailureKey = "ring/setup_failed";

}  // namespace

SetupKeys::SetupKeys(Store& base, int rank, int size)
    : base_(base), rank_(rank) {
  incarnation_ = base_.add(strCat("ring/incarnation/", size, "/", rank), 1);
  prefix_ = strCat("ring/", size, "x", incarnation_, "/");
}

void SetupKeys::set(const std::string& key, const std::string& value) {
  base_.set(prefix_ + key, value);
}

int64_t SetupKeys::add(const std::string& key, int64_t delta) {
  return base_.add(prefix_ + key, delta);
}

bool SetupKeys::check(const std::string& key) { return base_.check(prefix_ + key); }

bool SetupKeys::checkAll(const std::vector<std::string>& keys) {
  return base_.checkAll(prefixed(keys));
}

std::vector<std::string> SetupKeys::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(prefix_ + key);
  return out;
}

std::string SetupKeys::get(const std::string& key, std::chrono::milliseconds timeout) {
  return getAll({key}, timeout)[0];
}

std::vector<std::string> SetupKeys::getAll(const std::vector<std::string>& keys,
                                           std::chrono::milliseconds timeout) {
  // Polls rather than blocking in the store's wait(), so that a failure notice from another
  // rank ends the wait too. Set-up only: the first polls are quick (the keys are usually there
  // or close), later ones back off to 20 ms, a small cost next to process start-up.
  const std::vector<std::string> full = prefixed(keys);
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::microseconds(200);
  while (true) {
    if (base_.checkAll(full)) return base_.getAll(full, timeout);
    throwIfSetupFailed(*this, strCat("ring: rank ", rank_, " stops setting up the group"));
    auto now = Clock::now();
    if (now >= deadline) {
      // The failure path only: which keys are missing (each names its rank), a few of them.
      std::string missing;
      size_t count = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (base_.check(full[i])) continue;
        if (++count <= 4) missing += strCat(count > 1 ? ", '" : "'", keys[i], "'");
      }
      if (count == 0) return base_.getAll(full, timeout);  // all there since the last poll
      throw TimeoutError(strCat(
          "ring: rank ", rank_, " waited ", timeout.count(), " ms for store key",
          count == 1 ? " " : "s ", missing, count > 4 ? strCat(" and ", count - 4, " more") : "",
          " (set-up number ", incarnation_, " of this group on this store) in vain: a rank did "
          "not start or did not create the group, or the ranks created this group a different "
          "number of times on this store"));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
  }
}

void reportSetupFailure(Store& store, int rank, const std::string& reason) {
  try {
    // The first reporter's words stay: later failures are mostly its consequences.
    if (store.add("ring/setup_failed_count", 1) == 1) {
      store.set(kFailureKey, strCat("rank ", rank, " failed to set up: ", reason));
    }
  } catch (const std::exception&) {
    // The store itself may be what failed; the others then reach their timeout.
  }
}

std::string reportedSetupFailure(Store& store) {
  if (!store.check(kFailureKey)) return "";
  return store.get(kFailureKey, std::chrono::milliseconds(1000));
}

void throwIfSetupFailed(Store& store, const std::string& whatStops) {
  std::string failure = reportedSetupFailure(store);
  if (!failure.empty()) throw CommError(strCat(whatStops, ": ", failure));
}

}  // namespace ring
