// Adapts the c10d store handed to the backend (already prefixed for this group) to the
// torch-free Store interface of the core library.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "transport/store.h"

namespace ring {

class TorchStore : public Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  // One wait for all the keys, then one multiGet: two round trips to a TCPStore whatever the
  // number of keys (a PrefixStore passes both on with its prefix).
  std::vector<std::string> getAll(const std::vector<std::string>& keys,
                                  std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  bool checkAll(const std::vector<std::string>& keys) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace ring
