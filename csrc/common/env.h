// The values of the environment knobs, read and checked once per process. The table of every
// knob (name, default, range, whether ranks must agree) is common/knob_table.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ring {

struct EnvKnobs {
  // Bytes of payload in one FIFO slot (TORCH_RING_SLOT_BYTES, default 256 KiB): the pipeline
  // segment. Small enough to stay in L2 between the sender's copy and the receiver's reduce.
  int64_t slotBytes;
  // TORCH_RING_SLOT_BYTES was set: groups whose links are all TCP then keep it rather than
  // their larger default (communicator.cc, kTcpSlotBytes).
  bool slotBytesSet;
  // Slots per FIFO (TORCH_RING_SLOTS, default 4): how far a sender may run ahead.
  int slots;
  // TORCH_RING_SLOTS was set: the shared-memory fit keeps both slot settings as given
  // (transport/shm/shm_footprint.h), as it does when TORCH_RING_SLOT_BYTES was.
  bool slotsSet;
  // TORCH_RING_SHM_BUDGET = auto | a size (48MiB, 512K, 2G: units of 1024): what the inboxes of
  // one host's ranks may take of /dev/shm together; 0 = auto (16 MiB per local rank, at most
  // half of the free space). transport/shm/shm_footprint.h fits the slots to it.
  int64_t shmBudget;
  // Microseconds a waiter busy-polls before it sleeps on a futex (TORCH_RING_SPIN_US; -1 when
  // unset: then each group chooses, see chooseSpin in executor/group_setup.cc). With more
  // ranks than cores, long spinning starves the rank that would make progress.
  int spinMicros;
  // TORCH_RING_INLINE_BYTES (default 4 MiB; 0: never): a host collective of at most this many
  // bytes runs on the caller's thread when the group is idle and every peer has issued it
  // (backend/work_queue.h), instead of on the group's worker.
  int64_t inlineBytes;
  // TORCH_RING_DIRECT_BYTES (default 64 KiB, 0: never): in a group whose ranks all share
  // memory, an all_reduce or all_gather runs in one direct round instead of around
  // the ring (executor/direct_collectives.h) when what a rank sends in that round (its
  // message, once to each of the n-1 others) is at most this many bytes and the message fits
  // one slot. Every rank must set the same value.
  int64_t directBytes;
  // TORCH_RING_LL_BYTES (default 64 KiB, at most 16 MiB; 0: never): in a group whose ranks all
  // share memory, a direct round's messages of at most this many bytes, and every barrier, go
  // through each rank's mailbox, flagged cache line by cache line (transport/link.h, Mailbox),
  // instead of through the FIFOs. Every rank must set the same value (checked at set-up).
  int64_t mailboxBytes;
  // TORCH_RING_SINGLE_COPY_BYTES (default 0: never): a ring message of at least this many
  // bytes to a peer on this host whose data stays as it is until the call ends goes lent: the
  // peer reads it straight from this rank's buffer (process_vm_readv) instead of from a slot
  // this rank copied it into (transport/link.h, SendLink::lendsFrom). Where a peer may not read
  // this process's memory (ptrace rules, a seccomp profile), set-up finds that and its messages
  // go through slots, said in the set-up log.
  int64_t singleCopyBytes;
  // TORCH_RING_ALGO = auto | ring | hier_ring | hier_rd | hier_radix | hier_direct, any case
  // (default auto): the plan of an all_reduce in a group that spans hosts
  // (executor/plan_choice.h). ring: the flat ring over every rank; hier_*: two levels
  // (executor/hier_all_reduce.h) with a ring, recursive doubling, rounds of up to
  // 1 + TORCH_RING_DIRECT_BYTES / bytes hosts, or a direct round between hosts; auto:
  // plan_choice.h's table.
  // Every rank must set the same (compared at set-up).
  std::string algo;
  // TORCH_RING_RD_BYTES (default 256 KiB): auto's largest all_reduce (bytes of the whole
  // buffer) that goes by recursive doubling between hosts.
  int64_t rdBytes;
  // TORCH_RING_SHM_LINK / TORCH_RING_NET_LINK = "ALPHA_SECONDS,BYTES_PER_SECOND" (defaults
  // 2e-6,10e9 and 25e-6,1.25e9: shared memory and 10 GbE): one step's latency and bandwidth
  // inside a host and between hosts, with which auto prices the flat ring against two levels
  // for messages past TORCH_RING_RD_BYTES (schedule/ring_costs.h); parsed and checked at set-up
  // (executor/plan_choice.h), compared between ranks in groups of several hosts. Empty: unset.
  std::string shmLink;
  std::string netLink;
  // TORCH_RING_DEBUG = WARN | INFO | TRACE, any case (default WARN).
  int debugLevel;
  // TORCH_RING_DEBUG_FILE (NCCL_DEBUG_FILE's counterpart): where log lines go instead of stderr,
  // with %h, %p and %r expanded (common/logging.h); empty: stderr.
  std::string debugFile;
  // TORCH_FR_BUFFER_SIZE (torch's name): collectives each group's flight recorder keeps (64;
  // 0: off).
  size_t flightRecorderEntries;
  // TORCH_RING_STRAGGLER_LOG_S: every this many seconds, rank 0 of each group logs (at INFO)
  // which ranks the others waited for (executor/straggler_stats.h); 0, the default: never.
  int stragglerLogSeconds;
  // TORCH_RING_LINK_SILENCE_MS: a TCP peer from which nothing (not even its I/O thread's
  // heartbeat) has come for this long is dead, frozen or cut off: its links fail naming it
  // (transport/tcp/link_liveness.h); a peer on this host whose process heartbeat has stood
  // still this long is stopped or starved (transport/shm/heartbeat.h). 5000 by default; 0:
  // only the group's timeout ends a wait.
  int64_t linkSilenceMs;
  // TORCH_RING_TRANSPORT = auto | shm | tcp, any case (default auto): how ranks are linked. auto: shared
  // memory between ranks of one host, TCP between hosts, in the same ring; tcp: TCP for every
  // link (to test the TCP path on one host); shm: shared memory only (an error if the ranks
  // span hosts). CommOptions::transport overrides it.
  std::string transport;
  // TORCH_RING_SOCKET_IFNAME (NCCL_SOCKET_IFNAME's syntax: eth0 | eth0,eth1 | =eth0 | ^docker;
  // transport/tcp/interface_filter.h): the interfaces whose address (IPv4, else IPv6) the TCP
  // transport may listen on. Unset: GLOO_SOCKET_IFNAME's exact names, as "=" + its value.
  // Neither: the local address that reaches MASTER_ADDR, else an address the host name
  // resolves to, else 127.0.0.1 (transport/tcp/net_address.h). Never a wildcard; the port is
  // always chosen by the kernel.
  std::string socketIfname;
  // Where socketIfname came from, for messages: "TORCH_RING_SOCKET_IFNAME='^docker'" or
  // "GLOO_SOCKET_IFNAME='eth0' (exact names)".
  std::string socketIfnameSource;
  // TORCH_RING_SOCKET_FAMILY = AF_INET | AF_INET6, any case (NCCL_SOCKET_FAMILY's words): only
  // that family's addresses of the interfaces above; unset: IPv4 first, then IPv6. 0 = any.
  int socketFamily;
  // TORCH_RING_CPU_ISA = auto | baseline | avx2 | avx512 | neon, any case (default auto;
  // ATEN_CPU_CAPABILITY's counterpart): which build of the host reduction loops runs
  // (reduce/reduce_table.h). auto: the widest the CPU has (AVX-512 F/BW/DQ/VL, else AVX2 with
  // F16C; on aarch64 NEON); baseline: the portable one (to compare, or to rule the vector
  // builds out); a build the CPU lacks: an error at set-up.
  std::string cpuIsa;
  // TORCH_RING_CPU_BIND = none | core | numa, any case (default none): core binds the thread
  // that creates the process's first group (the one that runs its small collectives) to a CPU
  // of its own among the host's ranks, as mpirun --bind-to core does (common/cpu_binding.h);
  // numa binds it to the CPUs of a NUMA node and allocates the rank's inbox there
  // (common/numa_topology.h, docs/numa.md).
  std::string cpuBind;
  // TORCH_RING_CPU_SYSFS = the kernel's CPU tree (default /sys/devices/system/cpu): where set-up
  // reads which last-level cache each rank's CPUs use (common/cache_topology.h), and beside
  // which it reads the NUMA nodes (its sibling folder "node"). Tests point it at a made-up tree.
  std::string cpuSysfs;
  // MASTER_ADDR (set by torchrun, not ours; read only to pick the default interface above).
  std::string masterAddr;
};

enum LogLevel { kLogWarn = 0, kLogInfo = 1, kLogTrace = 2 };

// Every knob read from the environment now (a UsageError naming a bad one); env() keeps the
// first reading.
EnvKnobs readEnvKnobs();

// Read once per process; later changes to the environment are not seen. Inline: log lines and
// calls ask on every collective, and after the first reading the answer is one guard check.
inline const EnvKnobs& env() {
  static const EnvKnobs knobs = readEnvKnobs();
  return knobs;
}

// An integer knob: `fallback` when unset or empty; a UsageError naming the variable when it is
// not an integer in [lo, hi]. Every knob of the project is read through this.
int64_t readInt(const char* name, int64_t fallback, int64_t lo, int64_t hi);

}  // namespace ring
