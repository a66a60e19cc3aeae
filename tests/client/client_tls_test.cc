// SPDX-License-Identifier: Apache-2.0
// A node with TLS on its TCP port and the clients that reach it: with the right CA (and, for
// mutual TLS, a client certificate) every call works and no secret crosses the wire in the
// clear; every other combination fails at Init with an error that says what is wrong.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "kvport/client.h"
#include "kvport/server.h"
#include "net/tls.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::Pattern;
using testing::SmallNodeOptions;
using testing::StartNode;

const std::string kSecret = "tls-test-secret-0123456789abcdef";
// Long enough that random bytes on the wire never contain it by chance.
const std::string kBigKey = "tls-test-key-of-the-big-value-0123456789";

// A loopback relay to one port that records what the client sent, for looking at the wire.
class WireTap {
 public:
  explicit WireTap(uint16_t target) : target_(target) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(0);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 8);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~WireTap() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }
  std::string sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }

 private:
  static sockaddr_in Loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }
  void Run() {
    std::vector<std::pair<int, int>> pairs;  // (client side, node side)
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (auto [a, b] : pairs) {
        fds.push_back({a, POLLIN, 0});
        fds.push_back({b, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int a = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        const int b = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in node = Loopback(target_);
        ::connect(b, reinterpret_cast<sockaddr*>(&node), sizeof(node));
        pairs.emplace_back(a, b);
        continue;
      }
      for (size_t i = 0; i < pairs.size(); ++i) {
        for (int side = 0; side < 2; ++side) {
          if (!(fds[1 + 2 * i + side].revents & (POLLIN | POLLHUP))) continue;
          const int from = side == 0 ? pairs[i].first : pairs[i].second;
          const int to = side == 0 ? pairs[i].second : pairs[i].first;
          char buf[65536];
          const ssize_t n = ::read(from, buf, sizeof(buf));
          if (n <= 0) {
            ::shutdown(to, SHUT_WR);
            continue;
          }
          if (side == 0) {
            std::lock_guard lock(mu_);
            sent_.append(buf, static_cast<size_t>(n));
          }
          for (ssize_t done = 0; done < n;) {
            const ssize_t w = ::write(to, buf + done, static_cast<size_t>(n - done));
            if (w <= 0) break;
            done += w;
          }
        }
      }
    }
    for (auto [a, b] : pairs) {
      ::close(a);
      ::close(b);
    }
  }

  uint16_t target_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string sent_;
};

class ClientTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/kvport-client-tls-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    ASSERT_TRUE(net::WriteTestCertificates(*dir_ + "/a", {}).ok());
    ASSERT_TRUE(net::WriteTestCertificates(*dir_ + "/b", {}).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string A(const char* f) { return *dir_ + "/a/" + f; }
  static std::string B(const char* f) { return *dir_ + "/b/" + f; }

  static ServerOptions TlsNode(bool mutual = false) {
    ServerOptions options = SmallNodeOptions();
    options.unix_socket = "";  // TCP only: the same-host switch to shared memory is not TLS
    options.tls_cert_file = A("node.pem");
    options.tls_key_file = A("node.key");
    if (mutual) options.tls_ca_file = A("ca.pem");
    return options;
  }
  static InitOptions TlsClient(const std::string& ca) {
    InitOptions options;
    options.transport_type = 1;  // TCP
    options.tls_ca_file = ca;
    options.connect_timeout = std::chrono::seconds(5);
    return options;
  }
  static std::string Endpoint(const Server& server) {
    // The certificate names localhost: connect by that name, as a user would.
    return "localhost:" + std::to_string(server.port());
  }

  static std::string* dir_;
};
std::string* ClientTlsTest::dir_ = nullptr;

