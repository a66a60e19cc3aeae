// SPDX-License-Identifier: Apache-2.0
// Access control: tokens presented in HELLO, what each grants, the token file and
// its reload, the loopback rule, and what STATS, LIST and shared memory show a tenant. Real
// in-process nodes on loopback and the real C++ client, plus the raw test client where an old
// protocol version is needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "kvport/client.h"
#include "kvport/server.h"
#include "kvport/ucx.h"
#include "server/access_policy.h"
#include "server/token_file.h"
#include "test_client.h"

namespace kvport {
namespace {

using ::testing::HasSubstr;

constexpr char kAdminSecret[] = "admin-secret-0123456789";
constexpr char kTenantSecret[] = "tenant-a-secret-0123456";
constexpr char kReaderSecret[] = "reader-secret-012345678";

std::vector<AccessToken> Tokens() {
  return {
      {"admin", kAdminSecret, {"*"}, {"*"}, true, std::nullopt, {}},
      {"tenant-a", kTenantSecret, {"a/*"}, {"a/*"}, false, "a/engine", {}},
      {"reader", kReaderSecret, {"a/*", "shared"}, {}, false, std::nullopt, {}},
  };
}

ServerOptions NodeOptions() {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.capacity_bytes = 16 << 20;
  options.threads = 1;
  options.shutdown_grace = std::chrono::seconds(2);
  return options;
}

std::unique_ptr<Server> StartNode(const ServerOptions& options) {
  Result<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::unique_ptr<Client> Connect(const Server& node, const std::string& token,
                                Status* status = nullptr) {
  auto client = std::make_unique<Client>();
  InitOptions init;
  init.token = token;
  init.transport_type = 1;  // TCP: these tests are about the session, not the data path
  init.connections = 1;
  init.timeout = std::chrono::seconds(5);
  Status s = client->Init("access-test", node.address(), init);
  if (status != nullptr) *status = s;
  return s.ok() ? std::move(client) : nullptr;
}

Result<BatchResult> Put(Client& c, const std::string& ns, const std::string& key,
                        std::string value) {
  IOBuffers values;
  values.Append(value.data(), value.size());
  SetOptions options;
  options.ns = ns;
  return c.MSet({key}, values, options);
}

Result<GetResult> Get(Client& c, const std::string& ns, const std::string& key, bool any = false) {
  static thread_local char buffer[64];
  IOBuffers buffers;
  buffers.Append(buffer, sizeof(buffer));
  GetOptions options;
  options.ns = any ? "" : ns;
  options.any_namespace = any;
  return c.MGet({key}, options, buffers);
}

std::string WriteTokenFile(const std::string& text, mode_t mode = 0600) {
  char path[] = "/tmp/kvport-tokens-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  ::chmod(path, mode);
  return path;
}

void Rewrite(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// --- the policy ----------------------------------------------------------------------------

TEST(AccessPolicyTest, PatternsAreNamesPrefixesOrEverything) {
  server::NamespaceSet set({"", "exact", "tenant-a/*"});
  EXPECT_TRUE(set.Contains(""));
  EXPECT_TRUE(set.Contains("exact"));
  EXPECT_FALSE(set.Contains("exact2"));
  EXPECT_TRUE(set.Contains("tenant-a/"));
  EXPECT_TRUE(set.Contains("tenant-a/x/y"));
  EXPECT_FALSE(set.Contains("tenant-b/x"));
  EXPECT_FALSE(set.everything());
  EXPECT_TRUE(server::NamespaceSet({"*"}).Contains("anything"));
  EXPECT_FALSE(server::NamespaceSet(std::vector<std::string>{}).Contains(""));
}

TEST(AccessPolicyTest, OnlyAcceptedSecretsAuthenticate) {
  server::AccessPolicy policy(/*required=*/true, Tokens());
  Result<std::shared_ptr<const server::Grant>> tenant = policy.Authenticate(kTenantSecret);
  ASSERT_TRUE(tenant.ok()) << tenant.status().ToString();
  EXPECT_EQ((*tenant)->name(), "tenant-a");
  EXPECT_TRUE((*tenant)->may_write("a/1"));
  EXPECT_FALSE((*tenant)->may_read("b"));
  EXPECT_FALSE((*tenant)->admin());
  EXPECT_FALSE((*tenant)->grants_every_namespace());
  EXPECT_TRUE((*policy.Authenticate(kAdminSecret))->grants_every_namespace());
  // A prefix, an extension or nothing at all is refused.
  for (std::string wrong : {std::string(kTenantSecret).substr(0, 10),
                            std::string(kTenantSecret) + "x", std::string()}) {
    EXPECT_EQ(policy.Authenticate(wrong).status().code(), StatusCode::kPermissionDenied) << wrong;
  }
  // An open node grants everything, whatever is presented.
  server::AccessPolicy open(/*required=*/false, {});
  EXPECT_TRUE((*open.Authenticate(""))->grants_every_namespace());
}

TEST(AccessPolicyTest, ReplacingTokensReachesSessionsAtTheirNextRequest) {
  server::AccessPolicy policy(true, Tokens());
  server::SessionAccess session;
  ASSERT_TRUE(session.Authenticate(policy, kReaderSecret).ok());
  EXPECT_FALSE(session.grant().may_write("a/1"));
  std::vector<AccessToken> widened = Tokens();
  widened[2].write = {"a/*"};
  policy.Replace(widened);
  ASSERT_TRUE(session.Refresh(policy).ok());
  EXPECT_TRUE(session.grant().may_write("a/1"));
  widened.pop_back();  // the reader's token is revoked
  policy.Replace(widened);
  EXPECT_EQ(session.Refresh(policy).code(), StatusCode::kPermissionDenied);
}

TEST(AccessPolicyTest, TokenListsAreChecked) {
  std::vector<AccessToken> tokens = Tokens();
  EXPECT_TRUE(server::ValidateTokens(tokens).ok());
  tokens[1].secret = "short";
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("token 'tenant-a'"));
  tokens = Tokens();
  tokens[1].name = "admin";
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("two tokens are named"));
  tokens = Tokens();
  tokens[1].secret = kAdminSecret;
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("same secret"));
  tokens = Tokens();
  tokens[1].read = {"a*b"};
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("'*' before its end"));
  // A default namespace must be one the token may read and write.
  tokens = Tokens();
  tokens[1].default_namespace = "b";
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("may read and write"));
  tokens[1].default_namespace = std::string(256, 'a');
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("at most 255"));
  tokens = Tokens();
  tokens[2].default_namespace = "shared";  // readable, not writable
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("may read and write"));
  // A secret is one word: whitespace and control characters are refused.
  for (const char* secret : {"0123456789 abcdef", "0123456789abcdef\n", "0123456789\tabcdef"}) {
    tokens = Tokens();
    tokens[1].secret = secret;
    EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("holds a space"));
  }
}

