// The receiver's check of a message header (protocol/message_header.h, verifyHeader): its
// contract is the header's own comment: a header passes only with the right magic, the same
// fingerprint, the expected sender, message index and size; any one of them different throws a
// CommError that names what was expected and what came. Each field is changed alone here, so a
// check that skips any one of them (the inline fast path compares them all) fails a case.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "protocol/message_header.h"

namespace ring {
namespace {

constexpr int kMe = 2;
constexpr int kSender = 1;
constexpr int64_t kStep = 5;
constexpr int64_t kBytes = 4096;

Fingerprint expectedFingerprint() {
  return makeFingerprint(Collective::AllReduce, 17, 1024, DType::Float32, RedOp::Sum, -1);
}

// verifyHeader's message for `h`, or "" when it passed.
std::string refusal(const MessageHeader& h) {
  try {
    verifyHeader(h, kMe, kSender, kStep, kBytes, expectedFingerprint());
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

TEST(MessageHeader, TheHeaderItsSenderMadePasses) {
  EXPECT_EQ(refusal(makeHeader(kSender, kStep, kBytes, expectedFingerprint())), "");
}

TEST(MessageHeader, EachFieldThatDiffersIsRefusedWithBothSides) {
  struct Case {
    const char* what;
    std::function<void(MessageHeader&)> change;
    std::vector<std::string> named;  // words the refusal must carry
  };
  const std::vector<Case> cases = {
      {"magic", [](MessageHeader& h) { h.magic ^= 1u; }, {"corrupt message", "rank 1"}},
      {"fingerprint's count", [](MessageHeader& h) { h.fingerprint.count = 1025; },
       {"collective mismatch", "1025", "1024"}},
      {"fingerprint's sequence", [](MessageHeader& h) { h.fingerprint.seq = 18; },
       {"collective mismatch", "sequence 18", "sequence 17"}},
      {"fingerprint's algorithm", [](MessageHeader& h) { h.fingerprint.algorithm = Algorithm::Direct; },
       {"collective mismatch", "direct"}},
      // A corrupt byte where the algorithm's number is: named as a number, never a row read
      // past the table's end (under ASan/valgrind that read would show).
      {"fingerprint's algorithm outside the table",
       [](MessageHeader& h) { h.fingerprint.algorithm = static_cast<Algorithm>(200); },
       {"collective mismatch", "unknown algorithm 200"}},
      {"sender", [](MessageHeader& h) { h.sender = 0; }, {"from rank 1", "from rank 0"}},
      {"message index", [](MessageHeader& h) { h.step = kStep + 1; },
       {"expected message 5", "got message 6"}},
      {"size", [](MessageHeader& h) { h.payloadBytes = kBytes - 64; },
       {"4096 bytes", "4032 bytes"}},
  };
  for (const Case& c : cases) {
    MessageHeader h = makeHeader(kSender, kStep, kBytes, expectedFingerprint());
    c.change(h);
    const std::string text = refusal(h);
    EXPECT_NE(text, "") << c.what << " differs, yet the header passed";
    for (const std::string& word : c.named) {
      EXPECT_NE(text.find(word), std::string::npos) << c.what << ": '" << word << "' not in: " << text;
    }
    EXPECT_NE(text.find("rank 2"), std::string::npos) << c.what << ": the receiver unnamed: " << text;
  }
}

}  // namespace
}  // namespace ring
