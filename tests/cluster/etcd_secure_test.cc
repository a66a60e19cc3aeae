// SPDX-License-Identifier: Apache-2.0
// EtcdClient with TLS (an etcd serving https, requiring client certificates) and with etcd's
// authentication (users, tokens), against real etcd processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cluster/etcd_client.h"
#include "etcd_process.h"
#include "etcd_test_util.h"
#include "net/tls.h"
#include "watch_recorder.h"

namespace kvport::cluster {
namespace {

using kvport::testing::EtcdProcess;
using kvport::testing::EtcdProcessOptions;
using kvport::testing::WaitFor;
using kvport::testing::WatchRecorder;
using namespace std::chrono_literals;

constexpr auto kRequestTimeout = 3000ms;

// A temporary folder removed with the object.
class TempDir {
 public:
  TempDir() {
    char path[] = "/tmp/kvport-etcd-secure-XXXXXX";
    path_ = ::mkdtemp(path) ? path : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// --- TLS ---------------------------------------------------------------------------------

class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    Status written = net::WriteTestCertificates(certs_->path(), {});
    ASSERT_TRUE(written.ok()) << written.ToString();
    // Another CA, which did not sign etcd's certificate.
    other_ = new TempDir();
    written = net::WriteTestCertificates(other_->path(), {});
    ASSERT_TRUE(written.ok()) << written.ToString();
    EtcdProcessOptions options;
    options.tls_dir = certs_->path();
    options.client_cert_auth = true;
    auto started = EtcdProcess::Start(options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    etcd_ = std::move(started).value().release();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    delete certs_;
    delete other_;
    etcd_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(etcd_, nullptr); }

  static EtcdOptions TlsOptions() {
    EtcdOptions options;
    options.endpoints = {etcd_->url()};
    options.request_timeout = kRequestTimeout;
    options.tls_ca_file = certs_->path() + "/ca.pem";
    options.tls_cert_file = certs_->path() + "/client.pem";
    options.tls_key_file = certs_->path() + "/client.key";
    return options;
  }

  static inline EtcdProcess* etcd_ = nullptr;
  static inline TempDir* certs_ = nullptr;
  static inline TempDir* other_ = nullptr;
};

TEST_F(EtcdTlsTest, EveryCallAndTheWatchWorkOverTls) {
  auto opened = EtcdClient::Open(TlsOptions());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdClient& client = **opened;
  EXPECT_EQ(client.Describe(), "https://" + etcd_->endpoint());
  auto start = client.RangePrefix("tls/");
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  WatchRecorder watch;
  watch.Start(client, "tls/", start->revision + 1, 60s);
  auto lease = client.GrantLease(30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client.Put("tls/a", "1", *lease).ok());
  EXPECT_TRUE(client.KeepAlive(*lease).ok());
  ASSERT_TRUE(client.Put("tls/b", "2").ok());
  auto range = client.RangePrefix("tls/");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  ASSERT_EQ(range->kvs.size(), 2u);
  EXPECT_EQ(range->kvs[0].value, "1");
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 2; }));
  EXPECT_TRUE(client.RevokeLease(*lease).ok());
  EXPECT_TRUE(watch.Stop().ok());
  EXPECT_EQ(watch.events()[1].kv.key, "tls/b");

  // A plain "host:port" endpoint with the CA file set is reached over TLS too.
  EtcdOptions bare = TlsOptions();
  bare.endpoints = {etcd_->endpoint()};
  auto plain_spelling = EtcdClient::Open(bare);
  ASSERT_TRUE(plain_spelling.ok());
  EXPECT_TRUE((*plain_spelling)->RangePrefix("tls/").ok());
}

TEST_F(EtcdTlsTest, AnEtcdCertificateFromAnotherCaIsRefused) {
  EtcdOptions options = TlsOptions();
  options.tls_ca_file = other_->path() + "/ca.pem";
  auto opened = EtcdClient::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Status put = (*opened)->Put("tls/x", "v");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
  EXPECT_NE(put.message().find("TLS"), std::string::npos) << put.ToString();
  std::atomic<bool> stop{false};
  Status watched = (*opened)->Watch(
      "tls/", 0, [](const std::vector<EtcdEvent>&) {}, stop, 10s);
  EXPECT_NE(watched.code(), StatusCode::kOk);
}

TEST_F(EtcdTlsTest, WithoutAClientCertificateEtcdRefuses) {
  EtcdOptions options = TlsOptions();
  options.tls_cert_file.clear();
  options.tls_key_file.clear();
  auto opened = EtcdClient::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Status put = (*opened)->Put("tls/x", "v");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
  EXPECT_NE(put.message().find(etcd_->endpoint()), std::string::npos) << put.ToString();
  EXPECT_NE(put.message().find("client certificate"), std::string::npos) << put.ToString();

  // A client certificate from a CA etcd does not trust is refused the same way.
  options.tls_cert_file = other_->path() + "/client.pem";
  options.tls_key_file = other_->path() + "/client.key";
  opened = EtcdClient::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  put = (*opened)->Put("tls/x", "v");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
}

TEST_F(EtcdTlsTest, PlainHttpToATlsEtcdFailsWithinTheTimeout) {
  auto opened = EtcdClient::Open({etcd_->endpoint()}, 1000ms);
  ASSERT_TRUE(opened.ok());
  Status put = (*opened)->Put("tls/x", "v");
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
}

