#include "transport/mixed_transport.h"

#include "common/errors.h"

namespace ring {

MixedTransport::MixedTransport(int rank, int size, std::unique_ptr<Transport> local,
                               std::unique_ptr<Transport> remote, std::vector<char> viaLocal)
    : rank_(rank),
      size_(size),
      local_(std::move(local)),
      remote_(std::move(remote)),
      viaLocal_(std::move(viaLocal)) {
  RING_ASSERT(local_ && remote_ && static_cast<int>(viaLocal_.size()) == size, "size ", size);
}

// TCP first: its I/O thread flushes the last frames to the other hosts and says goodbye; the
// shared-memory side has no shutdown step of its own.
MixedTransport::~MixedTransport() {
  remote_.reset();
  local_.reset();
}

Transport& MixedTransport::route(int peer) const {
  RING_ASSERT(peer >= 0 && peer < size_ && peer != rank_, "peer ", peer);
  return viaLocal_[static_cast<size_t>(peer)] ? *local_ : *remote_;
}

void MixedTransport::checkHealth(int peer) {
  // Both: the failure that matters may have been recorded by either side. The transport that
  // does not carry `peer`'s links only reports group-wide failures, so that a lost TCP peer
  // does not fail a wait on a shared-memory peer that can still complete (and vice versa).
  if (peer < 0) {
    local_->checkHealth(peer);
    remote_->checkHealth(peer);
    return;
  }
  const bool local = viaLocal_[static_cast<size_t>(peer)] != 0;
  local_->checkHealth(local ? peer : kHealthGroupOnly);
  remote_->checkHealth(local ? kHealthGroupOnly : peer);
}

void MixedTransport::markBroken(const std::string& reason) {
  // Shared memory tells this host's ranks; TCP tells every rank on the other hosts.
  local_->markBroken(reason);
  remote_->markBroken(reason);
}

void MixedTransport::abortLocal(const std::string& reason) {
  local_->abortLocal(reason);
  remote_->abortLocal(reason);
}

std::string MixedTransport::describeLink(int peer) const { return route(peer).describeLink(peer); }

void MixedTransport::setStreamCopies(bool on) {
  // The shared-memory side acts on it; the TCP side's links never stream.
  Transport::setStreamCopies(on);
  local_->setStreamCopies(on);
  remote_->setStreamCopies(on);
}

}  // namespace ring
