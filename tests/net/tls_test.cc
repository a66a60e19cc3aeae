// SPDX-License-Identifier: Apache-2.0
// TLS streams over real loopback sockets: handshakes that succeed and fail for the right
// reasons, bytes that arrive whole through partial non-blocking writes, and the decrypted bytes
// a reader must not wait for.
#include "net/tls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "loopback_pair.h"
#include "net/stream.h"
#include "net/tcp_listener.h"

namespace kvport::net {
namespace {

// Certificates written once per test binary run, in a fresh directory.
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/kvport-tls-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    ASSERT_TRUE(WriteTestCertificates(*dir_ + "/a", {"node.example"}).ok());
    ASSERT_TRUE(WriteTestCertificates(*dir_ + "/b", {}).ok());  // another, unrelated CA
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string A(const char* file) { return *dir_ + "/a/" + file; }
  static std::string B(const char* file) { return *dir_ + "/b/" + file; }

  static std::shared_ptr<TlsContext> Server(bool mutual = false) {
    auto ctx = TlsContext::Create(TlsRole::kServer,
                                  {A("node.pem"), A("node.key"), mutual ? A("ca.pem") : ""});
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? *ctx : nullptr;
  }
  static std::shared_ptr<TlsContext> Client(const std::string& ca, bool with_cert = false) {
    auto ctx = TlsContext::Create(
        TlsRole::kClient, {with_cert ? A("client.pem") : "", with_cert ? A("client.key") : "", ca});
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? *ctx : nullptr;
  }

  // A connected pair, both ends non-blocking streams.
  struct Pair {
    Stream server;
    Stream client;
  };
  static Pair Connect() {
    auto listener = TcpListener::Listen(HostPort{"127.0.0.1", 0});
    EXPECT_TRUE(listener.ok());
    LoopbackPair raw = MakeLoopbackPair(**listener);
    EXPECT_TRUE(SetNonBlocking(raw.client.fd()).ok());
    return Pair{std::move(raw.server), Stream(std::move(raw.client))};
  }

  // Runs both handshakes to their end (bounded), returning each side's outcome.
  static std::pair<Status, Status> Handshake(Pair& p) {
    Status server_status, client_status;
    bool server_done = false, client_done = false;
    for (int i = 0; i < 10000 && !(server_done && client_done); ++i) {
      for (auto [stream, status, done] : {std::tuple{&p.server, &server_status, &server_done},
                                          std::tuple{&p.client, &client_status, &client_done}}) {
        if (*done) continue;
        Result<TlsWait> step = stream->Handshake();
        if (!step.ok()) {
          *status = step.status();
          *done = true;
        } else if (*step == TlsWait::kNone) {
          *done = true;
        }
      }
      if (!(server_done && client_done)) {
        pollfd fds[2] = {{p.server.fd(), POLLIN, 0}, {p.client.fd(), POLLIN, 0}};
        ::poll(fds, 2, 10);
      }
    }
    EXPECT_TRUE(server_done && client_done) << "handshake did not finish";
    return {server_status, client_status};
  }

  static std::string* dir_;
};
std::string* TlsTest::dir_ = nullptr;

// Writes all of `data` from `from` while reading into `to` (both non-blocking), with tiny socket
// buffers so that writes stop part-way and resume: Write's retry contract is exercised.
std::string Transfer(Stream& from, Stream& to, const std::string& data,
                     const std::vector<size_t>& pieces) {
  std::string received(data.size(), '\0');
  size_t written = 0, read = 0;
  for (int rounds = 0; rounds < 1000000 && read < data.size(); ++rounds) {
    if (written < data.size()) {
      // The rest, cut into ranges as `pieces` says (cycled): small ones are gathered.
      std::vector<iovec> iov;
      size_t at = written;
      for (size_t i = 0; at < data.size() && iov.size() < 64; ++i) {
        const size_t n = std::min(pieces[i % pieces.size()], data.size() - at);
        iov.push_back({const_cast<char*>(data.data() + at), n});
        at += n;
      }
      Result<IoProgress> w = from.WriteV(iov.data(), static_cast<int>(iov.size()));
      EXPECT_TRUE(w.ok()) << w.status().ToString();
      if (!w.ok()) break;
      written += w->bytes;
    }
    iovec in{received.data() + read, std::min<size_t>(7777, data.size() - read)};
    Result<IoProgress> r = to.ReadV(&in, 1);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) break;
    read += r->bytes;
    EXPECT_FALSE(r->eof);
  }
  received.resize(read);
  return received;
}

