// The key-value store ranks meet through. The backend adapts the c10d store handed to it
// (already prefixed per group); C++ tests use an in-memory one. Only bootstrap data goes
// through it: segment names, pids, host identity, listening addresses, the job token.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ring {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists or the timeout expires (then throws TimeoutError).
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // The values of `keys`, in their order, blocking until every one exists or the timeout
  // expires (then throws TimeoutError). Why a call of its own: set-up reads a key of every
  // rank (host identity, plan settings, addresses), and a get per key costs a round trip to
  // torch's TCPStore server each: n per rank, n*n for the server, which answers them one at a
  // time (1024 ranks: a million requests). TorchStore answers all of them in two round trips.
  // Here, for stores without a batched read (the C++ tests' in-memory one): a get per key.
  virtual std::vector<std::string> getAll(const std::vector<std::string>& keys,
                                          std::chrono::milliseconds timeout) {
    std::vector<std::string> values;
    values.reserve(keys.size());
    for (const std::string& key : keys) values.push_back(get(key, timeout));
    return values;
  }
  // Adds delta to the integer stored at key (absent: 0) and returns the new value, atomically.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Whether the key exists, without waiting.
  virtual bool check(const std::string& key) = 0;
  // Whether every one of `keys` exists, without waiting (TorchStore: one round trip).
  virtual bool checkAll(const std::vector<std::string>& keys) {
    for (const std::string& key : keys) {
      if (!check(key)) return false;
    }
    return true;
  }
};

// Set-up's usual read: the value each rank stored under keyOf(rank), indexed by rank, in one
// batched read (getAll); this rank's own entry is `mine`, not read.
template <typename KeyOf>
std::vector<std::string> readEveryRank(Store& store, int rank, int size, KeyOf keyOf,
                                       const std::string& mine,
                                       std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) {
    if (r != rank) keys.push_back(keyOf(r));
  }
  std::vector<std::string> others = store.getAll(keys, timeout);
  std::vector<std::string> values(static_cast<size_t>(size));
  for (int r = 0, i = 0; r < size; ++r) {
    values[static_cast<size_t>(r)] = r == rank ? mine : std::move(others[static_cast<size_t>(i++)]);
  }
  return values;
}

}  // namespace ring
