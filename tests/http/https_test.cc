// SPDX-License-Identifier: Apache-2.0
// The HTTP endpoint over HTTPS (HttpOptions::tls, what `kvport serve` sets on a node with TLS):
// pages are answered through TLS, a request in the clear is refused, handshakes that never
// finish are closed at the request deadline without delaying anyone else, and the connection
// cap still holds. Clients are kvport's own TLS streams (net::Stream) over loopback sockets.
// Every wait is bounded and every assertion is about behaviour, never about how long it took.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http_test_util.h"
#include "net/socket.h"
#include "net/stream.h"
#include "net/tls.h"

namespace kvport::testing {
namespace {

using namespace std::chrono_literals;
using http::HttpOptions;

constexpr auto kWait = 10s;  // the most any step waits: generous, never expected

int MillisecondsLeft(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// A blocking connect to 127.0.0.1:port; the socket is then made non-blocking. Invalid on error.
net::Socket ConnectTo(uint16_t port) {
  net::Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      !net::SetNonBlocking(socket.fd()).ok()) {
    return net::Socket();
  }
  return socket;
}

// Whether the server has closed the connection (end of stream or reset), found without reading;
// waits at most `timeout_ms`.
bool HungUp(int fd, int timeout_ms) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool WaitHungUp(int fd) {
  return HungUp(fd, static_cast<int>(std::chrono::milliseconds(kWait).count()));
}

struct Response {
  int status = 0;
  std::string head;
  std::string body;
};

// Parses one response from the front of `buffer` (removing it), or nullopt when it is not whole.
std::optional<Response> TakeResponse(std::string* buffer) {
  const size_t end = buffer->find("\r\n\r\n");
  if (end == std::string::npos) return std::nullopt;
  Response response;
  response.head = buffer->substr(0, end + 4);
  if (response.head.rfind("HTTP/1.1 ", 0) != 0) return std::nullopt;
  response.status = std::stoi(response.head.substr(9, 3));
  size_t length = 0;
  const size_t field = response.head.find("Content-Length: ");
  if (field != std::string::npos) length = std::stoul(response.head.substr(field + 16));
  if (buffer->size() < end + 4 + length) return std::nullopt;
  response.body = buffer->substr(end + 4, length);
  buffer->erase(0, end + 4 + length);
  return response;
}

// An HTTPS client on kvport's own TLS stream: handshake, requests and responses, each bounded
// by kWait.
class TlsPeer {
 public:
  explicit TlsPeer(uint16_t port) : stream_(ConnectTo(port)) {}

  bool connected() const { return stream_.valid(); }
  int fd() const { return stream_.fd(); }
  net::Stream& stream() { return stream_; }

  // The whole handshake, verifying the node's certificate for 127.0.0.1.
  Status Handshake(const net::TlsContext& context) {
    KVPORT_RETURN_IF_ERROR(stream_.StartTls(context, "127.0.0.1"));
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    for (;;) {
      KVPORT_ASSIGN_OR_RETURN(net::TlsWait wait, stream_.Handshake());
      if (wait == net::TlsWait::kNone) return Status::Ok();
      pollfd p{stream_.fd(), static_cast<short>(wait == net::TlsWait::kRead ? POLLIN : POLLOUT), 0};
      if (::poll(&p, 1, MillisecondsLeft(deadline)) <= 0) {
        return Status::Unavailable("TLS handshake did not finish in time");
      }
    }
  }

  bool Send(const std::string& bytes) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    size_t sent = 0;
    while (sent < bytes.size()) {
      // What was not reported written is offered again, from where it stopped (Write's rule).
      iovec iov{const_cast<char*>(bytes.data() + sent), bytes.size() - sent};
      Result<net::IoProgress> wrote = stream_.WriteV(&iov, 1);
      if (!wrote.ok()) return false;
      sent += wrote->bytes;
      if (wrote->would_block) {
        pollfd p{stream_.fd(), POLLOUT, 0};
        if (::poll(&p, 1, MillisecondsLeft(deadline)) <= 0) return false;
      }
    }
    return true;
  }