// A client certificate stands for the token that lists one of its names, when the client
// presents no secret; a secret presented decides alone; a certificate no token lists is where a
// client without a token is.
TEST(AccessPolicyTest, ACertificateHoldsTheGrantOfTheTokenThatNamesIt) {
  std::vector<AccessToken> tokens = Tokens();
  AccessToken by_certificate;
  by_certificate.name = "prefill-hosts";
  by_certificate.cert_names = {"prefill-0.example", "spiffe://cluster/prefill"};
  by_certificate.read = {"p/*"};
  by_certificate.write = {"p/*"};
  tokens.push_back(by_certificate);
  ASSERT_TRUE(server::ValidateTokens(tokens).ok());
  server::AccessPolicy policy(/*required=*/true, tokens);

  Result<std::shared_ptr<const server::Grant>> mapped =
      policy.Authenticate("", {"some CN", "prefill-0.example"});
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_EQ((*mapped)->name(), "prefill-hosts");
  EXPECT_TRUE((*mapped)->may_write("p/1"));
  EXPECT_FALSE((*mapped)->may_read("a/1"));
  EXPECT_FALSE((*mapped)->admin());
  EXPECT_EQ((*policy.Authenticate("", {"spiffe://cluster/prefill"}))->name(), "prefill-hosts");
  // Names are compared exactly.
  EXPECT_EQ(policy.Authenticate("", {"PREFILL-0.example"}).status().code(),
            StatusCode::kPermissionDenied);
  Status unmapped = policy.Authenticate("", {"kvport client"}).status();
  EXPECT_EQ(unmapped.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(unmapped.message(), HasSubstr("cert_names"));
  // A secret wins over the certificate.
  EXPECT_EQ((*policy.Authenticate(kTenantSecret, {"prefill-0.example"}))->name(), "tenant-a");
  // A certificate-only token has no secret an empty one could match.
  EXPECT_EQ(policy.Authenticate("", {}).status().code(), StatusCode::kPermissionDenied);
  // Names of one certificate in two tokens: refused, not left to list order.
  tokens[1].cert_names = {"tenant-a.example"};
  server::AccessPolicy two(/*required=*/true, tokens);
  EXPECT_THAT(two.Authenticate("", {"tenant-a.example", "prefill-0.example"}).status().message(),
              HasSubstr("two tokens"));

  // A session keeps its certificate's names: a reload that drops the mapping revokes it.
  server::SessionAccess session;
  ASSERT_TRUE(session.Authenticate(policy, "", {"prefill-0.example"}).ok());
  tokens.pop_back();
  policy.Replace(tokens);
  EXPECT_EQ(session.Refresh(policy).code(), StatusCode::kPermissionDenied);
}

TEST(AccessPolicyTest, CertificateNamesAreChecked) {
  std::vector<AccessToken> tokens = Tokens();
  tokens[1].cert_names = {"a.example"};
  tokens[1].secret.clear();  // held by certificate only
  EXPECT_TRUE(server::ValidateTokens(tokens).ok());
  tokens[2].cert_names = {"a.example"};
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("listed by another token"));
  tokens[2].cert_names = {""};
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("empty"));
  tokens[2].cert_names.clear();
  tokens[2].secret.clear();  // neither a secret nor a certificate
  EXPECT_THAT(server::ValidateTokens(tokens).message(), HasSubstr("token 'reader'"));
}

