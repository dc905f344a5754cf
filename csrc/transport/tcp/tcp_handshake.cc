#include "transport/tcp/tcp_handshake.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"
#include "transport/tcp/socket_util.h"

namespace ring {

ConnectOutcome authenticateAsConnector(int fd, const HandshakeIdentity& me, int peer, int channel,
                                       Clock::time_point deadline, std::string* detail) {
  HandshakeMsg hello{};
  hello.magic = kHandshakeMagic;
  hello.version = kWireVersion;
  hello.kind = static_cast<uint32_t>(HandshakeKind::Hello);
  hello.channel = channel;
  hello.groupHash = me.groupHash;
  hello.srcRank = me.rank;
  hello.dstRank = peer;
  hello.slotBytes = me.slotBytes;
  fillRandom(hello.connectorNonce, kNonceBytes);
  if (int e = writeFull(fd, &hello, sizeof hello, deadline)) {
    *detail = strCat("sending the hello failed: ", std::strerror(e));
    return ConnectOutcome::ClosedEarly;
  }
  uint8_t raw[sizeof(HandshakeMsg)];
  if (int e = readFull(fd, raw, sizeof raw, deadline)) {
    if (e == ETIMEDOUT) {
      throw TimeoutError(strCat("rank ", me.rank, ": rank ", peer, " at ", peerAddress(fd),
                                " did not answer the TCP handshake in time"));
    }
    *detail = strCat("rank ", peer, " at ", peerAddress(fd),
                     " closed the connection during the handshake (", std::strerror(e),
                     "); its log says why (different job, TORCH_RING_SLOT_BYTES, version?)");
    return ConnectOutcome::ClosedEarly;
  }
  HandshakeMsg reply;
  std::string why;
  if (!parseHandshake(raw, sizeof raw, HandshakeKind::Reply, &reply, &why) ||
      !checkReply(reply, hello, me.key, &why)) {
    throw CommError(strCat("rank ", me.rank, ": TCP handshake with rank ", peer, " at ",
                           peerAddress(fd), " failed: ", why));
  }
  HandshakeMsg confirm = reply;
  confirm.kind = static_cast<uint32_t>(HandshakeKind::Confirm);
  Sha256Digest proof = handshakeProof(me.key, ProofRole::Connector, confirm);
  std::memcpy(confirm.proof, proof.data(), proof.size());
  if (int e = writeFull(fd, &confirm, sizeof confirm, deadline)) {
    throw CommError(strCat("rank ", me.rank, ": sending the handshake confirm to rank ", peer,
                           " at ", peerAddress(fd), " failed: ", std::strerror(e)));
  }
  return ConnectOutcome::Authenticated;
}

PendingHandshake::Step PendingHandshake::onReadable(const HandshakeIdentity& me,
                                                    const Admit& admit, std::string* error) {
  while (got_ < sizeof buffer_) {
    // Never read past the current message: the frames that follow belong to the connection.
    ssize_t n = ::recv(fd_, buffer_ + got_, sizeof buffer_ - got_, 0);
    if (n > 0) {
      got_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::NeedMore;
    if (n < 0 && errno == EINTR) continue;
    *error = n == 0 ? strCat("closed after ", got_, " bytes of the ",
                             helloDone_ ? "confirm" : "hello")
                    : strCat("read failed: ", std::strerror(errno));
    return Step::Rejected;
  }
  got_ = 0;
  if (!helloDone_) {
    if (!parseHandshake(buffer_, sizeof buffer_, HandshakeKind::Hello, &hello_, error) ||
        !checkHello(hello_, HelloExpectations{me.groupHash, me.rank, me.groupSize, me.slotBytes},
                    error) ||
        !admit(hello_.srcRank, hello_.channel, error)) {
      return Step::Rejected;
    }
    reply_ = hello_;
    reply_.kind = static_cast<uint32_t>(HandshakeKind::Reply);
    fillRandom(reply_.acceptorNonce, kNonceBytes);
    Sha256Digest proof = handshakeProof(me.key, ProofRole::Acceptor, reply_);
    std::memcpy(reply_.proof, proof.data(), proof.size());
    // 136 bytes into the empty send buffer of a fresh socket: a short write means trouble.
    ssize_t n = ::send(fd_, &reply_, sizeof reply_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(sizeof reply_)) {
      *error = strCat("could not send the reply (", n < 0 ? std::strerror(errno) : "short write",
                      ")");
      return Step::Rejected;
    }
    helloDone_ = true;
    return Step::NeedMore;
  }
  HandshakeMsg confirm;
  if (!parseHandshake(buffer_, sizeof buffer_, HandshakeKind::Confirm, &confirm, error) ||
      !checkConfirm(confirm, reply_, me.key, error)) {
    return Step::Rejected;
  }
  return Step::Authenticated;
}

}  // namespace ring
