// SPDX-License-Identifier: Apache-2.0
// Checksums end to end (protocol version 10; docs/client.md, "Checksums"): the client computes a
// value's checksum at its put, the node keeps it beside the value and answers it with every get,
// and the client checks the bytes against it before the caller sees them, over TCP, shared
// memory and reads in place. A value that fails is a miss, counted, never the bytes.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kvport/client.h"
#include "resp_test_client.h"
#include "server_fixture.h"
#include "test_client.h"

namespace kvport::testing {
namespace {

ServerOptions ShmNode() {
  ServerOptions options = SmallNodeOptions();
  options.unix_socket = "auto";
  return options;
}

std::unique_ptr<Client> Connect(const std::string& endpoint, bool checksums = true) {
  auto client = std::make_unique<Client>();
  InitOptions options;
  options.checksums = checksums;
  // A TCP endpoint stays on TCP (a same-host node would otherwise be read through shared memory).
  if (endpoint.rfind("unix:", 0) != 0) options.transport_type = 1;
  EXPECT_TRUE(client->Init("checksum-test", endpoint, options).ok());
  return client;
}

// Puts `items` (key, value, checksum) with a writer of its own: any checksum, right or not.
void RawPut(TestClient& writer,
            const std::vector<std::tuple<std::string, std::string, uint64_t>>& items) {
  protocol::MsetRequest mset;
  mset.ns = "ns";
  for (const auto& [key, value, checksum] : items)
    mset.items.push_back({key, {}, value.size(), value.data(), checksum});
  std::string descriptor;
  Result<protocol::MsetResponse> put = Exchange<protocol::MsetResponse>(writer, mset, &descriptor);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  for (StatusCode code : put->statuses)
    ASSERT_EQ(code, StatusCode::kOk);
}

// The checksum a node answers for `key` of `ns` to a reader of `version`.
uint64_t AnsweredChecksum(TestClient& reader, const std::string& key,
                          const std::string& ns = "ns") {
  protocol::MgetRequest get;
  get.ns = ns;
  get.keys = {{key, protocol::kUnlimitedCapacity}};
  std::string descriptor;
  Result<protocol::MgetResponse> got = Exchange<protocol::MgetResponse>(reader, get, &descriptor);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  return got.ok() ? got->results[0].checksum : 0;
}

uint64_t Xxh3(const std::string& value) {
  return XXH3_64bits(value.data(), value.size());
}

// KVPORT_CHECKSUMS set to `value` for the scope (unset when null), the process's value restored
// after.
class ChecksumsEnv {
 public:
  explicit ChecksumsEnv(const char* value) {
    if (const char* old = std::getenv(kName)) {
      had_ = true;
      old_ = old;
    }
    if (value != nullptr) {
      ::setenv(kName, value, 1);
    } else {
      ::unsetenv(kName);
    }
  }
  ~ChecksumsEnv() {
    if (had_) {
      ::setenv(kName, old_.c_str(), 1);
    } else {
      ::unsetenv(kName);
    }
  }
  ChecksumsEnv(const ChecksumsEnv&) = delete;
  ChecksumsEnv& operator=(const ChecksumsEnv&) = delete;