// --- the token file ------------------------------------------------------------------------

TEST(TokenFileTest, ParsesEveryField) {
  Result<std::vector<AccessToken>> tokens = server::ParseTokens(
      "tokens:\n"
      "  - name: prefill\n"
      "    secret: \"0123456789abcdef\"\n"
      "    read: [\"lmcache/*\", \"\"]\n"
      "    write: [\"lmcache/*\"]\n"
      "    namespace: lmcache/prefill\n"
      "  - name: ops\n"
      "    secret: fedcba9876543210\n"
      "    admin: true\n",
      "tokens.yaml");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].name, "prefill");
  EXPECT_EQ((*tokens)[0].read, (std::vector<std::string>{"lmcache/*", ""}));
  EXPECT_EQ((*tokens)[0].write, (std::vector<std::string>{"lmcache/*"}));
  EXPECT_FALSE((*tokens)[0].admin);
  EXPECT_EQ((*tokens)[0].default_namespace, "lmcache/prefill");
  EXPECT_TRUE((*tokens)[1].admin);
  EXPECT_FALSE((*tokens)[1].default_namespace.has_value());
  EXPECT_TRUE((*tokens)[1].read.empty());
  EXPECT_TRUE(server::ParseTokens("", "empty.yaml")->empty());

  Result<std::vector<AccessToken>> by_certificate = server::ParseTokens(
      "tokens:\n"
      "  - name: decode\n"
      "    cert_names: [decode-0.example, \"spiffe://c/decode\"]\n"
      "    read: [\"d/*\"]\n",
      "tokens.yaml");
  ASSERT_TRUE(by_certificate.ok()) << by_certificate.status().ToString();
  EXPECT_EQ((*by_certificate)[0].cert_names,
            (std::vector<std::string>{"decode-0.example", "spiffe://c/decode"}));
  EXPECT_TRUE((*by_certificate)[0].secret.empty());
}

