#include "transport/cuda_ipc/peer_info.h"

#include <unistd.h>

#include <cstring>
#include <random>

#include "common/errors.h"

namespace ring {

std::string encodePeerInfo(const std::string& hostId, const CudaPeerInfo& info) {
  static const char kHex[] = "0123456789abcdef";
  const auto* bytes = reinterpret_cast<const unsigned char*>(&info);
  std::string out = hostId + "\n";
  out.reserve(out.size() + 2 * sizeof info);
  for (size_t i = 0; i < sizeof info; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 15]);
  }
  return out;
}

void decodePeerInfo(const std::string& value, std::string* hostId, CudaPeerInfo* info) {
  const size_t nl = value.rfind('\n');
  const size_t hexLen = nl == std::string::npos ? 0 : value.size() - nl - 1;
  if (nl == std::string::npos || hexLen != 2 * sizeof(CudaPeerInfo)) {
    throw CommError(strCat("ring: malformed CUDA peer record of ", value.size(), " bytes (",
                           hexLen, " hex digits, expected ", 2 * sizeof(CudaPeerInfo),
                           "): are all ranks running the same torch_ring_backend build?"));
  }
  auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw CommError(strCat("ring: malformed CUDA peer record: character '", c, "'"));
  };
  auto* bytes = reinterpret_cast<unsigned char*>(info);
  for (size_t i = 0; i < sizeof(CudaPeerInfo); ++i) {
    bytes[i] = static_cast<unsigned char>(digit(value[nl + 1 + 2 * i]) << 4 |
                                          digit(value[nl + 2 + 2 * i]));
  }
  info->problem[sizeof info->problem - 1] = '\0';
  if (info->version != kCudaPeerInfoVersion) {
    throw CommError(strCat("ring: CUDA peer record version ", info->version, ", expected ",
                           kCudaPeerInfoVersion, ": are all ranks running the same build?"));
  }
  *hostId = value.substr(0, nl);
}

PathChoice choosePeerPath(const std::string& myHost, const CudaPeerInfo& me,
                          const std::string& theirHost, const CudaPeerInfo& them,
                          int theirLocalOrdinal, bool canAccessPeer) {
  PathChoice c;
  if (!me.enabled || !them.enabled) {
    c.reason = "TORCH_RING_CUDA_KERNELS=0 on one of the two ranks";
    return c;
  }
  if (!me.ready) {
    c.reason = strCat("this rank's CUDA inbox is not available: ", me.problem);
    return c;
  }
  if (!them.ready) {
    c.reason = strCat("the peer's CUDA inbox is not available: ", them.problem);
    return c;
  }
  const FifoGeometry& a = me.geometry;
  const FifoGeometry& b = them.geometry;
  if (a.channels != b.channels || a.slots != b.slots || a.slotBytes != b.slotBytes) {
    c.reason = strCat("FIFO geometry differs (", a.channels, "x", a.slots, "x", a.slotBytes,
                      " vs ", b.channels, "x", b.slots, "x", b.slotBytes,
                      "): set TORCH_RING_CUDA_CHANNELS/_SLOTS/_SLOT_BYTES alike on every rank");
    return c;
  }
  if (myHost != theirHost) {
    c.reason = "the ranks are on different hosts (CUDA IPC works within one host only)";
    return c;
  }
  const bool sameGpu = std::memcmp(me.uuid, them.uuid, sizeof me.uuid) == 0;
  const bool sameProcess = me.processToken == them.processToken && me.pid == them.pid;
  if (!sameGpu) {
    if (theirLocalOrdinal < 0) {
      // Hidden by CUDA_VISIBLE_DEVICES (one GPU per rank, the SLURM way): a thread of this
      // process could not use it, but another process's memory on it opens through CUDA IPC,
      // which enables peer access as it maps (cudaIpcOpenMemHandle). Whether the two GPUs have
      // a peer path cannot be asked of a GPU this process cannot see: the open tells, and an
      // open that fails declines the link.
      if (sameProcess) {
        c.reason = "the peer's GPU is not visible to this process (CUDA_VISIBLE_DEVICES)";
        return c;
      }
    } else if (!canAccessPeer) {
      c.reason = strCat("no peer access from GPU ", me.device, " to GPU ", theirLocalOrdinal,
                        " (cudaDeviceCanAccessPeer is false: no NVLink/PCIe P2P path)");
      return c;
    }
  }
  if (!sameProcess && !them.exported) {
    c.reason = strCat("the peer could not export its inbox for CUDA IPC: ", them.problem);
    return c;
  }
  c.path = sameProcess ? PeerPath::Direct : PeerPath::Ipc;
  // IPC opens with lazy peer access; a direct pointer to another GPU needs it enabled first.
  c.needsPeerAccess = sameProcess && !sameGpu;
  return c;
}

int ranksSharingGpuInProcess(const std::vector<CudaPeerInfo>& all, const CudaPeerInfo& me) {
  int n = 0;
  for (const CudaPeerInfo& p : all) {
    if (p.ready && p.processToken == me.processToken && p.pid == me.pid &&
        std::memcmp(p.uuid, me.uuid, sizeof me.uuid) == 0) {
      ++n;
    }
  }
  return n;
}

std::string coResidencyProblem(int ranks, int channels, int smCount, int blocksPerSm) {
  const int64_t need = static_cast<int64_t>(ranks) * channels;
  const int64_t room = static_cast<int64_t>(smCount) * blocksPerSm;
  if (need <= room) return {};
  return strCat(ranks, " ranks of this process share one GPU, each running ", channels,
                " ring-kernel blocks that wait for one another: ", need,
                " blocks must be resident at once, but the GPU holds ", room, " (", smCount,
                " SMs x ", blocksPerSm, " blocks). Lower TORCH_RING_CUDA_CHANNELS to at most ",
                room / (ranks > 0 ? ranks : 1), ", or run the ranks as separate processes");
}

uint64_t processToken() {
  static const uint64_t token = [] {
    std::random_device rd;
    uint64_t t = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    return t ^ static_cast<uint64_t>(getpid());
  }();
  return token;
}

}  // namespace ring