TEST_F(TlsTest, BytesArriveWholeThroughPartialWritesAndGatheredRecords) {
  Pair p = Connect();
  // Tiny send buffers: writes stop part-way (a tiny receive buffer would stall loopback TCP on
  // its window instead).
  ASSERT_TRUE(SetSendBufferSize(p.server.fd(), 4096).ok());
  ASSERT_TRUE(SetSendBufferSize(p.client.fd(), 4096).ok());
  ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
  ASSERT_TRUE(p.client.StartTls(*Client(A("ca.pem")), "localhost").ok());
  auto [s, c] = Handshake(p);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(c.ok()) << c.ToString();
  EXPECT_EQ(p.client.tls()->Describe().rfind("TLSv1.3 ", 0), 0u) << p.client.tls()->Describe();

  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>((i * 2654435761u) >> 13);
  // Headers and descriptors (gathered), then values (straight), both directions.
  auto first_difference = [&](const std::string& got) {
    size_t i = 0;
    while (i < got.size() && i < data.size() && got[i] == data[i])
      ++i;
    return i;
  };
  const std::string one = Transfer(p.server, p.client, data, {24, 100, 1 << 20, 3, 40000});
  EXPECT_EQ(first_difference(one), data.size());
  const std::string two = Transfer(p.client, p.server, data, {16 * 1024 - 1, 1, 5000, 70000});
  EXPECT_EQ(first_difference(two), data.size());
}

TEST_F(TlsTest, TheClientRefusesACertificateFromAnotherCa) {
  Pair p = Connect();
  ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
  ASSERT_TRUE(p.client.StartTls(*Client(B("ca.pem")), "localhost").ok());
  auto [s, c] = Handshake(p);
  EXPECT_EQ(c.code(), StatusCode::kPermissionDenied) << c.ToString();
  EXPECT_NE(c.message().find("certificate verification failed"), std::string::npos) << c.message();
  EXPECT_FALSE(s.ok());  // the server sees the client's alert
}

TEST_F(TlsTest, TheClientRefusesACertificateForAnotherName) {
  Pair p = Connect();
  ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
  ASSERT_TRUE(p.client.StartTls(*Client(A("ca.pem")), "other.example").ok());
  auto [s, c] = Handshake(p);
  EXPECT_EQ(c.code(), StatusCode::kPermissionDenied) << c.ToString();
  EXPECT_NE(c.message().find("mismatch"), std::string::npos) << c.message();

  // The names the certificate does carry are accepted: a DNS name and the loopback address.
  for (const char* name : {"node.example", "127.0.0.1"}) {
    Pair ok = Connect();
    ASSERT_TRUE(ok.server.StartTls(*Server(), "").ok());
    ASSERT_TRUE(ok.client.StartTls(*Client(A("ca.pem")), name).ok());
    auto [s2, c2] = Handshake(ok);
    EXPECT_TRUE(c2.ok()) << name << ": " << c2.ToString();
  }
}

TEST_F(TlsTest, MutualTlsRefusesAClientWithoutACertificate) {
  {
    Pair p = Connect();
    ASSERT_TRUE(p.server.StartTls(*Server(/*mutual=*/true), "").ok());
    ASSERT_TRUE(p.client.StartTls(*Client(A("ca.pem")), "localhost").ok());
    auto [s, c] = Handshake(p);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("certificate"), std::string::npos) << s.ToString();
  }
  Pair p = Connect();
  ASSERT_TRUE(p.server.StartTls(*Server(/*mutual=*/true), "").ok());
  ASSERT_TRUE(p.client.StartTls(*Client(A("ca.pem"), /*with_cert=*/true), "localhost").ok());
  auto [s, c] = Handshake(p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(c.ok()) << c.ToString();
  EXPECT_NE(p.server.tls()->PeerSubject().find("kvport client"), std::string::npos);
}

// A peer speaking something else than TLS fails the handshake; it does not hang it.
TEST_F(TlsTest, APlainPeerFailsTheHandshake) {
  Pair p = Connect();
  ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
  const std::string garbage(64, 'K');
  ASSERT_EQ(::write(p.client.fd(), garbage.data(), garbage.size()),
            static_cast<ssize_t>(garbage.size()));
  Status failed;
  for (int i = 0; i < 1000 && failed.ok(); ++i) {
    Result<TlsWait> step = p.server.Handshake();
    if (!step.ok()) failed = step.status();
  }
  EXPECT_EQ(failed.code(), StatusCode::kUnavailable) << failed.ToString();
}