TEST(TokenFileTest, RefusesWhatItCannotTrust) {
  auto error = [](const std::string& text) {
    return server::ParseTokens(text, "t.yaml").status().message();
  };
  EXPECT_THAT(error("tokens:\n  - name: x\n    secret: 0123456789abcdef\n    raed: [a]\n"),
              HasSubstr("unknown field 'raed'"));
  EXPECT_THAT(error("tokens:\n  - name: x\n"), HasSubstr("has no `secret`"));
  EXPECT_THAT(error("tokens:\n  - name: x\n    secret: 0123456789abcdef\n    admin: maybe\n"),
              HasSubstr("`admin` must be true or false"));
  EXPECT_THAT(error("tokens: [\n"), HasSubstr("malformed YAML"));
  EXPECT_THAT(error("other: 1\n"), HasSubstr("`tokens:` list"));
  EXPECT_THAT(error("tokens:\n  - name: x\n    secret: 0123456789abcdef\n    namespace: [a]\n"),
              HasSubstr("`namespace` must be a string"));
  // A quoted secret whose closing quote is missing: YAML folds the next lines into it.
  EXPECT_THAT(error("tokens:\n"
                    "  - name: x\n"
                    "    secret: \"0123456789abcdef\n"
                    "    admin: true\"\n"),
              HasSubstr("closing quote missing"));
  // Secrets other users can read are not secret.
  const std::string path = WriteTokenFile("tokens: []\n", 0644);
  Result<std::vector<AccessToken>> loaded = server::LoadTokenFile(path);
  EXPECT_THAT(loaded.status().message(), HasSubstr("chmod 600")) << loaded.status().ToString();
  ::chmod(path.c_str(), 0600);
  EXPECT_TRUE(server::LoadTokenFile(path).ok());
  ::unlink(path.c_str());
}

// --- a node that requires tokens -----------------------------------------------------------

class TokenNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options = NodeOptions();
    options.tokens = Tokens();
    node_ = StartNode(options);
    ASSERT_NE(node_, nullptr);
  }
  std::unique_ptr<Server> node_;
};

TEST_F(TokenNodeTest, AClientWithoutAnAcceptedTokenIsRefusedAtHello) {
  Status status;
  EXPECT_EQ(Connect(*node_, "", &status), nullptr);
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("requires a token"));
  EXPECT_EQ(Connect(*node_, "not-a-token-of-this-node", &status), nullptr);
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied) << status.ToString();
  EXPECT_GE(node_->Stats().Get("auth_failures"), 2u);
  // A client of protocol 3, which cannot present a token, is told why.
  Result<testing::TestClient> old = testing::TestClient::Connect(node_->port(), false);
  ASSERT_TRUE(old.ok());
  Status hello = old->Hello(/*max_version=*/3);
  EXPECT_EQ(hello.code(), StatusCode::kNotSupported) << hello.ToString();
  EXPECT_THAT(hello.message(), HasSubstr("requires a token"));
}

// The token's `namespace` reaches its client at HELLO (protocol version 5): the `eic` drop-in
// reads it for calls that never name a namespace.
TEST_F(TokenNodeTest, AClientLearnsItsTokensDefaultNamespaceAtHello) {
  std::unique_ptr<Client> tenant = Connect(*node_, kTenantSecret);
  ASSERT_NE(tenant, nullptr);
  EXPECT_EQ(tenant->default_namespace(), std::optional<std::string>("a/engine"));
  std::unique_ptr<Client> admin = Connect(*node_, kAdminSecret);
  ASSERT_NE(admin, nullptr);
  EXPECT_FALSE(admin->default_namespace().has_value());
  // A protocol 4 session is answered the HELLO it always was (no default namespace field).
  Result<testing::TestClient> old = testing::TestClient::Connect(node_->port(), false);
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(old->Hello(/*max_version=*/4, kTenantSecret).ok());
  EXPECT_FALSE(old->default_namespace().has_value());
  EXPECT_TRUE(old->Ping().ok());
  Result<testing::TestClient> v5 = testing::TestClient::Connect(node_->port(), false);
  ASSERT_TRUE(v5.ok());
  ASSERT_TRUE(v5->Hello(/*max_version=*/5, kTenantSecret).ok());
  EXPECT_EQ(v5->default_namespace(), std::optional<std::string>("a/engine"));
  EXPECT_FALSE(Client().default_namespace().has_value());  // before Init
}

