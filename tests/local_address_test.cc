#include "common/local_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <string>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace autoaccel {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

// An IPv4 address of one of this machine's interfaces other than loopback
// ("" when it has none).
std::string NonLoopbackAddress() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* a = all; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
    if (!IsLoopbackHost(text)) found = text;
  }
  ::freeifaddrs(all);
  return found;
}

TEST(LocalAddressToward, LoopbackIsReachedFromLoopback) {
  absl::StatusOr<std::string> v4 = LocalAddressToward("127.0.0.1");
  ASSERT_OK(v4);
  EXPECT_EQ(*v4, "127.0.0.1");
  absl::StatusOr<std::string> named = LocalAddressToward("localhost");
  ASSERT_OK(named);
  EXPECT_THAT(*named, AnyOf("127.0.0.1", "::1"));
}

TEST(LocalAddressToward, AnAddressOfThisHostIsItsOwnLocalAddress) {
  const std::string mine = NonLoopbackAddress();
  if (mine.empty()) GTEST_SKIP() << "this machine has no IPv4 address besides loopback";
  absl::StatusOr<std::string> local = LocalAddressToward(mine);
  ASSERT_OK(local);
  EXPECT_EQ(*local, mine);
}

TEST(LocalAddressToward, BracketedIpv6IsUnderstood) {
  absl::StatusOr<std::string> local = LocalAddressToward("[::1]");
  if (!local.ok() && local.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << "no IPv6 loopback here: " << local.status();
  }
  ASSERT_OK(local);
  EXPECT_EQ(*local, "::1");
}

TEST(LocalAddressToward, BadHostsAreClearErrors) {
  EXPECT_THAT(LocalAddressToward(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host")));
  EXPECT_THAT(LocalAddressToward("no-such-host.invalid"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no-such-host.invalid")));
}

TEST(IsLoopbackHost, NamesTheLoopbackAddressesOnly) {
  for (const char* host :
       {"localhost", "LocalHost", "127.0.0.1", "127.0.1.1", "::1", "[::1]", "0:0:0:0:0:0:0:1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host :
       {"10.0.0.1", "node1", "::", "0.0.0.0", "1270.0.0.1x", "127.example.com", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

}  // namespace
}  // namespace autoaccel
