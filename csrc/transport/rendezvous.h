// The key-value store ranks meet through. The backend adapts the c10d store handed to it
// (already prefixed per group); C++ tests use an in-memory one. Only bootstrap data goes
// through it: segment names, pids, host identity.
#pragma once

#include <chrono>
#include <string>

namespace ring {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists or the timeout expires (then throws TimeoutError).
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

}  // namespace ring