// Decrypted bytes held by TLS are invisible to poll: buffered() must report them.
TEST_F(TlsTest, DecryptedBytesHeldAreReportedAsBuffered) {
  Pair p = Connect();
  ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
  ASSERT_TRUE(p.client.StartTls(*Client(A("ca.pem")), "localhost").ok());
  auto [s, c] = Handshake(p);
  ASSERT_TRUE(s.ok() && c.ok());
  const std::string frames = "0123456789abcdef";  // one record
  iovec out{const_cast<char*>(frames.data()), frames.size()};
  ASSERT_EQ(p.server.WriteV(&out, 1)->bytes, frames.size());
  pollfd pf{p.client.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&pf, 1, 5000), 1);
  char first[4];
  iovec in{first, sizeof(first)};
  Result<IoProgress> r = p.client.ReadV(&in, 1);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->bytes, 4u);
  EXPECT_EQ(p.client.buffered(), 12u);
  pf.revents = 0;
  EXPECT_EQ(::poll(&pf, 1, 0), 0) << "the socket itself has nothing more";
  Result<IoProgress> readable = p.client.Readable();
  ASSERT_TRUE(readable.ok());
  EXPECT_EQ(readable->bytes, 12u);
}

TEST_F(TlsTest, ContextErrorsNameTheFileAndTheProblem) {
  auto missing = TlsContext::Create(TlsRole::kServer, {A("nope.pem"), A("node.key"), ""});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("tls_cert_file '" + A("nope.pem") + "'"),
            std::string::npos)
      << missing.status().ToString();
  auto mismatch = TlsContext::Create(TlsRole::kServer, {A("node.pem"), B("node.key"), ""});
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("does not match"), std::string::npos)
      << mismatch.status().ToString();
  auto not_pem = TlsContext::Create(TlsRole::kClient, {"", "", A("node.key")});
  EXPECT_EQ(not_pem.status().code(), StatusCode::kInvalidArgument) << not_pem.status().ToString();
  auto no_ca = TlsContext::Create(TlsRole::kClient, {"", "", ""});
  EXPECT_NE(no_ca.status().message().find("tls_ca_file is not set"), std::string::npos);
  auto no_key = TlsContext::Create(TlsRole::kServer, {A("node.pem"), "", ""});
  EXPECT_NE(no_key.status().message().find("tls_key_file"), std::string::npos);
}

// A private key its group or other users may read is not private: refused, whichever role.
TEST_F(TlsTest, AKeyFileOthersMayReadIsRefused) {
  const std::string key = *dir_ + "/open.key";
  std::filesystem::copy_file(A("node.key"), key, std::filesystem::copy_options::overwrite_existing);
  for (mode_t mode : {0640, 0604, 0660, 0620}) {
    ASSERT_EQ(::chmod(key.c_str(), mode), 0);
    auto server = TlsContext::Create(TlsRole::kServer, {A("node.pem"), key, ""});
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument) << std::oct << mode;
    EXPECT_NE(server.status().message().find("chmod 600"), std::string::npos)
        << server.status().ToString();
    EXPECT_NE(server.status().message().find(key), std::string::npos);
    auto client = TlsContext::Create(TlsRole::kClient, {A("node.pem"), key, A("ca.pem")});
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument) << std::oct << mode;
  }
  ASSERT_EQ(::chmod(key.c_str(), 0400), 0);
  EXPECT_TRUE(TlsContext::Create(TlsRole::kServer, {A("node.pem"), key, ""}).ok());
  // The certificate and the CA are public: their mode is not looked at.
  ASSERT_EQ(::chmod(A("node.pem").c_str(), 0644), 0);
  EXPECT_TRUE(TlsContext::Create(TlsRole::kServer, {A("node.pem"), A("node.key"), ""}).ok());
}

