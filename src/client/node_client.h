// SPDX-License-Identifier: Apache-2.0
// NodeClient: the calls of kvport::Client against one node, over the transport Init chose for
// it (its pool, frames and data path) and the client's device staging.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "client/backend.h"
#include "client/device_staging.h"
#include "client/endpoint.h"
#include "client/pending_call.h"
#include "client/transport.h"
#include "client/transport_choice.h"
#include "client/value_checksums.h"
#include "kvport/client.h"
#include "kvport/transport.h"
#include "net/tls.h"
#include "protocol/messages.h"

namespace kvport::client {

// What a client presents to every node: its token (docs/security.md), and TLS for TCP (null:
// plain TCP), made once at Init from InitOptions.
struct NodeCredentials {
  std::string token;
  std::shared_ptr<const net::TlsContext> tls;
};

class NodeClient final : public Backend {
 public:
  // Opens the transport `choice` resolves to for `address`, connecting its first connection:
  // Unavailable when the node does not answer. `devices` and `checksums` (shared by every node
  // of a client) must outlive the NodeClient. Logs which data path it chose and why.
  static Result<std::unique_ptr<NodeClient>> Open(
      std::string_view instance_id, const NodeAddress& address, const InitOptions& options,
      const TransportChoice& choice, const NodeCredentials& credentials, DeviceStaging* devices,
      ValueChecksums* checksums);
  ~NodeClient() override;

  PendingCallPtr<BatchResult> StartMSet(std::span<const std::string> keys, const IOBuffers& values,
                                        const SetOptions& options,
                                        std::span<const std::string> metas) override;
  PendingCallPtr<GetResult> StartMGet(std::span<const std::string> keys, const GetOptions& options,
                                      const IOBuffers* buffers, InPlaceLoans* loans) override;
  PendingCallPtr<BatchResult> StartMExist(std::span<const std::string> keys,
                                          const ExistOptions& options) override;
  PendingCallPtr<BatchResult> StartMDel(std::span<const std::string> keys,
                                        const DelOptions& options) override;
  Status Ping() override;
  Result<NodeStats> Stats() override;
  std::vector<NodeReport> StatsPerNode() override;
  Result<KeyPage> List(std::string_view ns, uint64_t cursor, uint32_t max_keys) override;

  std::string_view transport() const override { return transport_->name(); }
  const std::string& transport_reason() const override { return transport_reason_; }
  const std::optional<std::string>& default_namespace() const override {
    return default_namespace_;
  }
  void CloseAll() override { transport_->pool().CloseAll(); }

  // "host:port" (or "unix:/path") of the node.
  const std::string& address() const { return address_; }

 private:
  NodeClient(std::string address, const InitOptions& options, DeviceStaging* devices,
             ValueChecksums* checksums, ChosenTransport chosen,
             std::optional<std::string> default_namespace);

  class PutCall;
  class GetCall;
  template <typename Request, typename Response>
  class KeyOnlyCall;
  using ExistCall = KeyOnlyCall<protocol::MexistRequest, protocol::MexistResponse>;
  using DelCall = KeyOnlyCall<protocol::MdelRequest, protocol::MdelResponse>;

  Deadline DeadlineFor(std::chrono::milliseconds timeout) const;
  // MEXIST and MDEL: keys in, one status per key out.
  template <typename Request, typename Response>
  PendingCallPtr<BatchResult> StartKeyOnly(
      std::span<const std::string> keys, std::string_view ns, bool any_namespace,
      std::chrono::milliseconds timeout, const char* op, const char* wire_op,
      const std::shared_ptr<CallCache<KeyOnlyCall<Request, Response>>>& cache);
  // A round trip without keys (PING, STATS, LIST).
  template <typename Request, typename Response>
  Status RoundTrip(const Request& request, DecodingHandler<Request, Response>* handler);

  const std::string address_;
  const std::chrono::milliseconds timeout_;  // InitOptions::timeout: a call's default
  DeviceStaging* const devices_;
  ValueChecksums* const checksums_;
  std::string transport_reason_;  // why transport_ is what it is, as logged at Open
  std::unique_ptr<Transport> transport_;
  const std::optional<std::string> default_namespace_;  // what the first HELLO said
  // Finished calls kept for the next ones (shared: a call in flight may outlive this client's
  // view of the node, in a cluster).
  const std::shared_ptr<CallCache<PutCall>> put_calls_;
  const std::shared_ptr<CallCache<GetCall>> get_calls_;
  const std::shared_ptr<CallCache<ExistCall>> exist_calls_;
  const std::shared_ptr<CallCache<DelCall>> del_calls_;
};

}  // namespace kvport::client