  // The next response, or nullopt when the connection closed or none came whole within kWait.
  std::optional<Response> ReadResponse() {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    for (;;) {
      if (std::optional<Response> response = TakeResponse(&buffer_)) return response;
      char chunk[16 * 1024];
      iovec iov{chunk, sizeof(chunk)};
      Result<net::IoProgress> read = stream_.ReadV(&iov, 1);
      if (!read.ok()) return std::nullopt;
      buffer_.append(chunk, read->bytes);
      if (read->eof && read->bytes == 0) return std::nullopt;
      if (read->bytes == 0 && stream_.buffered() == 0) {
        pollfd p{stream_.fd(), POLLIN, 0};
        if (::poll(&p, 1, MillisecondsLeft(deadline)) <= 0) return std::nullopt;
      }
    }
  }

 private:
  net::Stream stream_;
  std::string buffer_;
};

const std::string kHealthRequest = "GET /health HTTP/1.1\r\nHost: node\r\n\r\n";

// Certificates written once per test binary run, in a fresh directory.
class HttpsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/kvport-https-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    ASSERT_TRUE(net::WriteTestCertificates(*dir_, {}).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const char* name) { return *dir_ + "/" + name; }

  // An endpoint option set for HTTPS with the test node certificate (no client certificate
  // asked for, as `kvport serve` does).
  static HttpOptions Https(HttpOptions options = {}) {
    options.tls_cert_file = File("node.pem");
    options.tls_key_file = File("node.key");
    return options;
  }
  static std::shared_ptr<net::TlsContext> Client() {
    auto client = net::TlsContext::Create(net::TlsRole::kClient, {"", "", File("ca.pem")});
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? *client : nullptr;
  }

  // GET /health over a fresh HTTPS connection: its status, or 0 when none came.
  static int HealthStatus(uint16_t port) {
    TlsPeer probe(port);
    if (!probe.connected()) return 0;
    auto client = Client();
    Status handshake = probe.Handshake(*client);
    EXPECT_TRUE(handshake.ok()) << handshake.ToString();
    if (!handshake.ok() || !probe.Send(kHealthRequest)) return 0;
    std::optional<Response> response = probe.ReadResponse();
    return response ? response->status : 0;
  }

  static std::string* dir_;
};
std::string* HttpsTest::dir_ = nullptr;

