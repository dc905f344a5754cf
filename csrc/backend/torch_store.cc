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

std::vector<std::string> TorchStore::getAll(const std::vector<std::string>& keys,
                                            std::chrono::milliseconds timeout) {
  if (keys.empty()) return {};
  try {
    store_->wait(keys, timeout);
  } catch (const std::exception& e) {
    // Set-up reads through SetupKeys, which waits for the keys first and names the missing
    // ones; this is the last resort for a key gone meanwhile.
    throw TimeoutError(strCat("ring: waiting ", timeout.count(), " ms for ", keys.size(),
                              " store keys ('", keys.front(), "' first) failed while setting "
                              "up the group: ", e.what()));
  }
  std::vector<std::vector<uint8_t>> raw = store_->multiGet(keys);
  RING_ASSERT(raw.size() == keys.size(), "the store returned ", raw.size(), " values for ",
              keys.size(), " keys");
  std::vector<std::string> values;
  values.reserve(raw.size());
  for (const auto& v : raw) values.emplace_back(v.begin(), v.end());
  return values;
}

int64_t TorchStore::add(const std::string& key, int64_t delta) {
  return store_->add(key, delta);
}

bool TorchStore::check(const std::string& key) { return store_->check({key}); }

bool TorchStore::checkAll(const std::vector<std::string>& keys) {
  return keys.empty() || store_->check(keys);
}

}  // namespace ring
