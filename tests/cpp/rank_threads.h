// Runs one function per rank on its own thread and hands back what each rank threw, so that
// tests assert on the main thread (gtest's ASSERT_* only leaves the function it is in).
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace ring {
namespace testing_support {

// Empty string: the rank returned normally; otherwise the exception's message.
struct RankOutcome {
  std::exception_ptr error;
  std::string message() const {
    if (!error) return "";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "non-standard exception";
    }
  }
  bool ok() const { return !error; }
};

inline std::vector<RankOutcome> runRanks(int n, const std::function<void(int rank)>& body) {
  std::vector<RankOutcome> outcomes(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        outcomes[static_cast<size_t>(r)].error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

// True if the exception is of type E (or derived from it).
template <typename E>
bool threw(const RankOutcome& o) {
  if (!o.error) return false;
  try {
    std::rethrow_exception(o.error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace testing_support
}  // namespace ring
