#include "backend/torch_store.h"

#include "common/errors.h"

namespace ring {

void TorchStore::set(const std::string& key, const std::string& value) {
  store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string TorchStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  try {
    store_->wait({key}, timeout);
  } catch (const std::exception& e) {
    throw TimeoutError(strCat("ring: waiting ", timeout.count(), " ms for store key '", key,
                              "' failed while setting up the group (a rank did not start or "
                              "create the group?): ", e.what()));
  }
  std::vector<uint8_t> v = store_->get(key);
  return std::string(v.begin(), v.end());
}

int64_t TorchStore::add(const std::string& key, int64_t delta) {
  return store_->add(key, delta);
}

bool TorchStore::check(const std::string& key) { return store_->check({key}); }

}  // namespace ring