TEST_F(ClientTlsTest, CallsWorkOverTlsAndNeitherTokenNorValueCrossesInTheClear) {
  ServerOptions node_options = TlsNode();
  AccessToken token;
  token.name = "tenant";
  token.secret = kSecret;
  token.read = token.write = {"*"};
  token.admin = true;
  node_options.tokens = {token};
  std::unique_ptr<Server> server = StartNode(node_options);
  ASSERT_NE(server, nullptr);
  WireTap tap(server->port());

  InitOptions init = TlsClient(A("ca.pem"));
  init.token = kSecret;
  Client client;
  Status ok = client.Init("tls", "localhost:" + std::to_string(tap.port()), init);
  ASSERT_TRUE(ok.ok()) << ok.ToString();

  // A value large enough for many records and partial writes, and a small one.
  std::vector<char> big = Pattern(1, 5 << 20);
  const std::string marker = "PLAINTEXT-MARKER-IN-A-VALUE";
  std::copy(marker.begin(), marker.end(), big.begin() + 12345);
  const std::vector<char> small = Pattern(2, 100);
  IOBuffers put;
  put.Append(big.data(), big.size());
  put.Append(small.data(), small.size());
  Result<BatchResult> stored = client.MSet({kBigKey, "small"}, put);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->status, BatchCode::kSuccess);

  std::vector<char> big_back(big.size()), small_back(small.size());
  IOBuffers get;
  get.Append(big_back.data(), big_back.size());
  get.Append(small_back.data(), small_back.size());
  Result<GetResult> got = client.MGet({kBigKey, "small"}, GetOptions{}, get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, BatchCode::kSuccess);
  EXPECT_EQ(big_back, big);
  EXPECT_EQ(small_back, small);

  Result<NodeStats> stats = client.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GE(stats->Get("tls_handshakes"), 1u);
  EXPECT_EQ(stats->Get("tls_handshake_failures"), 0u);

  const std::string wire = tap.sent();
  EXPECT_GT(wire.size(), big.size());  // the value went through the tap
  EXPECT_EQ(wire.find(kSecret), std::string::npos) << "the token crossed in the clear";
  EXPECT_EQ(wire.find(marker), std::string::npos) << "the value crossed in the clear";
  EXPECT_EQ(wire.find(kBigKey), std::string::npos) << "a key crossed in the clear";
}

TEST_F(ClientTlsTest, APlainClientIsToldTheNodeRequiresTls) {
  std::unique_ptr<Server> server = StartNode(TlsNode());
  ASSERT_NE(server, nullptr);
  InitOptions plain;
  plain.transport_type = 1;
  Client client;
  Status refused = client.Init("plain", server->address(), plain);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.message().find("requires TLS"), std::string::npos) << refused.ToString();
  EXPECT_EQ(server->Stats().Get("tls_handshake_failures"), 1u);
}

TEST_F(ClientTlsTest, ATlsClientOfAPlainNodeFailsAtInit) {
  ServerOptions plain = SmallNodeOptions();
  plain.unix_socket = "";
  std::unique_ptr<Server> server = StartNode(plain);
  ASSERT_NE(server, nullptr);
  Client client;
  Status failed = client.Init("tls", Endpoint(*server), TlsClient(A("ca.pem")));
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("TLS handshake"), std::string::npos) << failed.ToString();
  // The node answered a ClientHello as a malformed frame, and counted it.
  EXPECT_GE(server->Stats().Get("error_responses"), 1u);
}

TEST_F(ClientTlsTest, ANodeCertificateFromAnotherCaIsRefused) {
  std::unique_ptr<Server> server = StartNode(TlsNode());
  ASSERT_NE(server, nullptr);
  Client client;
  Status refused = client.Init("tls", Endpoint(*server), TlsClient(B("ca.pem")));
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.message().find("certificate verification failed"), std::string::npos)
      << refused.ToString();
}

TEST_F(ClientTlsTest, MutualTlsAdmitsOnlyClientsWithACertificateAndGuardsAnOpenNode) {
  // Without tokens, a node beyond loopback is refused unless it is mutual TLS.
  ServerOptions wide = TlsNode(/*mutual=*/false);
  wide.listen = "0.0.0.0:0";
  Result<std::unique_ptr<Server>> open = Server::Start(wide);
  EXPECT_EQ(open.status().code(), StatusCode::kInvalidArgument) << open.status().ToString();
  ServerOptions guarded = TlsNode(/*mutual=*/true);
  guarded.listen = "0.0.0.0:0";
  std::unique_ptr<Server> server = StartNode(guarded);
  ASSERT_NE(server, nullptr);

  Client without;
  Status refused = without.Init("no-cert", Endpoint(*server), TlsClient(A("ca.pem")));
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("certificate"), std::string::npos) << refused.ToString();

  InitOptions with_cert = TlsClient(A("ca.pem"));
  with_cert.tls_cert_file = A("client.pem");
  with_cert.tls_key_file = A("client.key");
  Client with;
  Status ok = with.Init("cert", Endpoint(*server), with_cert);
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  const std::vector<char> value = Pattern(3, 1000);
  IOBuffers put;
  put.Append(value.data(), value.size());
  Result<BatchResult> stored = with.MSet({"k"}, put);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->status, BatchCode::kSuccess);
}

