// One ring over two transports: shared memory to the ranks of this host, TCP to the others.
// Each peer's links belong to exactly one of them; health, breaking and aborting go to both,
// since a failure anywhere in the group ends the collective everywhere.
#pragma once

#include <memory>
#include <vector>

#include "transport/link.h"

namespace ring {

class MixedTransport : public Transport {
 public:
  // viaLocal[r]: rank r is reached through `local` (else through `remote`).
  MixedTransport(int rank, int size, std::unique_ptr<Transport> local,
                 std::unique_ptr<Transport> remote, std::vector<char> viaLocal);
  ~MixedTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  SendLink& sendLink(Channel ch, int peer) override { return route(peer).sendLink(ch, peer); }
  RecvLink& recvLink(Channel ch, int peer) override { return route(peer).recvLink(ch, peer); }
  void checkHealth(int peer) override;
  void markBroken(const std::string& reason) override;
  void abortLocal(const std::string& reason) override;
  std::string describeLink(int peer) const override;
  void setStreamCopies(bool on) override;

 private:
  Transport& route(int peer) const;
  int rank_;
  int size_;
  std::unique_ptr<Transport> local_;
  std::unique_ptr<Transport> remote_;
  std::vector<char> viaLocal_;
};

}  // namespace ring