// ReloadTls: new connections get the certificate the files now hold, signed by another CA here;
// a reload from files that make no context keeps the one in force.
TEST_F(HttpsTest, ACertificateReloadReachesNewConnections) {
  const std::string dir = *dir_ + "/reloaded";
  ASSERT_TRUE(net::WriteTestCertificates(dir + "/first", {}).ok());
  ASSERT_TRUE(net::WriteTestCertificates(dir + "/second", {}).ok());
  std::filesystem::copy_file(dir + "/first/node.pem", dir + "/node.pem");
  std::filesystem::copy_file(dir + "/first/node.key", dir + "/node.key");
  std::filesystem::permissions(
      dir + "/node.key", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  HttpOptions options;
  options.tls_cert_file = dir + "/node.pem";
  options.tls_key_file = dir + "/node.key";
  auto server = http::HttpServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  // Whether a new connection's handshake passes with `ca`.
  const auto verified_by = [&](const std::string& ca) {
    auto client = net::TlsContext::Create(net::TlsRole::kClient, {"", "", ca});
    EXPECT_TRUE(client.ok());
    TlsPeer probe((*server)->port());
    return probe.connected() && probe.Handshake(**client).ok();
  };
  EXPECT_TRUE(verified_by(dir + "/first/ca.pem"));
  std::filesystem::copy_file(dir + "/second/node.pem", dir + "/node.pem",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(dir + "/second/node.key", dir + "/node.key",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(verified_by(dir + "/first/ca.pem")) << "nothing changes before the reload";
  ASSERT_TRUE((*server)->ReloadTls().ok());
  EXPECT_TRUE(verified_by(dir + "/second/ca.pem"));
  EXPECT_FALSE(verified_by(dir + "/first/ca.pem"));
  std::filesystem::remove(dir + "/node.key");
  EXPECT_FALSE((*server)->ReloadTls().ok());
  EXPECT_TRUE(verified_by(dir + "/second/ca.pem")) << "a failed reload keeps the certificate";
  (*server)->Stop();
}

// The ClientHello `client` sends first, taken from a Unix socket pair that nobody answers on.
std::string ClientHello(const net::TlsContext& client) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return "";
  net::Socket theirs(pair[1]);
  net::Stream ours{net::Socket(pair[0])};
  if (!ours.StartTls(client, "127.0.0.1").ok()) return "";
  Result<net::TlsWait> step = ours.Handshake();  // writes the ClientHello, then waits to read
  if (!step.ok() || *step != net::TlsWait::kRead) return "";
  std::string hello(64 * 1024, '\0');
  const ssize_t n = ::recv(theirs.fd(), hello.data(), hello.size(), 0);
  hello.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return hello;
}

// Peers that hold a handshake open without finishing it, three ways.
struct StalledPeers {
  std::vector<std::unique_ptr<TlsPeer>> peers;

  // `count` peers: connected and silent; one byte of a TLS record (0x16) and no more; a whole
  // ClientHello and the server's answer never read (the client's Finished never comes).
  static StalledPeers Open(uint16_t port, const net::TlsContext& client, int count) {
    StalledPeers s;
    const std::string hello = ClientHello(client);
    EXPECT_GT(hello.size(), 5u);
    EXPECT_EQ(hello[0], '\x16');
    for (int i = 0; i < count; ++i) {
      auto peer = std::make_unique<TlsPeer>(port);
      EXPECT_TRUE(peer->connected());
      if (!peer->connected()) return s;
      switch (i % 3) {
        case 0:
          break;
        case 1:
          EXPECT_EQ(::send(peer->fd(), "\x16", 1, MSG_NOSIGNAL), 1);
          break;
        case 2:
          EXPECT_EQ(::send(peer->fd(), hello.data(), hello.size(), MSG_NOSIGNAL),
                    static_cast<ssize_t>(hello.size()));
          break;
      }
      s.peers.push_back(std::move(peer));
    }
    return s;
  }
};

TEST_F(HttpsTest, PagesAreServedOverTls) {
  NodeWithHttp n = NodeWithHttp::Start(Https());
  ASSERT_TRUE(n.node && n.http);
  EXPECT_EQ(n.http->scheme(), "https");
  TlsPeer peer(n.http->port());
  ASSERT_TRUE(peer.connected());
  auto client = Client();
  Status handshake = peer.Handshake(*client);
  ASSERT_TRUE(handshake.ok()) << handshake.ToString();
  ASSERT_TRUE(peer.Send(kHealthRequest));
  auto health = peer.ReadResponse();
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_NE(health->body.find("serving"), std::string::npos) << health->body;
  // Keep-alive: the same TLS connection serves the next request.
  ASSERT_TRUE(peer.Send("GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n"));
  auto metrics = peer.ReadResponse();
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("kvport_"), std::string::npos);
  // Connection: close ends with the TLS close and the end of the stream.
  ASSERT_TRUE(peer.Send("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"));
  auto last = peer.ReadResponse();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->status, 200);
  EXPECT_TRUE(WaitHungUp(peer.fd()));
}

TEST_F(HttpsTest, PlainHttpEndpointHasNoTls) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  EXPECT_EQ(n.http->scheme(), "http");
}

// More pipelined requests than one read of the endpoint takes (8 KiB), in one TLS record: what
// TLS holds decrypted after that read, epoll does not report; they are answered all the same.
TEST_F(HttpsTest, BytesHeldByTlsAreAnsweredWithoutMoreArriving) {
  auto http = http::HttpServer::Start(Https());
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  TlsPeer peer((*http)->port());
  ASSERT_TRUE(peer.connected());
  auto client = Client();
  ASSERT_TRUE(peer.Handshake(*client).ok());
  const std::string request = "GET /health HTTP/1.1\r\nHost: n\r\n\r\n";
  const int count = static_cast<int>(12 * 1024 / request.size());  // one record: < 16 KiB
  std::string requests;
  for (int i = 0; i < count; ++i)
    requests += request;
  ASSERT_TRUE(peer.Send(requests));
  for (int i = 0; i < count; ++i) {
    auto response = peer.ReadResponse();
    ASSERT_TRUE(response) << "response " << i << " of " << count << " never came";
    EXPECT_EQ(response->status, 503);  // no node attached: "starting"
  }
}

