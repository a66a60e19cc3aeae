// SPDX-License-Identifier: Apache-2.0
#include "net/host_port.h"

#include <gtest/gtest.h>

namespace kvport::net {
namespace {

TEST(HostPortTest, ParsesIpv4HostnameAndIpv6) {
  auto a = ParseHostPort("127.0.0.1:7000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7000);
  auto b = ParseHostPort("localhost:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "localhost");
  EXPECT_EQ(b->port, 0);
  auto c = ParseHostPort("[::1]:65535");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 65535);
  EXPECT_EQ(c->ToString(), "[::1]:65535");
}

TEST(HostPortTest, EmptyHostTakesTheDefault) {
  auto a = ParseHostPort(":9000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->ToString(), "127.0.0.1:9000");
}

TEST(HostPortTest, RejectsMalformedAddressesWithAReason) {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "host:abc", "host:70000", "host:-1",
                          "::1:80", "[::1]80", "[::1", "[]:80", "host:80x"}) {
    auto r = ParseHostPort(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("HOST:PORT"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace kvport::net