TEST_F(TokenNodeTest, ATokenReadsAndWritesOnlyItsNamespacesPerKey) {
  std::unique_ptr<Client> admin = Connect(*node_, kAdminSecret);
  std::unique_ptr<Client> tenant = Connect(*node_, kTenantSecret);
  ASSERT_NE(admin, nullptr);
  ASSERT_NE(tenant, nullptr);
  ASSERT_EQ(Put(*admin, "b", "secret-of-b", "bbb")->status, BatchCode::kSuccess);

  Result<BatchResult> own = Put(*tenant, "a/1", "k", "aaa");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->codes[0], KeyCode::kSuccess);
  Result<BatchResult> foreign = Put(*tenant, "b", "k", "x");
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(foreign->codes[0], KeyCode::kPermissionDenied);
  EXPECT_THAT(foreign->error.message(), HasSubstr("PERMISSION_DENIED"));

  EXPECT_EQ(Get(*tenant, "a/1", "k")->codes[0], KeyCode::kSuccess);
  // Another tenant's key is a permission error, never a silent miss...
  EXPECT_EQ(Get(*tenant, "b", "secret-of-b")->codes[0], KeyCode::kPermissionDenied);
  ExistOptions exist;
  exist.ns = "b";
  EXPECT_EQ(tenant->MExist({"secret-of-b"}, exist)->codes[0], KeyCode::kPermissionDenied);
  DelOptions del;
  del.ns = "b";
  EXPECT_EQ(tenant->MDel({"secret-of-b"}, del)->codes[0], KeyCode::kPermissionDenied);
  // ...and an any-namespace search covers only the namespaces the token may read.
  EXPECT_EQ(Get(*tenant, "", "secret-of-b", /*any=*/true)->codes[0], KeyCode::kKeyNotExist);
  EXPECT_EQ(Get(*tenant, "", "k", /*any=*/true)->codes[0], KeyCode::kSuccess);
  DelOptions del_any;
  del_any.any_namespace = true;
  EXPECT_EQ(tenant->MDel({"secret-of-b"}, del_any)->codes[0], KeyCode::kKeyNotExist);
  EXPECT_EQ(Get(*admin, "b", "secret-of-b")->codes[0], KeyCode::kSuccess);  // untouched
}

TEST_F(TokenNodeTest, AReadOnlyTokenCannotWriteOrDelete) {
  std::unique_ptr<Client> tenant = Connect(*node_, kTenantSecret);
  std::unique_ptr<Client> reader = Connect(*node_, kReaderSecret);
  ASSERT_NE(tenant, nullptr);
  ASSERT_NE(reader, nullptr);
  ASSERT_EQ(Put(*tenant, "a/1", "k", "v")->status, BatchCode::kSuccess);
  EXPECT_EQ(Get(*reader, "a/1", "k")->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(Put(*reader, "a/1", "k", "overwritten")->codes[0], KeyCode::kPermissionDenied);
  DelOptions del;
  del.ns = "a/1";
  EXPECT_EQ(reader->MDel({"k"}, del)->codes[0], KeyCode::kPermissionDenied);
  EXPECT_EQ(Get(*tenant, "a/1", "k")->value_sizes[0], 1u);  // still "v"
}

TEST_F(TokenNodeTest, StatsAndListShowOnlyWhatTheTokenMaySee) {
  std::unique_ptr<Client> admin = Connect(*node_, kAdminSecret);
  std::unique_ptr<Client> tenant = Connect(*node_, kTenantSecret);
  ASSERT_NE(admin, nullptr);
  ASSERT_NE(tenant, nullptr);
  ASSERT_EQ(Put(*admin, "b", "kb", "1")->status, BatchCode::kSuccess);
  ASSERT_EQ(Put(*admin, "a/1", "ka", "1")->status, BatchCode::kSuccess);

  auto names = [](const NodeStats& stats) {
    std::vector<std::string> out;
    for (const auto& ns : stats.namespaces)
      out.push_back(ns.name);
    return out;
  };
  EXPECT_EQ(names(*tenant->Stats()), std::vector<std::string>{"a/1"});
  EXPECT_EQ(names(*admin->Stats()), (std::vector<std::string>{"a/1", "b"}));
  EXPECT_EQ(tenant->Stats()->Get("auth_required"), 1u);

  Result<KeyPage> listed = tenant->List("a/1");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->keys, std::vector<std::string>{"ka"});
  Result<KeyPage> refused = tenant->List("b");
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
  // The refusal is the request's alone: the connection goes on.
  EXPECT_TRUE(tenant->Ping().ok());
  EXPECT_EQ(admin->List("b")->keys, std::vector<std::string>{"kb"});
}

