#include "protocol/message_header.h"

#include "common/errors.h"

namespace ring {

std::string describe(const Fingerprint& f) {
  std::string s = strCat(collectiveName(f.collective), " of ", f.count, " ", dtypeName(f.dtype));
  switch (f.collective) {
    case Collective::AllReduce:
    case Collective::ReduceScatter:
      s += strCat(" (op ", redOpName(f.op), ")");
      break;
    case Collective::Reduce:
      s += strCat(" (op ", redOpName(f.op), ", root ", f.root, ")");
      break;
    case Collective::Broadcast:
    case Collective::Gather:
    case Collective::Scatter:
      s += strCat(" (root ", f.root, ")");
      break;
    case Collective::PointToPoint:
      s += strCat(" (tag ", f.root, ")");
      break;
    default:
      break;
  }
  s += strCat(", sequence ", f.seq);
  // A received header's number may be any byte: one outside the table is named, not read.
  const size_t algorithm = static_cast<size_t>(f.algorithm);
  s += algorithm < kAlgorithmCount ? std::string(kAlgorithms[algorithm].described)
                                   : strCat(", unknown algorithm ", algorithm);
  return s;
}

void refuseHeader(const MessageHeader& h, int myRank, int expectedSender, int64_t expectedStep,
                  int64_t expectedBytes, const Fingerprint& expected) {
  if (h.magic != kMessageMagic) {
    throw CommError(strCat("ring: rank ", myRank, " received a corrupt message from rank ",
                           expectedSender, " (bad magic 0x", std::hex, h.magic, std::dec,
                           ") while running ", describe(expected)));
  }
  if (h.fingerprint != expected) {
    throw CommError(strCat("ring: collective mismatch: rank ", h.sender, " called ",
                           describe(h.fingerprint), ", rank ", myRank, " called ",
                           describe(expected),
                           ". Every rank of a group must issue the same collectives, with the "
                           "same sizes, dtypes, ops and roots, in the same order."));
  }
  if (h.sender != expectedSender || h.step != expectedStep || h.payloadBytes != expectedBytes) {
    throw CommError(strCat("ring: rank ", myRank, " running ", describe(expected),
                           " expected message ", expectedStep, " of ", expectedBytes,
                           " bytes from rank ", expectedSender, " but got message ", h.step,
                           " of ", h.payloadBytes, " bytes from rank ", h.sender,
                           ": the ranks disagree about the shape of this collective"));
  }
  // Only reached if called for a header that matches: never returns, as declared.
  throw CommError(strCat("ring: rank ", myRank, ": internal error: a message from rank ",
                         expectedSender, " refused though it matches ", describe(expected)));
}

}  // namespace ring
