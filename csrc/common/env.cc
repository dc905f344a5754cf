#include "common/env.h"

#include <cstdlib>
#include <cstring>

#include "common/errors.h"

namespace ring {
namespace {

int readLevel() {
  const char* v = std::getenv("TORCH_RING_DEBUG");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "WARN") == 0) return kLogWarn;
  if (std::strcmp(v, "INFO") == 0) return kLogInfo;
  if (std::strcmp(v, "TRACE") == 0) return kLogTrace;
  throw UsageError(strCat("TORCH_RING_DEBUG='", v, "' must be WARN, INFO or TRACE"));
}

std::string readString(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string readTransport() {
  std::string v = readString("TORCH_RING_TRANSPORT");
  if (v.empty()) return "auto";
  if (v != "auto" && v != "shm" && v != "tcp") {
    throw UsageError(strCat("TORCH_RING_TRANSPORT='", v, "' must be auto, shm or tcp"));
  }
  return v;
}

}  // namespace

int64_t readInt(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi) {
    throw UsageError(strCat(name, "='", v, "' is not an integer in [", lo, ", ", hi, "]"));
  }
  return x;
}

const EnvKnobs& env() {
  static const EnvKnobs knobs = [] {
    EnvKnobs k;
    k.slotBytes = readInt("TORCH_RING_SLOT_BYTES", 256 * 1024, 64, 64 * 1024 * 1024);
    k.slotBytes = (k.slotBytes + 63) / 64 * 64;  // keep every payload 64-byte aligned
    k.slotBytesSet = std::getenv("TORCH_RING_SLOT_BYTES") != nullptr;
    k.slots = static_cast<int>(readInt("TORCH_RING_SLOTS", 4, 2, 64));
    k.spinMicros = static_cast<int>(readInt("TORCH_RING_SPIN_US", -1, 0, 10000000));
    k.debugLevel = readLevel();
    k.transport = readTransport();
    k.socketIfname = readString("TORCH_RING_SOCKET_IFNAME");
    k.masterAddr = readString("MASTER_ADDR");
    return k;
  }();
  return knobs;
}

}  // namespace ring
