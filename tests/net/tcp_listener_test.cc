// SPDX-License-Identifier: Apache-2.0
#include "net/tcp_listener.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback_pair.h"

namespace kvport::net {
namespace {

TEST(TcpListenerTest, PortZeroBindsAnEphemeralLoopbackPort) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  EXPECT_NE((*listener)->port(), 0);
  EXPECT_EQ((*listener)->address().host, "127.0.0.1");
  EXPECT_EQ((*listener)->address().port, (*listener)->port());
}

TEST(TcpListenerTest, AcceptReturnsInvalidSocketWhenNothingIsPending) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  auto accepted = (*listener)->Accept();
  ASSERT_TRUE(accepted.ok());
  EXPECT_FALSE(accepted->valid());
}

TEST(TcpListenerTest, AcceptedConnectionCarriesBytesBothWays) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  LoopbackPair pair = MakeLoopbackPair(**listener);
  ASSERT_TRUE(pair.server.valid());
  ASSERT_EQ(::write(pair.client.fd(), "ping", 4), 4);
  char buf[8] = {};
  iovec iov{buf, sizeof(buf)};
  // The accepted socket is non-blocking: poll until the 4 bytes are there (bounded).
  size_t got = 0;
  for (int i = 0; i < 1000000 && got < 4; ++i) {
    iov = iovec{buf + got, sizeof(buf) - got};
    auto r = ReadV(pair.server.fd(), &iov, 1);
    ASSERT_TRUE(r.ok());
    ASSERT_FALSE(r->eof);
    got += r->bytes;
  }
  EXPECT_EQ(std::string(buf, got), "ping");
  EXPECT_NE(PeerName(pair.server.fd()).find("127.0.0.1:"), std::string::npos);
}

TEST(TcpListenerTest, AcceptedConnectionsSendSmallSegmentsAtOnceAndHoldLittleUnsent) {
  auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  LoopbackPair pair = MakeLoopbackPair(**listener);
  ASSERT_TRUE(pair.server.valid());
  int value = 0;
  socklen_t length = sizeof(value);
  ASSERT_EQ(::getsockopt(pair.server.fd(), IPPROTO_TCP, TCP_NODELAY, &value, &length), 0);
  EXPECT_NE(value, 0);
  length = sizeof(value);
  ASSERT_EQ(::getsockopt(pair.server.fd(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &value, &length), 0);
  EXPECT_EQ(value, TcpListener::kNotSentLowWaterBytes);
}

TEST(TcpListenerTest, BindingABusyPortFailsWithTheAddressInTheMessage) {
  auto first = TcpListener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(first.ok());
  auto second = TcpListener::Listen(HostPort{"127.0.0.1", (*first)->port()});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(std::to_string((*first)->port())), std::string::npos);
}

TEST(TcpListenerTest, UnresolvableHostIsAnInvalidArgument) {
  auto listener = TcpListener::Listen(HostPort{"no-such-host.invalid", 0});
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvport::net
