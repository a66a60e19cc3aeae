// SPDX-License-Identifier: Apache-2.0
// The member record codec: what a node writes to etcd and every client reads back.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "cluster/member.h"

namespace kvport::cluster {
namespace {

Member Sample() {
  Member m;
  m.id = "node-a";
  m.address = "10.0.0.7:7000";
  m.epoch = std::numeric_limits<uint64_t>::max() - 12345;  // beyond a double's exact range
  m.capacity_bytes = uint64_t{64} << 30;
  m.protocol_version = 5;
  m.transports = {"tcp", "shm"};
  m.started_unix_ms = 1735689600123;
  return m;
}

TEST(MemberCodec, RoundTripsEveryField) {
  Member m = Sample();
  auto decoded = DecodeMember(EncodeMember(m));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, m);
}

TEST(MemberCodec, EpochIsADecimalString) {
  // Other tools (jq, etcdctl | python) read JSON numbers as doubles: 64-bit epochs would round.
  std::string json = EncodeMember(Sample());
  EXPECT_NE(json.find("\"epoch\":\"18446744073709539270\""), std::string::npos) << json;
}

TEST(MemberCodec, IPv6AndHostNamesAreAddresses) {
  Member m = Sample();
  for (const char* address : {"[::1]:7000", "cache-3.example:65535", "127.0.0.1:1"}) {
    m.address = address;
    auto decoded = DecodeMember(EncodeMember(m));
    ASSERT_TRUE(decoded.ok()) << address << ": " << decoded.status().ToString();
    EXPECT_EQ(decoded->address, address);
  }
}

TEST(MemberCodec, OptionalFieldsDefault) {
  auto decoded = DecodeMember(R"({"id":"n","address":"h:1","epoch":"7"})");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->epoch, 7u);
  EXPECT_EQ(decoded->capacity_bytes, 0u);
  EXPECT_TRUE(decoded->transports.empty());
  EXPECT_EQ(decoded->started_unix_ms, 0);
}

TEST(MemberCodec, RefusesBadRecordsNamingTheField) {
  struct Case {
    const char* json;
    const char* names;  // in the message
  };
  const Case cases[] = {
      {"", "JSON"},
      {"{", "JSON"},
      {"[1,2]", "object"},
      {"\"node\"", "object"},
      {R"({"address":"h:1","epoch":"1"})", "id"},
      {R"({"id":"","address":"h:1","epoch":"1"})", "id"},
      {R"({"id":7,"address":"h:1","epoch":"1"})", "id"},
      {R"({"id":"n","epoch":"1"})", "address"},
      {R"({"id":"n","address":"nohost","epoch":"1"})", "address"},
      {R"({"id":"n","address":":7000","epoch":"1"})", "address"},
      {R"({"id":"n","address":"h:0","epoch":"1"})", "address"},
      {R"({"id":"n","address":"h:70000","epoch":"1"})", "address"},
      {R"({"id":"n","address":"h:x","epoch":"1"})", "address"},
      {R"({"id":"n","address":"h:1"})", "epoch"},
      {R"({"id":"n","address":"h:1","epoch":"-1"})", "epoch"},
      {R"({"id":"n","address":"h:1","epoch":-1})", "epoch"},
      {R"({"id":"n","address":"h:1","epoch":"12ab"})", "epoch"},
      {R"({"id":"n","address":"h:1","epoch":"99999999999999999999"})", "epoch"},
      {R"({"id":"n","address":"h:1","epoch":"1","capacity_bytes":"lots"})", "capacity_bytes"},
      {R"({"id":"n","address":"h:1","epoch":"1","protocol_version":"4294967296"})",
       "protocol_version"},
      {R"({"id":"n","address":"h:1","epoch":"1","transports":"tcp"})", "transports"},
      {R"({"id":"n","address":"h:1","epoch":"1","transports":[1]})", "transports"},
      {R"({"id":"n","address":"h:1","epoch":"1","started_unix_ms":"soon"})", "started_unix_ms"},
  };
  for (const Case& c : cases) {
    auto decoded = DecodeMember(c.json);
    ASSERT_FALSE(decoded.ok()) << c.json;
    EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption) << c.json;
    EXPECT_NE(decoded.status().message().find(c.names), std::string::npos)
        << c.json << " -> " << decoded.status().ToString();
  }
}

TEST(MemberCodec, NeverThrows) {
  // Invalid UTF-8 in a string field: the encoder must not throw (nlohmann's default does).
  Member m = Sample();
  m.id = std::string("node-\xff\xfe");
  std::string json = EncodeMember(m);
  EXPECT_FALSE(json.empty());
  // Deeply nested and odd inputs decode to an error, never an exception.
  std::string deep(10000, '[');
  EXPECT_FALSE(DecodeMember(deep).ok());
  EXPECT_FALSE(DecodeMember(std::string("{\"id\":\"\xff\"}")).ok());
}

}  // namespace
}  // namespace kvport::cluster
