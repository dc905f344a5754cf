// A Store that rank PROCESSES meet through: a fixed table in anonymous shared memory, created
// by the test before it forks the ranks, with a process-shared mutex and condition variable.
// The mutex is robust: a rank killed while holding it (the tests kill ranks) leaves it usable.
// Same blocking get (TimeoutError) as MemoryStore and the c10d store the backend adapts.
#pragma once

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "common/errors.h"
#include "transport/store.h"

namespace ring {
namespace testing_support {

class SharedMemoryStore : public Store {
 public:
  static constexpr int kEntries = 512;
  static constexpr size_t kKeyBytes = 128;
  static constexpr size_t kValueBytes = 2048;

  SharedMemoryStore() {
    void* p = mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) throw CommError("SharedMemoryStore: mmap failed");
    table_ = new (p) Table();
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&table_->mutex, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&table_->changed, &ca);
    pthread_condattr_destroy(&ca);
  }
  ~SharedMemoryStore() override { munmap(table_, sizeof(Table)); }
  SharedMemoryStore(const SharedMemoryStore&) = delete;
  SharedMemoryStore& operator=(const SharedMemoryStore&) = delete;

  void set(const std::string& key, const std::string& value) override {
    Lock lock(table_);
    put(key, value);
    pthread_cond_broadcast(&table_->changed);
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    const int64_t ns = deadline.tv_nsec + static_cast<int64_t>(timeout.count() % 1000) * 1000000;
    deadline.tv_sec += static_cast<time_t>(timeout.count() / 1000 + ns / 1000000000);
    deadline.tv_nsec = static_cast<long>(ns % 1000000000);
    Lock lock(table_);
    for (;;) {
      if (const Entry* e = find(key)) return std::string(e->value, e->valueBytes);
      const int rc = pthread_cond_timedwait(&table_->changed, &table_->mutex, &deadline);
      if (rc == EOWNERDEAD) pthread_mutex_consistent(&table_->mutex);
      if (rc == ETIMEDOUT && find(key) == nullptr) {
        throw TimeoutError(strCat("SharedMemoryStore: key '", key, "' not set within ",
                                  timeout.count(), " ms"));
      }
    }
  }

  int64_t add(const std::string& key, int64_t delta) override {
    Lock lock(table_);
    const Entry* e = find(key);
    const int64_t old = e == nullptr ? 0 : std::stoll(std::string(e->value, e->valueBytes));
    const int64_t value = old + delta;
    put(key, std::to_string(value));
    pthread_cond_broadcast(&table_->changed);
    return value;
  }

  bool check(const std::string& key) override {
    Lock lock(table_);
    return find(key) != nullptr;
  }

 private:
  struct Entry {
    char key[kKeyBytes];
    char value[kValueBytes];
    uint32_t valueBytes;
    bool used;
  };
  struct Table {
    pthread_mutex_t mutex;
    pthread_cond_t changed;
    Entry entries[kEntries];
  };

  // Holds the table's mutex; takes over a mutex whose holder died.
  class Lock {
   public:
    explicit Lock(Table* t) : t_(t) {
      if (pthread_mutex_lock(&t_->mutex) == EOWNERDEAD) pthread_mutex_consistent(&t_->mutex);
    }
    ~Lock() { pthread_mutex_unlock(&t_->mutex); }

   private:
    Table* t_;
  };

  const Entry* find(const std::string& key) const {
    for (const Entry& e : table_->entries) {
      if (e.used && key == e.key) return &e;
    }
    return nullptr;
  }

  void put(const std::string& key, const std::string& value) {
    if (key.size() >= kKeyBytes || value.size() > kValueBytes) {
      throw CommError(strCat("SharedMemoryStore: key '", key, "' or its value of ", value.size(),
                             " bytes is too long"));
    }
    Entry* slot = const_cast<Entry*>(find(key));
    for (Entry& e : table_->entries) {
      if (slot != nullptr) break;
      if (!e.used) slot = &e;
    }
    if (slot == nullptr) throw CommError("SharedMemoryStore: table full");
    std::memcpy(slot->key, key.c_str(), key.size() + 1);
    std::memcpy(slot->value, value.data(), value.size());
    slot->valueBytes = static_cast<uint32_t>(value.size());
    slot->used = true;
  }

  Table* table_;
};

}  // namespace testing_support
}  // namespace ring