// A FIFO (or another file that is not a regular file) is refused at once; opened as OpenSSL
// opens a path, a FIFO no one writes to blocks forever.
TEST_F(TlsTest, AFileThatIsNotARegularFileIsRefusedAtOnce) {
  const std::string fifo = *dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string directory = *dir_ + "/a";
  struct Case {
    TlsRole role;
    TlsFiles files;
    const char* named;
  };
  const std::vector<Case> cases = {
      {TlsRole::kServer, {A("node.pem"), fifo, ""}, "tls_key_file"},
      {TlsRole::kServer, {fifo, A("node.key"), ""}, "tls_cert_file"},
      {TlsRole::kServer, {A("node.pem"), A("node.key"), fifo}, "tls_ca_file"},
      {TlsRole::kClient, {"", "", fifo}, "tls_ca_file"},
      {TlsRole::kServer, {directory, A("node.key"), ""}, "tls_cert_file"},
  };
  for (const Case& c : cases) {
    auto created = std::async(std::launch::async,
                              [&] { return TlsContext::Create(c.role, c.files).status(); });
    if (created.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // Unblock the reader so that the test can end, then fail.
      const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (w >= 0) ::close(w);
      created.wait();
      ADD_FAILURE() << c.named << ": TlsContext::Create blocked on a FIFO";
      continue;
    }
    const Status status = created.get();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.named << ": " << status.ToString();
    EXPECT_NE(status.message().find(c.named), std::string::npos) << status.ToString();
    EXPECT_NE(status.message().find("not a regular file"), std::string::npos) << status.ToString();
  }
  ::unlink(fifo.c_str());
}

// A client with no host name to check the node's certificate against is refused, not left to
// accept any certificate the CA signed; tls_verify_hostname: false says that is intended.
TEST_F(TlsTest, AClientWithNoNameToVerifyFailsClosed) {
  {
    Pair p = Connect();
    Status started = p.client.StartTls(*Client(A("ca.pem")), "");
    EXPECT_EQ(started.code(), StatusCode::kInvalidArgument) << started.ToString();
    EXPECT_NE(started.message().find("tls_verify_hostname"), std::string::npos)
        << started.message();
  }
  auto unchecked = TlsContext::Create(TlsRole::kClient, {"", "", A("ca.pem"), false});
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().ToString();
  for (const char* name : {"", "other.example", "10.9.8.7"}) {
    Pair p = Connect();
    ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
    ASSERT_TRUE(p.client.StartTls(**unchecked, name).ok()) << name;
    auto [s, c] = Handshake(p);
    EXPECT_TRUE(c.ok()) << "'" << name << "': " << c.ToString();
  }
  // The chain is still verified.
  auto other_ca = TlsContext::Create(TlsRole::kClient, {"", "", B("ca.pem"), false});
  ASSERT_TRUE(other_ca.ok());
  Pair p = Connect();
  ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
  ASSERT_TRUE(p.client.StartTls(**other_ca, "").ok());
  auto [s, c] = Handshake(p);
  EXPECT_EQ(c.code(), StatusCode::kPermissionDenied) << c.ToString();
}

// The names of a verified client certificate are known to the server session once its
// handshake is done, and only with mutual TLS.
TEST_F(TlsTest, AServerSessionKnowsItsVerifiedClientCertificatesNames) {
  {
    Pair p = Connect();
    ASSERT_TRUE(p.server.StartTls(*Server(/*mutual=*/true), "").ok());
    ASSERT_TRUE(p.client.StartTls(*Client(A("ca.pem"), /*with_cert=*/true), "localhost").ok());
    EXPECT_TRUE(p.server.tls()->PeerCertificateNames().empty()) << "before the handshake";
    auto [s, c] = Handshake(p);
    ASSERT_TRUE(s.ok() && c.ok()) << s.ToString() << " / " << c.ToString();
    EXPECT_EQ(p.server.tls()->PeerCertificateNames(), std::vector<std::string>{"kvport client"});
    EXPECT_TRUE(p.client.tls()->PeerCertificateNames().empty()) << "a client knows none";
  }
  // Without mutual TLS the certificate was not asked for: it names nobody.
  Pair p = Connect();
  ASSERT_TRUE(p.server.StartTls(*Server(), "").ok());
  ASSERT_TRUE(p.client.StartTls(*Client(A("ca.pem"), /*with_cert=*/true), "localhost").ok());
  auto [s, c] = Handshake(p);
  ASSERT_TRUE(s.ok() && c.ok());
  EXPECT_TRUE(p.server.tls()->PeerCertificateNames().empty());
}

}  // namespace
}  // namespace kvport::net
