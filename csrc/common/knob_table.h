// Every environment variable this project reads, in one table: its name, its default, its
// range (integers), whether every rank of a group must set it alike, and what it means.
//
// Why one table: the knobs are read in several layers (common/env.cc, the CUDA links' geometry,
// the job secret, the dump signal, the dump's path), and a knob whose default or range lived
// only at its read site drifted from README's table. The knobs are read through the table
// (readKnob, knobText, knobTextOrDefault: each asserts the name is in it) or by env.cc's
// readers, which take their defaults from it. tests/python/test_knob_table.py holds README's
// table and every TORCH_RING_* name in csrc/ and setup.py against it, and fails a getenv of a
// table knob or of any TORCH_* name outside knob_table.cc and env.cc, and a read of a table knob
// or of any TORCH_RING_* name through os.environ in the package.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ring {

enum class KnobScope : uint8_t {
  // Each rank may set its own value (logging, where a rank's small calls run, its CPU).
  PerRank,
  // Every rank of a group must set the same value: ranks that differ run different plans or
  // layouts. Each such knob is compared at set-up (the plan settings, the shared-memory and
  // CUDA inbox layouts, the job secret) or, on one host, its difference fails the first call
  // it changes with a collective mismatch naming both plans.
  EveryRankAlike,
  // Read when the package is built, not at run time.
  Build,
};

struct KnobInfo {
  const char* name;
  // The default as README's table writes it ("262144", "auto", "WARN"); "" where unset means
  // off or none.
  const char* defaultText;
  KnobScope scope;
  // Integer knobs: the default and the accepted range (readKnob); lo > hi for other knobs.
  int64_t intDefault = 0;
  int64_t lo = 1;
  int64_t hi = 0;
  bool isInteger() const { return lo <= hi; }
};

// Every knob, in README's order.
const std::vector<KnobInfo>& knobTable();

// The table's entry of `name` (RING_ASSERT: every name asked for is in the table).
const KnobInfo& knobInfo(const char* name);

// An integer knob's value: its default when unset or empty, a UsageError naming the variable
// when it is not an integer in its range (readInt with the table's default and range).
int64_t readKnob(const char* name);

// A knob's text as the environment holds it: nullptr where unset ("" where set but empty), for
// knobs whose unset and empty differ (the job secret) or that are off unless set (the dump after
// a failure).
const char* knobText(const char* name);

// A knob's text, or the table's default where it is unset or empty.
std::string knobTextOrDefault(const char* name);

}  // namespace ring
