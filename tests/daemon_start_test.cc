// The start both daemons share (common/daemon_start.h): what a port lacks,
// the listen policy over the daemon's ports, and the log format.
#include "common/daemon_start.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace autoaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

DaemonStart Start(const std::string& listen, bool insecure) {
  DaemonStart start;
  start.daemon = "autoaccel-test";
  start.log_level = "info";
  start.log_format = "text";
  start.insecure = insecure;
  start.ports = {
      {listen, MissingProtections(TlsFiles(), std::nullopt, /*has_join_token=*/false), ""}};
  return start;
}

TEST(DaemonStartTest, WhatAPortLacksIsNamedByItsFlags) {
  EXPECT_THAT(MissingProtections(TlsFiles(), std::nullopt, false),
              ElementsAre("TLS (--tls-cert/--tls-key)", "a join token (--join-token-file)"));
  EXPECT_THAT(MissingProtections(TlsFiles(), false, false),
              ElementsAre("TLS (--tls-cert/--tls-key)", "user tokens (--tokens)",
                          "a join token (--join-token-file)"));
  EXPECT_THAT(MissingProtections(TlsFiles{"cert.pem", "key.pem", ""}, true, true), ElementsAre());
}

TEST(DaemonStartTest, ANetworkAddressWithoutProtectionNeedsInsecureAndSaysSoEverywhere) {
  absl::StatusOr<std::string> loopback = StartDaemon(Start("127.0.0.1:0", false));
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  EXPECT_EQ(*loopback, "") << "a laptop needs no certificates";

  absl::StatusOr<std::string> refused = StartDaemon(Start("10.1.2.3:50051", false));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              AllOf(HasSubstr("autoaccel-test"), HasSubstr("--insecure"), HasSubstr("TLS")));

  DaemonStart start = Start("10.1.2.3:50051", true);
  start.also_insecure = "open registration";
  absl::StatusOr<std::string> insecure = StartDaemon(start);
  ASSERT_TRUE(insecure.ok()) << insecure.status();
  EXPECT_THAT(*insecure, AllOf(HasSubstr("no TLS (--tls-cert/--tls-key)"),
                               HasSubstr("no a join token"), HasSubstr("; open registration")));

  start.log_format = "xml";
  EXPECT_THAT(std::string(StartDaemon(start).status().message()), HasSubstr("--log-format"));
}

}  // namespace
}  // namespace autoaccel
