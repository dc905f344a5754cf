#include "common/env.h"

#include <sys/socket.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "common/errors.h"
#include "common/knob_table.h"

namespace ring {
namespace {

std::string readString(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// Word-valued knobs ignore case, as NCCL_DEBUG does: "info" and "INFO" are the same level.
std::string lowered(std::string v) {
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

// A word knob's default, as the knob table (and README) gives it.
std::string defaultWord(const char* name) { return lowered(knobInfo(name).defaultText); }

int readLevel() {
  const std::string raw = readString("TORCH_RING_DEBUG");
  const std::string v = lowered(raw);
  if (v.empty() || v == "warn") return kLogWarn;
  if (v == "info") return kLogInfo;
  if (v == "trace") return kLogTrace;
  throw UsageError(strCat("TORCH_RING_DEBUG='", raw, "' must be WARN, INFO or TRACE (any case)"));
}

int readSocketFamily() {
  const std::string raw = readString("TORCH_RING_SOCKET_FAMILY");
  const std::string v = lowered(raw);
  if (v.empty()) return 0;
  if (v == "af_inet") return AF_INET;
  if (v == "af_inet6") return AF_INET6;
  throw UsageError(strCat("TORCH_RING_SOCKET_FAMILY='", raw,
                          "' must be AF_INET or AF_INET6 (any case)"));
}

std::string readTransport() {
  const std::string raw = readString("TORCH_RING_TRANSPORT");
  const std::string v = lowered(raw);
  if (v.empty()) return defaultWord("TORCH_RING_TRANSPORT");
  if (v != "auto" && v != "shm" && v != "tcp") {
    throw UsageError(strCat("TORCH_RING_TRANSPORT='", raw, "' must be auto, shm or tcp (any case)"));
  }
  return v;
}

int64_t readShmBudget() {
  const std::string raw = readString("TORCH_RING_SHM_BUDGET");
  const std::string text = lowered(raw);
  if (text.empty() || text == "auto") return 0;
  char* end = nullptr;
  const double count = std::strtod(text.c_str(), &end);
  const std::string unit(end);
  int64_t scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kb" || unit == "kib") scale = int64_t{1} << 10;
  if (unit == "m" || unit == "mb" || unit == "mib") scale = int64_t{1} << 20;
  if (unit == "g" || unit == "gb" || unit == "gib") scale = int64_t{1} << 30;
  if (end == text.c_str() || scale == 0 || !(count >= 1) || count * scale > 1.0e18) {
    throw UsageError(strCat("TORCH_RING_SHM_BUDGET='", raw, "' must be auto or a size such as "
                            "48MiB, 512K or 2G (units of 1024 bytes)"));
  }
  return static_cast<int64_t>(count * static_cast<double>(scale));
}

std::string readAlgo() {
  const std::string raw = readString("TORCH_RING_ALGO");
  const std::string v = lowered(raw);
  if (v.empty()) return defaultWord("TORCH_RING_ALGO");
  // The words of protocol/algorithms.h's forcible rows, written again here because common/
  // sits below protocol/: a new forcible algorithm adds its word here too (test_knobs.py holds
  // this list, PlanChoice.TheTableOfPlanChoiceH the table's, both to README's).
  if (v != "auto" && v != "ring" && v != "hier_ring" && v != "hier_rd" && v != "hier_radix" &&
      v != "hier_direct") {
    throw UsageError(strCat(
        "TORCH_RING_ALGO='", raw,
        "' must be auto, ring, hier_ring, hier_rd, hier_radix or hier_direct (any case)"));
  }
  return v;
}

std::string readCpuIsa() {
  const std::string raw = readString("TORCH_RING_CPU_ISA");
  const std::string v = lowered(raw);
  if (v.empty()) return defaultWord("TORCH_RING_CPU_ISA");
  if (v != "auto" && v != "baseline" && v != "avx2" && v != "avx512" && v != "neon") {
    throw UsageError(strCat("TORCH_RING_CPU_ISA='", raw,
                            "' must be auto, baseline, avx2, avx512 or neon (any case)"));
  }
  return v;
}

std::string readCpuBind() {
  const std::string raw = readString("TORCH_RING_CPU_BIND");
  const std::string v = lowered(raw);
  if (v.empty()) return defaultWord("TORCH_RING_CPU_BIND");
  if (v != "none" && v != "core" && v != "numa") {
    throw UsageError(strCat("TORCH_RING_CPU_BIND='", raw,
                            "' must be none, core or numa (any case)"));
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

EnvKnobs readEnvKnobs() {
  EnvKnobs k;
  k.slotBytes = readKnob("TORCH_RING_SLOT_BYTES");
  k.slotBytes = (k.slotBytes + 63) / 64 * 64;  // keep every payload 64-byte aligned
  k.slotBytesSet = std::getenv("TORCH_RING_SLOT_BYTES") != nullptr;
  k.slots = static_cast<int>(readKnob("TORCH_RING_SLOTS"));
  k.slotsSet = std::getenv("TORCH_RING_SLOTS") != nullptr;
  k.shmBudget = readShmBudget();
  k.spinMicros = static_cast<int>(readKnob("TORCH_RING_SPIN_US"));
  k.inlineBytes = readKnob("TORCH_RING_INLINE_BYTES");
  k.directBytes = readKnob("TORCH_RING_DIRECT_BYTES");
  k.mailboxBytes = readKnob("TORCH_RING_LL_BYTES");
  k.singleCopyBytes = readKnob("TORCH_RING_SINGLE_COPY_BYTES");
  k.algo = readAlgo();
  k.rdBytes = readKnob("TORCH_RING_RD_BYTES");
  k.shmLink = readString("TORCH_RING_SHM_LINK");
  k.netLink = readString("TORCH_RING_NET_LINK");
  k.debugLevel = readLevel();
  k.debugFile = readString("TORCH_RING_DEBUG_FILE");
  // torch's own knob for its flight recorders' length; ours keeps 64 entries by default, and
  // 0 turns it off, as it turns off torch's and NCCL's.
  k.flightRecorderEntries = static_cast<size_t>(readKnob("TORCH_FR_BUFFER_SIZE"));
  k.stragglerLogSeconds = static_cast<int>(readKnob("TORCH_RING_STRAGGLER_LOG_S"));
  k.linkSilenceMs = readKnob("TORCH_RING_LINK_SILENCE_MS");
  // A live peer's I/O thread sends a heartbeat every 250 ms (transport/tcp/link_liveness.h):
  // a bound under four of them would condemn a peer for one heartbeat delayed by a busy core
  // or a retransmission.
  if (k.linkSilenceMs != 0 && k.linkSilenceMs < 1000) {
    throw UsageError(strCat("TORCH_RING_LINK_SILENCE_MS='", k.linkSilenceMs,
                            "' is too short: 0 (off) or at least 1000 ms (four of the 250 ms "
                            "heartbeats a live peer sends)"));
  }
  k.transport = readTransport();
  k.socketIfname = readString("TORCH_RING_SOCKET_IFNAME");
  k.socketIfnameSource = strCat("TORCH_RING_SOCKET_IFNAME='", k.socketIfname, "'");
  // Jobs moved over from gloo keep working: its variable lists exact interface names.
  const std::string gloo = readString("GLOO_SOCKET_IFNAME");
  if (k.socketIfname.empty() && !gloo.empty()) {
    k.socketIfname = "=" + gloo;
    k.socketIfnameSource = strCat("GLOO_SOCKET_IFNAME='", gloo, "' (exact names)");
  }
  k.socketFamily = readSocketFamily();
  k.cpuIsa = readCpuIsa();
  k.cpuBind = readCpuBind();
  k.cpuSysfs = readString("TORCH_RING_CPU_SYSFS");
  if (k.cpuSysfs.empty()) k.cpuSysfs = knobInfo("TORCH_RING_CPU_SYSFS").defaultText;
  k.masterAddr = readString("MASTER_ADDR");
  return k;
}

}  // namespace ring
