// An in-memory Store for threads-as-ranks tests: the store the ranks of one process meet
// through, with the same blocking get (and TimeoutError) as the c10d store the backend adapts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "common/errors.h"
#include "transport/store.h"

namespace ring {
namespace testing_support {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) != 0; })) {
      throw TimeoutError(strCat("MemoryStore: key '", key, "' not set within ",
                                timeout.count(), " ms"));
    }
    return values_[key];
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t value;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = values_.find(key);
      value = (it == values_.end() ? 0 : std::stoll(it->second)) + delta;
      values_[key] = std::to_string(value);
    }
    changed_.notify_all();
    return value;
  }

  bool check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.count(key) != 0;
  }

  // Non-blocking look-up for tests that inspect what the ranks published.
  bool peek(const std::string& key, std::string* value) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(key);
    if (it == values_.end()) return false;
    *value = it->second;
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace testing_support
}  // namespace ring
