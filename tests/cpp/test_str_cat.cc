// strCat promises the text that operator<< would print (common/errors.h), without a stream for
// strings and numbers. The contract is the standard library's: every case is checked against
// an std::ostringstream fed the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>

#include "common/errors.h"

namespace ring {
namespace {

template <typename... Args>
std::string streamed(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

#define EXPECT_LIKE_STREAM(...) EXPECT_EQ(strCat(__VA_ARGS__), streamed(__VA_ARGS__))

TEST(StrCat, Integers) {
  EXPECT_LIKE_STREAM(0, -1, 42);
  EXPECT_LIKE_STREAM(std::numeric_limits<int16_t>::min(), std::numeric_limits<uint16_t>::max());
  EXPECT_LIKE_STREAM(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  EXPECT_LIKE_STREAM(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  EXPECT_LIKE_STREAM(std::numeric_limits<uint64_t>::max(), size_t{7}, 3u, -5L, 9ULL);
}

TEST(StrCat, FloatingPointAsDefaultStream) {
  for (double v : {0.0, -0.0, 0.1, 1.5, -2.25, 1.0 / 3.0, 123456.0, 1234567.0, 1e-5, 1.2345e-7,
                   1e300, -1e-300, 5e-324, std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    EXPECT_LIKE_STREAM(v);
  }
  EXPECT_LIKE_STREAM(std::nan(""));
  EXPECT_LIKE_STREAM(0.1f, 3.0f, -1e-8f, std::numeric_limits<float>::max());
  EXPECT_LIKE_STREAM(1.0L / 3.0L);  // long double: through the stream
}

TEST(StrCat, CharactersAndBytesPrintAsCharacters) {
  EXPECT_LIKE_STREAM('a', 'Z');
  EXPECT_LIKE_STREAM(static_cast<int8_t>('x'), static_cast<uint8_t>('y'),
                     static_cast<signed char>('z'), static_cast<unsigned char>('w'));
}

TEST(StrCat, Strings) {
  const std::string s = "a string";
  const std::string_view v = "a view";
  const char* p = "a pointer";
  EXPECT_LIKE_STREAM("literal ", s, " ", v, " ", p);
  EXPECT_LIKE_STREAM(std::string(), "", std::string(100, 'q'));
  // A null C string: the stream prints nothing (and sets badbit, which strCat ignores).
  const char* null = nullptr;
  EXPECT_EQ(strCat("[", null, "]"), "[]");
}

TEST(StrCat, OtherTypesGoThroughTheStream) {
  int x = 0;
  const void* address = &x;
  EXPECT_LIKE_STREAM(true, false, address);
  std::ostringstream os;
  os << std::hex << 255;  // a caller's own stream state does not leak into strCat
  EXPECT_EQ(strCat(255), "255");
}

TEST(StrCat, ManipulatorsReachTheArgumentsAfterThem) {
  // As the messages about a bad magic number or a file's mode use them.
  EXPECT_LIKE_STREAM("magic 0x", std::hex, 0xfeedu, std::dec, ", then ", 10);
  EXPECT_LIKE_STREAM("mode 0", std::oct, 0644, " and ", 1.5);
  EXPECT_EQ(strCat("mode 0", std::oct, 0644), "mode 0644");
}

TEST(StrCat, MixedMessage) {
  EXPECT_LIKE_STREAM("ring: all_reduce (sequence ", uint64_t{17}, ") on rank ", 3, " took ",
                     0.0125, " ms; ", 1024, " x ", std::string("float32"));
}

}  // namespace
}  // namespace ring