 private:
  static constexpr const char* kName = "KVPORT_CHECKSUMS";
  bool had_ = false;
  std::string old_;
};

// Reads `key` of namespace "ns" with `client` into a buffer of `size` bytes: its code, and the
// bytes when it is a hit.
std::pair<KeyCode, std::string> ReadOne(Client& client, const std::string& key, size_t size) {
  std::vector<char> out(size);
  IOBuffers buffer;
  buffer.Append(out.data(), out.size());
  Result<GetResult> got = client.MGet({key}, GetOptions{"ns"}, buffer);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (!got.ok()) return {KeyCode::kFailed, ""};
  return {got->codes[0],
          got->codes[0] == KeyCode::kSuccess ? std::string(out.begin(), out.end()) : std::string()};
}

// A value whose bytes are not those its writer's checksum describes (what a flipped bit
// anywhere between the put and the get looks like to the reader) is a miss over every read
// path, counted, and the other keys of the call are served.
TEST(ChecksumTest, AValueFailingItsChecksumIsAMissOnEveryReadPath) {
  auto server = StartNode(ShmNode());
  ASSERT_NE(server, nullptr);
  TestClient writer = MustConnect(*server);
  ASSERT_GE(writer.version(), protocol::kChecksumVersion);
  const std::string value = ValueFor("v", 20000);
  RawPut(writer, {{"bad", value, Xxh3(value) ^ 0x100}, {"good", value, Xxh3(value)}});

  const std::vector<std::string> keys = {"bad", "good"};
  for (const std::string& endpoint : {server->address(), "unix:" + server->unix_socket_path()}) {
    SCOPED_TRACE(endpoint);
    std::unique_ptr<Client> connected = Connect(endpoint);
    Client& reader = *connected;
    std::vector<char> bad(value.size()), good(value.size());
    IOBuffers buffers;
    buffers.Append(bad.data(), bad.size());
    buffers.Append(good.data(), good.size());
    Result<GetResult> got = reader.MGet(keys, GetOptions{"ns"}, buffers);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->codes[0], KeyCode::kKeyNotExist);
    EXPECT_NE(got->error.message().find("checksum"), std::string::npos) << got->error.ToString();
    EXPECT_EQ(got->codes[1], KeyCode::kSuccess);
    EXPECT_EQ(std::string(good.begin(), good.end()), value);
    EXPECT_EQ(reader.checksum_mismatches(), 1u);
    if (endpoint.rfind("unix:", 0) == 0) {  // in place: the view is never handed out
      Result<LentValues> lent = reader.MGetInPlace(keys, GetOptions{"ns"});
      ASSERT_TRUE(lent.ok()) << lent.status().ToString();
      EXPECT_EQ(lent->result().codes[0], KeyCode::kKeyNotExist);
      EXPECT_TRUE(lent->value(0).empty());
      EXPECT_EQ(lent->result().codes[1], KeyCode::kSuccess);
      EXPECT_EQ(std::string(lent->value(1).begin(), lent->value(1).end()), value);
      EXPECT_EQ(reader.checksum_mismatches(), 2u);
    }
  }
  // A client with checksums off checks nothing: it gets the bytes as they are.
  std::unique_ptr<Client> connected = Connect(server->address(), /*checksums=*/false);
  Client& unchecked = *connected;
  std::vector<char> out(value.size());
  IOBuffers buffer;
  buffer.Append(out.data(), out.size());
  Result<GetResult> got = unchecked.MGet({"bad"}, GetOptions{"ns"}, buffer);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(unchecked.checksum_mismatches(), 0u);
}

// What a client puts carries its checksum, over TCP and over shared memory (where it rides with
// ARENA_COMMIT), and the node answers it unchanged to a version-10 reader and not at all to an
// older one.
TEST(ChecksumTest, AClientsPutsCarryTheirChecksumsToTheNodeAndBack) {
  auto server = StartNode(ShmNode());
  ASSERT_NE(server, nullptr);
  const std::string value = ValueFor("w", 70000);
  for (const std::string& endpoint : {server->address(), "unix:" + server->unix_socket_path()}) {
    std::unique_ptr<Client> connected_writer = Connect(endpoint);
    Client& writer = *connected_writer;
    IOBuffers buffer;
    buffer.Append(value.data(), value.size());
    const std::string key = "from " + endpoint;
    Result<BatchResult> put = writer.MSet({key}, buffer, SetOptions{"ns"});
    ASSERT_TRUE(put.ok() && put->status == BatchCode::kSuccess) << endpoint;
    TestClient reader = MustConnect(*server);
    EXPECT_EQ(AnsweredChecksum(reader, key), Xxh3(value)) << endpoint;
    Result<TestClient> connected =
        TestClient::Connect(server->port(), /*hello=*/true, protocol::kChecksumVersion - 1);
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    TestClient older = std::move(connected).value();
    EXPECT_EQ(older.version(), protocol::kChecksumVersion - 1);
    EXPECT_EQ(AnsweredChecksum(older, key), 0u);  // a version-9 answer has no checksum
  }
  // Without checksums, and for a namespace turned off, none is sent.
  InitOptions off;
  off.transport_type = 1;
  off.unchecked_namespaces = {"ns"};
  Client unchecked;
  ASSERT_TRUE(unchecked.Init("unchecked", server->address(), off).ok());
  IOBuffers buffer;
  buffer.Append(value.data(), value.size());
  ASSERT_TRUE(unchecked.MSet({"plain"}, buffer, SetOptions{"ns"}).ok());
  TestClient reader = MustConnect(*server);
  EXPECT_EQ(AnsweredChecksum(reader, "plain"), 0u);
}

// KVPORT_CHECKSUMS turns checksums off for a client whose InitOptions::checksums is left on
// (what an engine's `eic` client is: its options have no such field): a value failing its
// checksum is a miss by default and comes back as bytes with the variable off, and such a
// client's puts carry no checksum. An InitOptions::checksums of false is never turned back on,
// and a value that is not a boolean fails Init instead of being guessed.
TEST(ChecksumTest, KvportChecksumsTurnsOffAClientWhoseOptionIsLeftOn) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient writer = MustConnect(*server);
  const std::string value = ValueFor("e", 30000);
  RawPut(writer, {{"bad", value, Xxh3(value) ^ 0x4000}});
  {
    ChecksumsEnv unset(nullptr);
    std::unique_ptr<Client> checked = Connect(server->address());
    EXPECT_EQ(ReadOne(*checked, "bad", value.size()).first, KeyCode::kKeyNotExist);
    EXPECT_EQ(checked->checksum_mismatches(), 1u);
  }
  for (const char* on : {"on", "TRUE", "1"}) {
    ChecksumsEnv turned_on(on);
    std::unique_ptr<Client> checked = Connect(server->address());
    EXPECT_EQ(ReadOne(*checked, "bad", value.size()).first, KeyCode::kKeyNotExist) << on;
  }
  for (const char* off : {"off", "false", "0", "No"}) {
    ChecksumsEnv turned_off(off);
    std::unique_ptr<Client> unchecked = Connect(server->address());
    EXPECT_EQ(ReadOne(*unchecked, "bad", value.size()), std::make_pair(KeyCode::kSuccess, value))
        << off;
    EXPECT_EQ(unchecked->checksum_mismatches(), 0u);
    IOBuffers buffer;
    buffer.Append(value.data(), value.size());
    const std::string key = std::string("put with KVPORT_CHECKSUMS=") + off;
    ASSERT_TRUE(unchecked->MSet({key}, buffer, SetOptions{"ns"}).ok());
    TestClient reader = MustConnect(*server);
    EXPECT_EQ(AnsweredChecksum(reader, key), 0u) << off;
  }
  {
    ChecksumsEnv turned_on("on");
    std::unique_ptr<Client> unchecked = Connect(server->address(), /*checksums=*/false);
    EXPECT_EQ(ReadOne(*unchecked, "bad", value.size()).first, KeyCode::kSuccess);
  }
  ChecksumsEnv garbled("sometimes");
  Client refused;
  InitOptions options;
  options.transport_type = 1;
  Status init = refused.Init("checksum-test", server->address(), options);
  EXPECT_EQ(init.code(), StatusCode::kInvalidArgument) << init.ToString();
  EXPECT_NE(init.message().find("KVPORT_CHECKSUMS"), std::string::npos) << init.ToString();
}