TEST(EtcdTlsOpen, RefusesIncompleteSettingsNamingThem) {
  EtcdOptions https;
  https.endpoints = {"https://127.0.0.1:2379"};
  auto opened = EtcdClient::Open(https);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("etcd_tls_ca_file"), std::string::npos);

  EtcdOptions mixed = https;
  mixed.endpoints.push_back("http://127.0.0.1:2380");
  mixed.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(EtcdClient::Open(mixed).status().code(), StatusCode::kInvalidArgument);

  EtcdOptions missing_ca = https;
  missing_ca.tls_ca_file = "/nonexistent/ca.pem";
  opened = EtcdClient::Open(missing_ca);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("/nonexistent/ca.pem"), std::string::npos)
      << opened.status().ToString();

  EtcdOptions half = https;
  half.tls_ca_file = "/nonexistent/ca.pem";
  half.tls_cert_file = "/nonexistent/client.pem";
  opened = EtcdClient::Open(half);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("etcd_tls_key_file"), std::string::npos)
      << opened.status().ToString();
}

// --- Authentication ----------------------------------------------------------------------

constexpr char kRootPassword[] = "s3cret-Pa55";

class EtcdAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto started = EtcdProcess::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    etcd_ = std::move(started).value().release();
    Status enabled = etcd_->EnableAuth(kRootPassword);
    ASSERT_TRUE(enabled.ok()) << enabled.ToString();
    WriteFile(dir_->path() + "/password", std::string(kRootPassword) + "\n");
    WriteFile(dir_->path() + "/wrong", "not-the-password\n");
  }
  static void TearDownTestSuite() {
    delete etcd_;
    delete dir_;
    etcd_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(etcd_, nullptr); }

  static EtcdOptions AuthOptions(const std::string& password_file = "password") {
    EtcdOptions options;
    options.endpoints = {etcd_->endpoint()};
    options.request_timeout = kRequestTimeout;
    options.user = "root";
    options.password_file = dir_->path() + "/" + password_file;
    return options;
  }

  static inline EtcdProcess* etcd_ = nullptr;
  static inline TempDir* dir_ = nullptr;
};

TEST_F(EtcdAuthTest, CallsAndWatchesCarryTheToken) {
  auto opened = EtcdClient::Open(AuthOptions());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdClient& client = **opened;
  auto start = client.RangePrefix("auth/");
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  WatchRecorder watch;
  watch.Start(client, "auth/", start->revision + 1, 60s);
  auto lease = client.GrantLease(30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client.Put("auth/k", "v", *lease).ok());
  EXPECT_TRUE(client.KeepAlive(*lease).ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 1; }));
  EXPECT_TRUE(client.RevokeLease(*lease).ok());
  EXPECT_TRUE(watch.Stop().ok());
}

TEST_F(EtcdAuthTest, WithoutCredentialsItIsPermissionDeniedNamingTheSettings) {
  auto opened = EtcdClient::Open({etcd_->endpoint()}, kRequestTimeout);
  ASSERT_TRUE(opened.ok());
  Status put = (*opened)->Put("auth/k", "v");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
  EXPECT_NE(put.message().find("etcd_user"), std::string::npos) << put.ToString();
  std::atomic<bool> stop{false};
  Status watched = (*opened)->Watch(
      "auth/", 0, [](const std::vector<EtcdEvent>&) {}, stop, 10s);
  EXPECT_EQ(watched.code(), StatusCode::kPermissionDenied) << watched.ToString();
}

TEST_F(EtcdAuthTest, AWrongPasswordIsPermissionDeniedNamingTheUserNotThePassword) {
  auto opened = EtcdClient::Open(AuthOptions("wrong"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Status put = (*opened)->Put("auth/k", "v");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
  EXPECT_NE(put.message().find("'root'"), std::string::npos) << put.ToString();
  EXPECT_EQ(put.message().find("not-the-password"), std::string::npos) << put.ToString();
  std::atomic<bool> stop{false};
  Status watched = (*opened)->Watch(
      "auth/", 0, [](const std::vector<EtcdEvent>&) {}, stop, 10s);
  EXPECT_EQ(watched.code(), StatusCode::kPermissionDenied) << watched.ToString();
  EXPECT_EQ(watched.message().find("not-the-password"), std::string::npos);
}

TEST_F(EtcdAuthTest, APasswordFileThatCannotBeReadIsRefusedAtOpen) {
  auto opened = EtcdClient::Open(AuthOptions("missing"));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find(dir_->path() + "/missing"), std::string::npos);
  EtcdOptions no_file = AuthOptions();
  no_file.password_file.clear();
  EXPECT_EQ(EtcdClient::Open(no_file).status().code(), StatusCode::kInvalidArgument);
}

// etcd's simple tokens live in its memory: after a restart it refuses the token the client
// holds. The client authenticates again once and the call (and a new watch) goes through.
TEST_F(EtcdAuthTest, ATokenEtcdNoLongerKnowsIsRenewed) {
  auto opened = EtcdClient::Open(AuthOptions());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdClient& client = **opened;
  ASSERT_TRUE(client.Put("auth/renew/a", "1").ok());
  ASSERT_TRUE(etcd_->Restart().ok());
  // The watch is first to meet the stale token: etcd cancels it as unauthenticated.
  WatchRecorder watch;
  watch.Start(client, "auth/renew/", 1, 60s);
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 1; }));
  EXPECT_TRUE(watch.Stop().ok());
  ASSERT_TRUE(etcd_->Restart().ok());
  Status put = client.Put("auth/renew/b", "2");
  EXPECT_TRUE(put.ok()) << put.ToString();
  auto range = client.RangePrefix("auth/renew/");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(range->kvs.size(), 2u);
}

}  // namespace
}  // namespace kvport::cluster