// curl http://... to the HTTPS endpoint: a plain answer saying why, never a page in the clear.
TEST_F(HttpsTest, ARequestInTheClearIsRefused) {
  NodeWithHttp n = NodeWithHttp::Start(Https());
  ASSERT_TRUE(n.node && n.http);
  net::Socket plain = ConnectTo(n.http->port());
  ASSERT_TRUE(plain.valid());
  ASSERT_EQ(::send(plain.fd(), kHealthRequest.data(), kHealthRequest.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(kHealthRequest.size()));
  std::string received;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  for (;;) {
    pollfd p{plain.fd(), POLLIN, 0};
    if (::poll(&p, 1, MillisecondsLeft(deadline)) <= 0) break;
    char chunk[4096];
    const ssize_t got = ::recv(plain.fd(), chunk, sizeof(chunk), 0);
    if (got <= 0) break;  // closed: the whole answer is in
    received.append(chunk, static_cast<size_t>(got));
  }
  std::optional<Response> response = TakeResponse(&received);
  ASSERT_TRUE(response) << "no plain answer";
  EXPECT_EQ(response->status, 400);
  EXPECT_NE(response->body.find("requires HTTPS"), std::string::npos) << response->body;
  EXPECT_NE(response->head.find("Connection: close"), std::string::npos) << response->head;
  EXPECT_TRUE(HungUp(plain.fd(), 0));
  // The endpoint goes on serving HTTPS.
  EXPECT_EQ(HealthStatus(n.http->port()), 200);
}

// Handshakes held open do not delay a probe: the endpoint never waits on one peer.
TEST_F(HttpsTest, StalledHandshakesDoNotDelayHealth) {
  HttpOptions options;
  options.max_connections = 256;  // above the peers used: this is about blocking, not the cap
  options.request_timeout = 60s;  // nor about deadlines: every stalled peer stays open
  NodeWithHttp n = NodeWithHttp::Start(Https(options));
  ASSERT_TRUE(n.node && n.http);
  auto client = Client();
  StalledPeers stalled = StalledPeers::Open(n.http->port(), *client, 60);
  ASSERT_EQ(stalled.peers.size(), 60u);
  EXPECT_EQ(HealthStatus(n.http->port()), 200);
  for (const auto& peer : stalled.peers)
    EXPECT_FALSE(HungUp(peer->fd(), 0));
}

// A handshake that does not finish within request_timeout of the accept is closed, like a head
// that does not arrive.
TEST_F(HttpsTest, AHandshakeNeverFinishedIsClosedAtTheDeadline) {
  HttpOptions options;
  options.request_timeout = 200ms;
  NodeWithHttp n = NodeWithHttp::Start(Https(options));
  ASSERT_TRUE(n.node && n.http);
  auto client = Client();
  StalledPeers stalled = StalledPeers::Open(n.http->port(), *client, 6);
  ASSERT_EQ(stalled.peers.size(), 6u);
  for (size_t i = 0; i < stalled.peers.size(); ++i)
    EXPECT_TRUE(WaitHungUp(stalled.peers[i]->fd())) << "stalled peer " << i << " still open";
  EXPECT_EQ(HealthStatus(n.http->port()), 200);
}

// The cap counts HTTPS connections, handshakes included; a probe still gets in.
TEST_F(HttpsTest, TheCapHoldsAndAProbeStillGetsIn) {
  HttpOptions options;
  options.max_connections = 8;
  options.request_timeout = 60s;  // only the cap closes connections here
  NodeWithHttp n = NodeWithHttp::Start(Https(options));
  ASSERT_TRUE(n.node && n.http);
  auto client = Client();
  StalledPeers stalled =
      StalledPeers::Open(n.http->port(), *client, static_cast<int>(options.max_connections) + 12);
  ASSERT_EQ(stalled.peers.size(), options.max_connections + 12);
  EXPECT_EQ(HealthStatus(n.http->port()), 200);
  // The server closed the extra ones (and one more for the probe's connection): at most the cap
  // of them (less the probe's) are open.
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  size_t open = stalled.peers.size();
  while (open > options.max_connections - 1 && std::chrono::steady_clock::now() < deadline) {
    open = 0;
    for (const auto& peer : stalled.peers)
      open += HungUp(peer->fd(), 0) ? 0 : 1;
    if (open > options.max_connections - 1) ::poll(nullptr, 0, 20);
  }
  EXPECT_LE(open, options.max_connections - 1);
}

}  // namespace
}  // namespace kvport::testing
