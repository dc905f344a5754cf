// The store as one incarnation of a group sees it: fresh keys, and a shared failure notice.
//
// Why a namespace per incarnation: torch hands a group its store prefixed by the group's name,
// and names repeat - destroy_process_group() resets the counter behind "0", "1", ... - while
// the store itself can outlive the group (under torchrun every rank uses the agent's store for
// the whole run; otherwise a TCPStore server lives on while anything still holds it, e.g. a
// subgroup object of the previous run still referenced from Python, and init reuses it). The
// keys of the previous incarnation are then still there, and a rank that reads them gets the
// old token, old segment names and the addresses of listeners that belong to the previous group
// (seen as "duplicate" refusals and set-up timeouts).
//
// So each set-up takes a number from a counter per (group size, group rank) slot under the
// group's prefix, and its keys live under "size x number". The ranks agree without talking:
// every incarnation of a group name with n ranks increments each of its n slots once, whichever
// process holds the slot (a later group "1" may have other members than an earlier one), so all
// slots of one incarnation read the same number; a name reused with another size counts apart,
// and its keys differ by the size.
//
// Why a failure notice: set-up is collective, and a rank whose set-up fails would otherwise
// leave the others waiting for its keys or connections until the group timeout (10 minutes by
// default for new_group). A failing rank writes its reason under the incarnation; every wait of
// the others polls for it and fails at once with that reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/store.h"

namespace ring {

class SetupKeys : public Store {
 public:
  // Takes the next incarnation number of slot `rank` of a group of `size` on this store.
  SetupKeys(Store& base, int rank, int size);

  void set(const std::string& key, const std::string& value) override;
  // Waits for the key, but fails early if a rank reported a set-up failure.
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  // The same for many keys at once: one poll asks for all of them (set-up reads a key of
  // every rank; store.h says why in one call).
  std::vector<std::string> getAll(const std::vector<std::string>& keys,
                                  std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::string& key) override;
  bool checkAll(const std::vector<std::string>& keys) override;

  int64_t incarnation() const { return incarnation_; }
  const std::string& prefix() const { return prefix_; }

 private:
  Store& base_;
  int rank_;
  int64_t incarnation_;
  std::string prefix_;

  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;
};

// Best effort: tells the other ranks of this incarnation why this rank's set-up failed.
void reportSetupFailure(Store& store, int rank, const std::string& reason);
// The first failure some rank reported, or "" if none.
std::string reportedSetupFailure(Store& store);
// Throws CommError("<what stops>: <the reported failure>") if some rank reported one.
void throwIfSetupFailed(Store& store, const std::string& whatStops);

}  // namespace ring
