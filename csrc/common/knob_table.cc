#include "common/knob_table.h"

#include <cstdlib>
#include <cstring>

#include "common/env.h"
#include "common/errors.h"

namespace ring {

namespace {

constexpr int64_t kNoRangeLo = 1, kNoRangeHi = 0;  // lo > hi: not an integer knob
constexpr int64_t kTiB = int64_t{1} << 40;

KnobInfo words(const char* name, const char* defaultText, KnobScope scope) {
  return KnobInfo{name, defaultText, scope, 0, kNoRangeLo, kNoRangeHi};
}

KnobInfo integer(const char* name, const char* defaultText, KnobScope scope, int64_t fallback,
                 int64_t lo, int64_t hi) {
  return KnobInfo{name, defaultText, scope, fallback, lo, hi};
}

}  // namespace

const std::vector<KnobInfo>& knobTable() {
  using S = KnobScope;
  static const std::vector<KnobInfo> table = {
      words("TORCH_RING_DEBUG", "WARN", S::PerRank),
      words("TORCH_RING_DEBUG_FILE", "", S::PerRank),
      integer("TORCH_FR_BUFFER_SIZE", "64", S::PerRank, 64, 0, 1000000),
      words("TORCH_RING_FR_DUMP_SIGNAL", "", S::PerRank),
      // torch's variable: unset, the dump after a failure is off and the others go here.
      words("TORCH_FR_DUMP_TEMP_FILE", "/tmp/nccl_trace_rank_", S::PerRank),
      integer("TORCH_RING_STRAGGLER_LOG_S", "0", S::PerRank, 0, 0, 86400),
      words("TORCH_RING_TRANSPORT", "auto", S::EveryRankAlike),
      words("TORCH_RING_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", S::PerRank),
      words("TORCH_RING_SOCKET_FAMILY", "", S::PerRank),
      // 0: off; else at least 1000 (four heartbeats: env.cc).
      integer("TORCH_RING_LINK_SILENCE_MS", "5000", S::PerRank, 5000, 0, 86400000),
      words("TORCH_RING_SECRET", "", S::EveryRankAlike),
      words("TORCH_RING_SECRET_FILE", "", S::EveryRankAlike),
      integer("TORCH_RING_SLOT_BYTES", "262144", S::EveryRankAlike, 256 * 1024, 64,
              64 * 1024 * 1024),
      integer("TORCH_RING_SLOTS", "4", S::EveryRankAlike, 4, 2, 64),
      words("TORCH_RING_SHM_BUDGET", "auto", S::EveryRankAlike),
      // -1: unset, each group chooses (executor/group_setup.cc, chooseSpin).
      integer("TORCH_RING_SPIN_US", "auto", S::PerRank, -1, 0, 10000000),
      integer("TORCH_RING_INLINE_BYTES", "4194304", S::PerRank, 4 * 1024 * 1024, 0, kTiB),
      integer("TORCH_RING_DIRECT_BYTES", "65536", S::EveryRankAlike, 64 * 1024, 0, kTiB),
      integer("TORCH_RING_LL_BYTES", "65536", S::EveryRankAlike, 64 * 1024, 0, 16 * 1024 * 1024),
      // 0 (the default): never. Per rank: a receiver reads lent messages only if its own value
      // is not 0. Off by default: measured slower (docs/notes/single_copy.md).
      integer("TORCH_RING_SINGLE_COPY_BYTES", "0", S::PerRank, 0, 0, kTiB),
      words("TORCH_RING_ALGO", "auto", S::EveryRankAlike),
      integer("TORCH_RING_RD_BYTES", "262144", S::EveryRankAlike, 256 * 1024, 0, kTiB),
      words("TORCH_RING_SHM_LINK", "2e-6,10e9", S::EveryRankAlike),
      words("TORCH_RING_NET_LINK", "25e-6,1.25e9", S::EveryRankAlike),
      words("TORCH_RING_CPU_ISA", "auto", S::PerRank),
      words("TORCH_RING_CPU_BIND", "none", S::PerRank),
      words("TORCH_RING_CPU_SYSFS", "/sys/devices/system/cpu", S::PerRank),
      integer("TORCH_RING_CUDA_KERNELS", "1", S::EveryRankAlike, 1, 0, 1),
      integer("TORCH_RING_CUDA_CHANNELS", "16", S::EveryRankAlike, 16, 1, 32),
      integer("TORCH_RING_CUDA_SLOTS", "8", S::EveryRankAlike, 8, 2, 64),
      integer("TORCH_RING_CUDA_SLOT_BYTES", "131072", S::EveryRankAlike, 128 * 1024, 1,
              64 << 20),
      integer("TORCH_RING_CUDA_BLOCKING_WAIT", "0", S::PerRank, 0, 0, 1),
      integer("TORCH_RING_HOST_BLOCK_THREADS", "8", S::PerRank, 8, 1, 512),
      words("TORCH_RING_CUDA", "auto", S::Build),
      words("TORCH_CUDA_ARCH_LIST", "9.0", S::Build),
      words("TORCH_RING_BUILD_DIR", "build/cmake-<python tag>", S::Build),
  };
  return table;
}

const KnobInfo& knobInfo(const char* name) {
  for (const KnobInfo& k : knobTable()) {
    if (std::strcmp(k.name, name) == 0) return k;
  }
  RING_ASSERT(false, "the knob ", name, " is not in common/knob_table.cc");
  return knobTable().front();  // not reached
}

int64_t readKnob(const char* name) {
  const KnobInfo& k = knobInfo(name);
  RING_ASSERT(k.isInteger(), "the knob ", name, " is not an integer knob");
  return readInt(k.name, k.intDefault, k.lo, k.hi);
}

const char* knobText(const char* name) { return std::getenv(knobInfo(name).name); }

std::string knobTextOrDefault(const char* name) {
  const char* v = knobText(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(knobInfo(name).defaultText);
}

}  // namespace ring
