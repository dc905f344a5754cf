// Addresses as the TCP transport publishes and reads them, IPv4 and IPv6, and the choice of
// the address to listen on.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "transport/tcp/interface_filter.h"
#include "transport/tcp/net_address.h"
#include "transport/tcp/socket_util.h"

#include <unistd.h>

namespace ring {
namespace {

TEST(NetAddress, JoinAndSplitRoundTrip) {
  for (const std::string ip : {"10.0.0.2", "fd00::2", "::1", "fe80::1%eth0"}) {
    std::string joined = joinHostPort(ip, 41234), back;
    int port = 0;
    splitHostPort(joined, "test", &back, &port);
    EXPECT_EQ(back, ip) << joined;
    EXPECT_EQ(port, 41234) << joined;
  }
  EXPECT_EQ(joinHostPort("10.0.0.2", 80), "10.0.0.2:80");
  EXPECT_EQ(joinHostPort("fd00::2", 80), "[fd00::2]:80");
}

TEST(NetAddress, MalformedAddressesAreRefusedWithTheText) {
  for (const std::string bad : {"fd00::2:80", "[::1]", "[]:80", "1.2.3.4:0", "1.2.3.4:70000",
                                ":80", "1.2.3.4:", "[::1]:x", "[::1]:80x", "nothing", ""}) {
    std::string ip;
    int port = 0;
    try {
      splitHostPort(bad, "rank 3", &ip, &port);
      ADD_FAILURE() << "accepted '" << bad << "' as " << ip << " port " << port;
    } catch (const CommError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("'" + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("rank 3"), std::string::npos) << what;
    }
  }
}

TEST(NetAddress, ParsesNumericAddressesOnly) {
  SocketAddress a;
  ASSERT_TRUE(parseNumericAddress("127.0.0.1", 5, &a));
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(formatIp(a.get(), a.length), "127.0.0.1");
  ASSERT_TRUE(parseNumericAddress("fd00::2", 5, &a));
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(formatIp(a.get(), a.length), "fd00::2");
  EXPECT_FALSE(parseNumericAddress("localhost", 5, &a));  // never a name look-up
  EXPECT_FALSE(parseNumericAddress("10.0.0.300", 5, &a));
}

TEST(NetAddress, ListenAddressFollowsTheMasterAddressFamily) {
  std::string why;
  EXPECT_EQ(chooseListenAddress(ListenChoice{"", "", 0, "127.0.0.1"}, &why), "127.0.0.1");
  EXPECT_NE(why.find("MASTER_ADDR=127.0.0.1"), std::string::npos) << why;
  int port = 0;
  bool ipv6 = true;
  try {
    close(listenOn("::1", &port));
  } catch (const RingError&) {
    ipv6 = false;
  }
  if (ipv6) EXPECT_EQ(chooseListenAddress(ListenChoice{"", "", 0, "::1"}, &why), "::1");
  // An interface with both families gives its IPv4 address.
  EXPECT_EQ(chooseListenAddress(ListenChoice{"lo", "TORCH_RING_SOCKET_IFNAME='lo'", 0, "::1"}, &why),
            "127.0.0.1");
  EXPECT_NE(why.find("interface lo, chosen by TORCH_RING_SOCKET_IFNAME='lo'"), std::string::npos)
      << why;
}

TEST(NetAddress, UnknownInterfaceListsTheOnesThatExist) {
  std::string why;
  try {
    chooseListenAddress(ListenChoice{"nosuchif0", "TORCH_RING_SOCKET_IFNAME='nosuchif0'", 0, ""},
                        &why);
    FAIL() << "expected a usage error";
  } catch (const UsageError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("TORCH_RING_SOCKET_IFNAME='nosuchif0' matches no interface"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("lo (127.0.0.1)"), std::string::npos) << what;
  }
}

TEST(NetAddress, NeverListensOnTheWildcard) {
  int port = 0;
  EXPECT_NO_THROW(close(listenOn("127.0.0.1", &port)));
  EXPECT_GT(port, 0);
  // The rule lives in chooseListenAddress: a concrete address in every branch.
  std::string why;
  for (const std::string master : {"", "127.0.0.1", "::1"}) {
    std::string ip = chooseListenAddress(ListenChoice{"", "", 0, master}, &why);
    EXPECT_NE(ip, "0.0.0.0") << master;
    EXPECT_NE(ip, "::") << master;
  }
}

// NCCL_SOCKET_IFNAME's documented forms (and HCCL's, which copies them): a prefix list,
// "=" for exact names, "^" to exclude, "^=" to exclude exact names.
TEST(InterfaceFilter, NcclSyntax) {
  auto admits = [](const std::string& spec, const std::string& name) {
    return InterfaceFilter::parse(spec, "TEST").matches(name);
  };
  EXPECT_TRUE(admits("eth", "eth0"));
  EXPECT_TRUE(admits("eth", "eth1"));
  EXPECT_FALSE(admits("eth", "ens3"));
  EXPECT_TRUE(admits("eth,enp", "enp0s1"));
  EXPECT_TRUE(admits("=eth0", "eth0"));
  EXPECT_FALSE(admits("=eth0", "eth01"));
  EXPECT_FALSE(admits("eth0", "eth"));
  EXPECT_TRUE(admits("=eth0,enp0", "enp0"));
  EXPECT_FALSE(admits("^docker", "docker0"));
  EXPECT_TRUE(admits("^docker", "eth0"));
  EXPECT_FALSE(admits("^docker,lo", "lo"));
  EXPECT_FALSE(admits("^=docker0", "docker0"));
  EXPECT_TRUE(admits("^=docker0", "docker01"));
  // Empty entries are ignored; a spec that names nothing is an error naming its source.
  EXPECT_TRUE(admits("eth0,,", "eth0"));
  for (const std::string bad : {"", "^", "=", "^=", ",", "^,"}) {
    try {
      InterfaceFilter::parse(bad, "TORCH_RING_SOCKET_IFNAME='" + bad + "'");
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("names no interface"), std::string::npos) << e.what();
    }
  }
}

TEST(InterfaceFilter, ListOrderIsThePreference) {
  InterfaceFilter f = InterfaceFilter::parse("ib,eth", "TEST");
  EXPECT_LT(f.preference("ib0"), f.preference("eth0"));
  EXPECT_EQ(f.preference("lo"), f.names.size());
}

// On the machine itself (lo always exists; other interfaces may or may not).
TEST(NetAddress, InterfaceListsPickTheFirstListedInterfaceThatExists) {
  std::string why;
  EXPECT_EQ(chooseListenAddress(ListenChoice{"nosuchif,lo", "S", 0, ""}, &why), "127.0.0.1");
  EXPECT_EQ(chooseListenAddress(ListenChoice{"=lo", "S", 0, ""}, &why), "127.0.0.1");
  // "l" is a prefix of lo.
  EXPECT_EQ(chooseListenAddress(ListenChoice{"l", "S", 0, ""}, &why), "127.0.0.1");
  EXPECT_THROW(chooseListenAddress(ListenChoice{"=l", "S", 0, ""}, &why), UsageError);
  // Excluding lo never picks lo; with nothing else there, it is an error listing lo.
  try {
    std::string ip = chooseListenAddress(ListenChoice{"^lo", "S", 0, ""}, &why);
    EXPECT_NE(ip, "127.0.0.1");
    EXPECT_NE(ip, "::1");
    EXPECT_EQ(why.find("interface lo,"), std::string::npos) << why;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("lo (127.0.0.1)"), std::string::npos) << e.what();
  }
}

TEST(NetAddress, SocketFamilyPicksThatFamilyOfTheInterface) {
  std::string why;
  EXPECT_EQ(chooseListenAddress(ListenChoice{"lo", "S", AF_INET, ""}, &why), "127.0.0.1");
  std::string v6;
  try {
    v6 = chooseListenAddress(ListenChoice{"lo", "S", AF_INET6, ""}, &why);
  } catch (const UsageError& e) {
    GTEST_SKIP() << "lo has no IPv6 address here: " << e.what();
  }
  EXPECT_EQ(v6, "::1");
}

}  // namespace
}  // namespace ring
