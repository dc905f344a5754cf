#include "transport/fingerprint.h"

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
  return s + strCat(", sequence ", f.seq);
}

}  // namespace ring