TEST(TokenFileNodeTest, SighupReloadRevokesAndGrantsWithoutARestart) {
  const std::string path = WriteTokenFile(
      "tokens:\n"
      "  - name: old\n"
      "    secret: old-secret-0123456789\n"
      "    read: [\"*\"]\n"
      "    write: [\"*\"]\n");
  ServerOptions options = NodeOptions();
  options.tokens_file = path;
  std::unique_ptr<Server> node = StartNode(options);
  ASSERT_NE(node, nullptr);
  std::unique_ptr<Client> old_client = Connect(*node, "old-secret-0123456789");
  ASSERT_NE(old_client, nullptr);
  ASSERT_EQ(Put(*old_client, "", "k", "v")->status, BatchCode::kSuccess);

  // An invalid file changes nothing.
  Rewrite(path, "tokens: [\n");
  EXPECT_FALSE(node->ReloadTokens().ok());
  EXPECT_EQ(Get(*old_client, "", "k")->codes[0], KeyCode::kSuccess);

  Rewrite(path,
          "tokens:\n"
          "  - name: new\n"
          "    secret: new-secret-0123456789\n"
          "    read: [\"*\"]\n");
  ASSERT_TRUE(node->ReloadTokens().ok());
  // The revoked token's session is refused at its next request, and cannot come back.
  Result<GetResult> revoked = Get(*old_client, "", "k");
  EXPECT_FALSE(revoked.ok() && revoked->codes[0] == KeyCode::kSuccess);
  Status status;
  EXPECT_EQ(Connect(*node, "old-secret-0123456789", &status), nullptr);
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied);
  std::unique_ptr<Client> new_client = Connect(*node, "new-secret-0123456789");
  ASSERT_NE(new_client, nullptr);
  EXPECT_EQ(Get(*new_client, "", "k")->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(Put(*new_client, "", "k", "w")->codes[0], KeyCode::kPermissionDenied);
  ::unlink(path.c_str());
}

TEST(TokenFileNodeTest, ClientsReadTheTokenFromAFileOrTheEnvironment) {
  ServerOptions options = NodeOptions();
  options.tokens = Tokens();
  std::unique_ptr<Server> node = StartNode(options);
  ASSERT_NE(node, nullptr);
  const std::string token_file = WriteTokenFile(std::string(kTenantSecret) + "\n");
  Client from_file;
  InitOptions init;
  init.transport_type = 1;
  init.token_file = token_file;
  ASSERT_TRUE(from_file.Init("t", node->address(), init).ok());
  EXPECT_EQ(Put(from_file, "a/1", "k", "v")->codes[0], KeyCode::kSuccess);
  ::unlink(token_file.c_str());

  ::setenv("KVPORT_TOKEN", kReaderSecret, 1);
  Client from_env;
  InitOptions plain;
  plain.transport_type = 1;
  Status env_init = from_env.Init("t", node->address(), plain);
  ::unsetenv("KVPORT_TOKEN");
  ASSERT_TRUE(env_init.ok()) << env_init.ToString();
  EXPECT_EQ(Put(from_env, "a/1", "k", "v")->codes[0], KeyCode::kPermissionDenied);
}