// Values written over the Redis protocol carry the checksum the node computes as their bytes
// arrive: a small SET's, copied from the input buffer; a large one's, read straight into its
// reservation over several reads; SETEX's, PSETEX's and MSET's. A kvport reader gets each value's
// xxh3-64 with it and checks the bytes against it.
TEST(ChecksumTest, ValuesWrittenOverTheRedisProtocolCarryTheirChecksums) {
  ServerOptions options = SmallNodeOptions();
  options.resp_listen = "127.0.0.1:0";
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  RespTestClient redis(server->resp_port());
  ASSERT_TRUE(redis.connected());
  const std::string small = ValueFor("small", 4000);
  const std::string large = ValueFor("large", 300 << 10);  // captured: over 64 KiB
  const std::string expiring = ValueFor("expiring", 100 << 10);
  const std::string pair_a = ValueFor("a", 70000), pair_b = ValueFor("b", 10);
  EXPECT_EQ(redis.Call({"SET", "small", small}), "+OK");
  // The large value in pieces: its first bytes come with the command, the rest in later reads.
  const std::string command = RespTestClient::Encode({"SET", "large", large});
  const size_t cut = command.find(large) + 1000;
  ASSERT_TRUE(redis.SendRaw(std::string_view(command).substr(0, cut)));
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("bytes_received") >= cut; }));
  ASSERT_TRUE(redis.SendRaw(std::string_view(command).substr(cut)));
  EXPECT_EQ(redis.Read(), "+OK");
  EXPECT_EQ(redis.Call({"SETEX", "expiring", "100", expiring}), "+OK");
  EXPECT_EQ(redis.Call({"PSETEX", "small expiring", "100000", small}), "+OK");
  EXPECT_EQ(redis.Call({"MSET", "pair a", pair_a, "pair b", pair_b, "empty", ""}), "+OK");

  const std::vector<std::pair<std::string, std::string>> written = {
      {"small", small},          {"large", large},   {"expiring", expiring},
      {"small expiring", small}, {"pair a", pair_a}, {"pair b", pair_b}};
  TestClient raw = MustConnect(*server);
  for (const auto& [key, value] : written)
    EXPECT_EQ(AnsweredChecksum(raw, key, ""), Xxh3(value)) << key;
  EXPECT_EQ(AnsweredChecksum(raw, "empty", ""), 0u);  // an empty value carries none

  std::unique_ptr<Client> connected = Connect(server->address());
  Client& reader = *connected;
  for (const auto& [key, value] : written) {
    std::vector<char> out(value.size());
    IOBuffers buffer;
    buffer.Append(out.data(), out.size());
    Result<GetResult> got = reader.MGet({key}, GetOptions{""}, buffer);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->codes[0], KeyCode::kSuccess) << key;
    EXPECT_EQ(std::string(out.begin(), out.end()), value) << key;
  }
  EXPECT_EQ(reader.checksum_mismatches(), 0u);
}

}  // namespace
}  // namespace kvport::testing