// A peer that starts a handshake and stalls is closed at hello_timeout like one that never sends
// a HELLO: the handshake is part of the time a connection has to authenticate.
TEST_F(ClientTlsTest, AStalledHandshakeIsClosedAtTheHelloDeadline) {
  ServerOptions options = TlsNode();
  options.hello_timeout = std::chrono::milliseconds(200);
  std::unique_ptr<Server> server = StartNode(options);
  ASSERT_NE(server, nullptr);
  const int stalled = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(stalled, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const char record_start[] = {0x16, 0x03, 0x01};  // a ClientHello's first bytes, then nothing
  ASSERT_EQ(::write(stalled, record_start, sizeof(record_start)), 3);

  // The node closes it: its read ends (bounded wait, 10 s), with nothing sent (there is no
  // channel to send an ERROR on before the handshake).
  pollfd p{stalled, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  char byte;
  EXPECT_EQ(::read(stalled, &byte, 1), 0);
  ::close(stalled);
  EXPECT_EQ(server->Stats().Get("hello_timeouts"), 1u);
  EXPECT_EQ(server->Stats().Get("unauthenticated_connections"), 0u);
}

TEST_F(ClientTlsTest, TlsSettingsAreCheckedAtInit) {
  InitOptions cert_without_ca;
  cert_without_ca.tls_cert_file = A("client.pem");
  cert_without_ca.tls_key_file = A("client.key");
  Client client;
  Status bad = client.Init("tls", "127.0.0.1:1", cert_without_ca);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.ToString();
  EXPECT_NE(bad.message().find("tls_ca_file"), std::string::npos) << bad.ToString();

  Status missing = client.Init("tls", "127.0.0.1:1", TlsClient(*dir_ + "/none.pem"));
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument) << missing.ToString();
  EXPECT_NE(missing.message().find("none.pem"), std::string::npos) << missing.ToString();

  ServerOptions half = SmallNodeOptions();
  half.tls_cert_file = A("node.pem");
  Result<std::unique_ptr<Server>> node = Server::Start(half);
  EXPECT_EQ(node.status().code(), StatusCode::kInvalidArgument) << node.status().ToString();
  EXPECT_NE(node.status().message().find("tls_key_file"), std::string::npos);
}

// SIGHUP's TLS half: new connections get the certificates on disk now, connections already
// open keep theirs, and files that make no context leave the ones in force.
TEST_F(ClientTlsTest, CertificatesReloadForNewConnectionsOnly) {
  const std::string live = *dir_ + "/live";
  std::filesystem::create_directories(live);
  auto install = [&](const std::string& from) {
    for (const char* f : {"node.pem", "node.key"}) {
      const std::string to = live + "/" + f + ".new";
      std::filesystem::copy_file(from + "/" + f, to,
                                 std::filesystem::copy_options::overwrite_existing);
      ::chmod(to.c_str(), 0600);
      std::filesystem::rename(to, live + "/" + f);
    }
  };
  install(*dir_ + "/a");
  ServerOptions options = TlsNode();
  options.tls_cert_file = live + "/node.pem";
  options.tls_key_file = live + "/node.key";
  std::unique_ptr<Server> server = StartNode(options);
  ASSERT_NE(server, nullptr);
  Client before;
  InitOptions one_connection = TlsClient(A("ca.pem"));
  one_connection.connections = 1;
  ASSERT_TRUE(before.Init("before", Endpoint(*server), one_connection).ok());

  install(*dir_ + "/b");
  ASSERT_TRUE(server->ReloadTls().ok());
  const std::vector<char> value = Pattern(5, 2000);
  IOBuffers put;
  put.Append(value.data(), value.size());
  Result<BatchResult> stored = before.MSet({"kept"}, put);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->status, BatchCode::kSuccess) << "a live connection keeps its TLS session";
  Client old_ca;
  EXPECT_EQ(old_ca.Init("old", Endpoint(*server), TlsClient(A("ca.pem"))).code(),
            StatusCode::kPermissionDenied);
  Client new_ca;
  Status renewed = new_ca.Init("new", Endpoint(*server), TlsClient(B("ca.pem")));
  EXPECT_TRUE(renewed.ok()) << renewed.ToString();

  // A reload that fails keeps what is in force.
  std::ofstream(live + "/node.pem", std::ios::trunc) << "not a certificate\n";
  Status failed = server->ReloadTls();
  EXPECT_EQ(failed.code(), StatusCode::kInvalidArgument) << failed.ToString();
  EXPECT_NE(failed.message().find("tls_cert_file"), std::string::npos) << failed.ToString();
  ::chmod((live + "/node.key").c_str(), 0644);
  install(*dir_ + "/a");
  ::chmod((live + "/node.key").c_str(), 0644);
  EXPECT_NE(server->ReloadTls().message().find("chmod 600"), std::string::npos);
  Client still;
  Status kept = still.Init("still", Endpoint(*server), TlsClient(B("ca.pem")));
  EXPECT_TRUE(kept.ok()) << kept.ToString();
}

