// The key-value store ranks meet through. The backend adapts the c10d store handed to it
// (already prefixed per group); C++ tests use an in-memory one. Only bootstrap data goes
// through it: segment names, pids, host identity, listening addresses, the job token.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ring {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists or the timeout expires (then throws TimeoutError).
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Adds delta to the integer stored at key (absent: 0) and returns the new value, atomically.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Whether the key exists, without waiting.
  virtual bool check(const std::string& key) = 0;
};

}  // namespace ring