// Shared memory maps the whole arena: only a token granting every namespace gets it. Another
// token's client is served over the same Unix socket as a stream, and still only what it grants.
TEST(TokenSharedMemoryTest, OnlyATokenGrantingEveryNamespaceMapsTheArena) {
  ServerOptions options = NodeOptions();
  options.tokens = Tokens();
  options.unix_socket = "auto";
  std::unique_ptr<Server> node = StartNode(options);
  ASSERT_NE(node, nullptr);
  ASSERT_FALSE(node->unix_socket_path().empty());
  const std::string endpoint = "unix:" + node->unix_socket_path();
  auto connect = [&](const char* secret) {
    auto client = std::make_unique<Client>();
    InitOptions init;
    init.token = secret;
    Status s = client->Init("shm-test", endpoint, init);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return client;
  };
  std::unique_ptr<Client> admin = connect(kAdminSecret);
  EXPECT_EQ(admin->transport(), "shared memory") << admin->transport_reason();
  std::unique_ptr<Client> tenant = connect(kTenantSecret);
  EXPECT_EQ(tenant->transport(), "Unix socket");
  EXPECT_THAT(tenant->transport_reason(), HasSubstr("does not grant every namespace"));
  ASSERT_EQ(Put(*admin, "b", "kb", "b-bytes")->status, BatchCode::kSuccess);
  EXPECT_EQ(Get(*tenant, "b", "kb")->codes[0], KeyCode::kPermissionDenied);
  EXPECT_EQ(Put(*tenant, "a/1", "ka", "a-bytes")->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(Get(*admin, "a/1", "ka")->value_sizes[0], 7u);
}

// UCX hands out the same whole arena (its remote key): the same rule. A token that does not
// grant every namespace is served over TCP, and still only what it grants.
TEST(TokenUcxTest, OnlyATokenGrantingEveryNamespaceGetsTheArenaOverUcx) {
  ::setenv("UCX_TLS", "tcp", 1);
  if (!ProcessUcxRuntime().usable()) {
    ::unsetenv("UCX_TLS");
    GTEST_SKIP() << "no usable UCX here: " << ProcessUcxRuntime().reason();
  }
  ServerOptions options = NodeOptions();
  options.tokens = Tokens();
  options.ucx = true;
  std::unique_ptr<Server> node = StartNode(options);
  ASSERT_NE(node, nullptr);
  auto connect = [&](const char* secret) {
    auto client = std::make_unique<Client>();
    InitOptions init;
    init.token = secret;
    init.transport_type = 2;
    Status s = client->Init("ucx-test", node->address(), init);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return client;
  };
  std::unique_ptr<Client> admin = connect(kAdminSecret);
  EXPECT_EQ(admin->transport(), "UCX") << admin->transport_reason();
  std::unique_ptr<Client> tenant = connect(kTenantSecret);
  EXPECT_EQ(tenant->transport(), "TCP");
  EXPECT_THAT(tenant->transport_reason(), HasSubstr("does not grant every namespace"));
  ASSERT_EQ(Put(*admin, "b", "kb", "b-bytes")->status, BatchCode::kSuccess);
  EXPECT_EQ(Get(*tenant, "b", "kb")->codes[0], KeyCode::kPermissionDenied);
  EXPECT_EQ(Put(*tenant, "a/1", "ka", "a-bytes")->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(Get(*admin, "a/1", "ka")->value_sizes[0], 7u);
  ::unsetenv("UCX_TLS");
}

// --- LIST and STATS at scale ---------------------------------------------------------------

// A client's LIST cursors survive whatever other clients do: each session owns its share.
TEST(ListAtScaleTest, AVictimsCursorSurvivesAFloodOfOtherListings) {
  std::unique_ptr<Server> node = StartNode(NodeOptions());
  ASSERT_NE(node, nullptr);
  Result<testing::TestClient> writer = testing::TestClient::Connect(node->port());
  ASSERT_TRUE(writer.ok());
  std::vector<testing::SetItem> items;
  for (int i = 0; i < 10; ++i)
    items.push_back({"k" + std::to_string(i), "v", ""});
  ASSERT_TRUE(writer->Mset("ns", items).ok());

  Result<testing::TestClient> victim = testing::TestClient::Connect(node->port());
  ASSERT_TRUE(victim.ok());
  uint64_t cursor = 0;
  ASSERT_TRUE(victim->List("ns", 0, 3, &cursor).ok());
  ASSERT_NE(cursor, 0u);

  Result<testing::TestClient> flooder = testing::TestClient::Connect(node->port());
  ASSERT_TRUE(flooder.ok());
  for (int i = 0; i < 5000; ++i) {
    uint64_t next = 0;
    ASSERT_TRUE(flooder->List("ns", 0, 1, &next).ok());
  }
  uint64_t after = 0;
  Result<std::vector<std::string>> rest = victim->List("ns", cursor, 100, &after);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(rest->size(), 7u);
  EXPECT_EQ(after, 0u);

  // A cursor ends with the session that was given it.
  ASSERT_TRUE(victim->List("ns", 0, 3, &cursor).ok());
  victim->Close();
  Result<testing::TestClient> other = testing::TestClient::Connect(node->port());
  ASSERT_TRUE(other.ok());
  // The node forgets it once it has seen the close; wait for that boundedly.
  Status forgotten = Status::Ok();
  for (int i = 0; i < 2000; ++i) {
    uint64_t ignored = 0;
    forgotten = other->List("ns", cursor, 1, &ignored).status();
    if (!forgotten.ok()) break;
  }
  EXPECT_EQ(forgotten.code(), StatusCode::kInvalidArgument) << forgotten.ToString();
  EXPECT_TRUE(other->Ping().ok());  // a refused LIST keeps the session
}

// With more namespaces than one frame holds, STATS pages: a version 4 client gets every
// namespace, an older one the first page and a count of those left out.
TEST(StatsAtScaleTest, ManyNamespacesArePagedNotLost) {
  ServerOptions options = NodeOptions();
  options.max_frame_bytes = 16 << 10;  // about 500 namespace rows per frame
  std::unique_ptr<Server> node = StartNode(options);
  ASSERT_NE(node, nullptr);
  Result<testing::TestClient> writer = testing::TestClient::Connect(node->port());
  ASSERT_TRUE(writer.ok());
  constexpr int kNamespaces = 2000;
  for (int i = 0; i < kNamespaces; ++i)
    ASSERT_TRUE(writer->Mset("tenant-" + std::to_string(i), {{"k", "v", ""}}).ok());

  std::unique_ptr<Client> client = Connect(*node, "");
  ASSERT_NE(client, nullptr);
  Result<NodeStats> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->namespaces.size(), static_cast<size_t>(kNamespaces));
  for (size_t i = 1; i < stats->namespaces.size(); ++i)
    EXPECT_LT(stats->namespaces[i - 1].name, stats->namespaces[i].name);
  EXPECT_EQ(stats->Get("namespaces_omitted"), 0u);

  Result<testing::TestClient> old = testing::TestClient::Connect(node->port(), true, 3);
  ASSERT_TRUE(old.ok());
  Result<ServerStats> page = old->Stats();
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_GT(page->namespaces.size(), 0u);
  EXPECT_LT(page->namespaces.size(), static_cast<size_t>(kNamespaces));
  EXPECT_EQ(page->namespaces.size() + page->Get("namespaces_omitted"),
            static_cast<size_t>(kNamespaces));
}

// --- an open node --------------------------------------------------------------------------

TEST(OpenNodeTest, RefusesToListenBeyondLoopbackUnlessToldItIsIntended) {
  ServerOptions options = NodeOptions();
  options.listen = "0.0.0.0:0";
  Result<std::unique_ptr<Server>> refused = Server::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("tokens_file"));
  EXPECT_THAT(refused.status().message(), HasSubstr("insecure"));

  options.insecure = true;
  std::unique_ptr<Server> insecure = StartNode(options);
  ASSERT_NE(insecure, nullptr);
  EXPECT_EQ(insecure->Stats().Get("insecure"), 1u);
  EXPECT_EQ(insecure->Stats().Get("auth_required"), 0u);
  insecure->Stop();

  // With tokens, any address is fine; on loopback, an open node is fine and not "insecure".
  options.insecure = false;
  options.tokens = Tokens();
  EXPECT_NE(StartNode(options), nullptr);
  std::unique_ptr<Server> loopback = StartNode(NodeOptions());
  ASSERT_NE(loopback, nullptr);
  EXPECT_EQ(loopback->Stats().Get("insecure"), 0u);
}

}  // namespace
}  // namespace kvport