// With mutual TLS and tokens, a client certificate listed in a token's cert_names holds that
// token's grant without a secret; one no token lists is refused like a client without a token.
TEST_F(ClientTlsTest, AClientCertificateHoldsTheGrantOfTheTokenThatNamesIt) {
  ServerOptions options = TlsNode(/*mutual=*/true);
  AccessToken by_certificate;
  by_certificate.name = "client-hosts";
  by_certificate.cert_names = {"kvport client"};  // WriteTestCertificates' client CN
  by_certificate.read = {"tenant-a/*"};
  by_certificate.write = {"tenant-a/*"};
  AccessToken admin;
  admin.name = "admin";
  admin.secret = kSecret;
  admin.read = {"*"};
  admin.write = {"*"};
  admin.admin = true;
  options.tokens = {by_certificate, admin};
  std::unique_ptr<Server> server = StartNode(options);
  ASSERT_NE(server, nullptr);

  InitOptions with_cert = TlsClient(A("ca.pem"));
  with_cert.tls_cert_file = A("client.pem");
  with_cert.tls_key_file = A("client.key");
  const std::vector<char> value = Pattern(7, 1000);
  auto put = [&](Client& c, const std::string& ns) {
    IOBuffers values;
    values.Append(value.data(), value.size());
    SetOptions set;
    set.ns = ns;
    Result<BatchResult> r = c.MSet({"k"}, values, set);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->codes.at(0) : KeyCode::kFailed;
  };
  Client mapped;
  Status ok = mapped.Init("mapped", Endpoint(*server), with_cert);
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  EXPECT_EQ(put(mapped, "tenant-a/x"), KeyCode::kSuccess);
  EXPECT_EQ(put(mapped, "tenant-b/x"), KeyCode::kPermissionDenied);

  // A secret presented decides: the same certificate with the admin token writes anywhere.
  InitOptions with_token = with_cert;
  with_token.token = kSecret;
  Client admin_client;
  ASSERT_TRUE(admin_client.Init("admin", Endpoint(*server), with_token).ok());
  EXPECT_EQ(put(admin_client, "tenant-b/x"), KeyCode::kSuccess);

  // No token lists the certificate: refused at HELLO.
  options.tokens = {admin};
  std::unique_ptr<Server> unmapped_node = StartNode(options);
  ASSERT_NE(unmapped_node, nullptr);
  Client unmapped;
  Status refused = unmapped.Init("unmapped", Endpoint(*unmapped_node), with_cert);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.message().find("cert_names"), std::string::npos) << refused.ToString();
}

// tls_verify_hostname: false accepts a node certificate that does not name the address
// connected to (still chained to the CA); left on, such a connection is refused.
TEST_F(ClientTlsTest, TlsVerifyHostnameFalseAcceptsACertificateForAnotherAddress) {
  ServerOptions options = TlsNode();
  options.listen = "127.0.0.2:0";  // loopback, but not an address the certificate carries
  std::unique_ptr<Server> server = StartNode(options);
  ASSERT_NE(server, nullptr);
  const std::string endpoint = "127.0.0.2:" + std::to_string(server->port());
  Client checked;
  Status refused = checked.Init("checked", endpoint, TlsClient(A("ca.pem")));
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused.ToString();
  InitOptions unchecked_options = TlsClient(A("ca.pem"));
  unchecked_options.tls_verify_hostname = false;
  Client unchecked;
  Status ok = unchecked.Init("unchecked", endpoint, unchecked_options);
  EXPECT_TRUE(ok.ok()) << ok.ToString();
  Client other_ca;
  unchecked_options.tls_ca_file = B("ca.pem");
  EXPECT_EQ(other_ca.Init("other", endpoint, unchecked_options).code(),
            StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace kvport
