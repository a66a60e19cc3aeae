// SPDX-License-Identifier: Apache-2.0
// A node with UCX (ServerOptions::ucx, protocol version 8): NODE_INFO offers it, UCX_ATTACH
// hands a TCP session the node's worker and the arena's and lease words' keys, and the session's
// SHM_GET / SHM_RESERVE / SHM_COMMIT then move bytes one-sided through UCX (this test's own
// worker in the client's place), over UCX's tcp transport (UCX_TLS set by the test). Skipped
// where this target had no libucp at build time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "device/ucx_rma.h"
#include "kvport/ucx.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kHostUcp = KVPORT_TEST_UCP_LIBRARY;

// Sends `request` and decodes its answer as a `Response`.
template <typename Response, typename Request>
Result<Response> Exchange(TestClient& client, const Request& request, uint64_t id,
                          std::string* descriptor) {
  protocol::EncodedFrame frame;
  KVPORT_RETURN_IF_ERROR(
      protocol::EncodeRequest(id, request, client.limits(), &frame, client.version()));
  KVPORT_RETURN_IF_ERROR(client.Send(frame));
  KVPORT_ASSIGN_OR_RETURN(RawFrame raw, client.ReadFrame());
  KVPORT_RETURN_IF_ERROR(client.ErrorOf(raw));
  *descriptor = std::move(raw.descriptor);  // the response's views point into it
  Response response;
  KVPORT_RETURN_IF_ERROR(
      protocol::DecodeResponse(raw.header, *descriptor, client.limits(), &response));
  return response;
}

class UcxAttachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
    if (std::string(kHostUcp).empty()) GTEST_SKIP() << "no libucp for this target at build time";
    ::setenv("UCX_TLS", "tcp", 1);
  }
  void TearDown() override { ::unsetenv("UCX_TLS"); }
};

TEST_F(UcxAttachTest, ATcpSessionMovesValuesOneSidedOverUcx) {
  ServerOptions options = SmallNodeOptions();
  options.ucx = true;
  options.ucx_library = kHostUcp;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_EQ(client.version(), protocol::kUcxVersion);
  const std::string stored = ValueFor("stored", 300000);
  ASSERT_TRUE(client.Mset("ns", {{"stored", stored, "meta"}}).ok());

  std::string d1, d2, d3, d4;
  Result<protocol::NodeInfoResponse> info =
      Exchange<protocol::NodeInfoResponse>(client, protocol::NodeInfoRequest{}, 1, &d1);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->offers & protocol::kOfferUcx, protocol::kOfferUcx);

  Result<protocol::UcxAttachResponse> attach =
      Exchange<protocol::UcxAttachResponse>(client, protocol::UcxAttachRequest{}, 2, &d2);
  ASSERT_TRUE(attach.ok()) << attach.status().ToString();
  ASSERT_EQ(attach->status, StatusCode::kOk) << attach->reason;

  // The client's side: its own worker, an endpoint to the node's, both regions attached.
  auto runtime = OpenUcxRuntime(kHostUcp);
  Result<std::unique_ptr<ucx::Worker>> worker = ucx::Worker::Open(*runtime);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  Result<std::unique_ptr<ucx::Peer>> node = (*worker)->Connect(attach->worker_address);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  Result<std::unique_ptr<ucx::RemoteRegion>> arena =
      (*node)->Attach(attach->arena_key, attach->arena_base, attach->arena_bytes);
  Result<std::unique_ptr<ucx::RemoteRegion>> words =
      (*node)->Attach(attach->lease_words_key, attach->lease_words_base, attach->lease_words_bytes);
  ASSERT_TRUE(arena.ok() && words.ok());
  const auto deadline = MonotonicClock::now() + std::chrono::seconds(30);

  // A get: SHM_GET over TCP pins the value under a lease; the bytes come one-sided.
  protocol::ShmGetRequest get;
  get.ns = "ns";
  get.keys.push_back(protocol::MgetKey{"stored", protocol::kUnlimitedCapacity});
  Result<protocol::ShmGetResponse> got = Exchange<protocol::ShmGetResponse>(client, get, 3, &d3);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->results.size(), 1u);
  ASSERT_EQ(got->results[0].status, StatusCode::kOk);
  EXPECT_EQ(got->results[0].meta, "meta");
  std::string read(got->results[0].value_length, '\0');
  ASSERT_TRUE(
      (*node)->Get(read.data(), read.size(), **arena, got->results[0].offset, deadline).ok());
  EXPECT_EQ(read, stored);
  // The session's lease word, read one-sided too, vouches for the copy.
  uint64_t word = 0;
  ASSERT_TRUE((*node)->Get(&word, sizeof(word), **words, attach->lease_word_offset, deadline).ok());
  EXPECT_EQ(word, attach->lease_generation);
  EXPECT_EQ(server->Stats().Get("leases"), 1u);

  // A put: SHM_RESERVE, a one-sided write into the reserved extent, SHM_COMMIT.
  const std::string value = ValueFor("written", 200000);
  protocol::ShmReserveRequest reserve;
  reserve.ns = "ns";
  reserve.items.push_back(protocol::MsetItem{"written", "", value.size(), nullptr});
  Result<protocol::ShmReserveResponse> reserved =
      Exchange<protocol::ShmReserveResponse>(client, reserve, 4, &d4);
  ASSERT_TRUE(reserved.ok()) << reserved.status().ToString();
  ASSERT_EQ(reserved->items.size(), 1u);
  ASSERT_EQ(reserved->items[0].status, StatusCode::kOk);
  ASSERT_TRUE(
      (*node)->Put(value.data(), value.size(), **arena, reserved->items[0].offset, deadline).ok());
  protocol::ShmCommitRequest commit;
  commit.reservation_id = reserved->reservation_id;
  commit.commit = {1};
  std::string d5;
  Result<protocol::ShmCommitResponse> committed =
      Exchange<protocol::ShmCommitResponse>(client, commit, 5, &d5);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->statuses, (std::vector<StatusCode>{StatusCode::kOk}));
  TestClient reader = MustConnect(*server);
  Result<std::vector<GetItem>> check = reader.Mget("ns", {"written"});
  ASSERT_TRUE(check.ok());
  EXPECT_EQ((*check)[0].value, value);
}

TEST_F(UcxAttachTest, ANodeWithoutUcxSaysSoAndTheSessionGoesOn) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  std::string d1, d2;
  Result<protocol::NodeInfoResponse> info =
      Exchange<protocol::NodeInfoResponse>(client, protocol::NodeInfoRequest{}, 1, &d1);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->offers & protocol::kOfferUcx, 0u);
  Result<protocol::UcxAttachResponse> attach =
      Exchange<protocol::UcxAttachResponse>(client, protocol::UcxAttachRequest{}, 2, &d2);
  ASSERT_TRUE(attach.ok()) << attach.status().ToString();
  EXPECT_EQ(attach->status, StatusCode::kNotSupported);
  EXPECT_THAT(std::string(attach->reason), HasSubstr("offers no UCX"));
  EXPECT_TRUE(client.Ping().ok());
}

TEST_F(UcxAttachTest, ANodeAskedForAnUnusableUcxDoesNotStart) {
  ServerOptions options = SmallNodeOptions();
  options.ucx = true;
  options.ucx_library = "/nonexistent/libucp.so.0";
  Result<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_EQ(server.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(server.status().message(), HasSubstr("/nonexistent/libucp.so.0"));
}

}  // namespace
}  // namespace kvport::testing
