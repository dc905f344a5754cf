#include "schedule/radix_schedule.h"

#include <algorithm>

#include "common/errors.h"

namespace ring {

int RadixSchedule::product() const {
  int p = 1;
  for (int r : radices) p *= r;
  return p;
}

int RadixSchedule::rounds() const {
  return static_cast<int>(radices.size()) + (folded() > 0 ? 2 : 0);
}

int RadixSchedule::copiesSent() const {
  int c = 0;
  for (int r : radices) c += r - 1;
  return c;
}

namespace {

struct Search {
  int members;
  RadixSchedule best;  // radices empty until a schedule is found
  int bestRounds = 0;
  int bestCopies = 0;
  bool found = false;

  // Radices in non-increasing order (any order gives the same costs, so each multiset once),
  // none above `cap`. A branch stops where one more round cannot beat the best rounds.
  void walk(std::vector<int>& chosen, int product, int copies, int cap) {
    if (2 * static_cast<long long>(product) >= members) {
      const int rounds = static_cast<int>(chosen.size()) + (product < members ? 2 : 0);
      const bool better =
          !found || rounds < bestRounds ||
          (rounds == bestRounds &&
           (copies < bestCopies || (copies == bestCopies && product > best.product())));
      if (better) {
        best.radices = chosen;
        bestRounds = rounds;
        bestCopies = copies;
        found = true;
      }
    }
    if (found && static_cast<int>(chosen.size()) + 1 > bestRounds) return;
    for (int r = std::min(cap, members / product); r >= 2; --r) {
      // The rounds it would take from here to reach half the ranks even at radix r each: a
      // branch that cannot stay within the best rounds is not walked (r only gets smaller).
      if (found) {
        int more = 1;
        for (long long reach = static_cast<long long>(product) * r; 2 * reach < members;
             reach *= r) {
          ++more;
        }
        if (static_cast<int>(chosen.size()) + more > bestRounds) return;
      }
      chosen.push_back(r);
      walk(chosen, product * r, copies + r - 1, r);
      chosen.pop_back();
    }
  }
};

}  // namespace

RadixSchedule radixSchedule(int members, int maxRadix) {
  RING_ASSERT(members >= 1 && maxRadix >= 2, "radix schedule of ", members, " ranks, radix ",
              maxRadix);
  Search s;
  s.members = members;
  s.best.members = members;
  if (members == 1) return s.best;
  std::vector<int> chosen;
  s.walk(chosen, 1, 0, std::min(maxRadix, members));
  return s.best;
}

}  // namespace ring
