// SPDX-License-Identifier: Apache-2.0
// Backend: what kvport::Client delegates its calls to once Init chose it: one node
// (NodeClient) or a cluster of nodes (ClusterClient, which splits each call over NodeClients).
//
// Client checks the arguments every backend would check (a call before Init, key and buffer
// counts); a backend does the rest, with the contract of include/kvport/client.h.
// Thread-safe: any number of calls at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/pending_call.h"
#include "client/transport.h"
#include "kvport/client.h"
#include "kvport/io_buffers.h"
#include "kvport/status.h"

namespace kvport::client {

// Values lent in place by one or several nodes (Client::MGetInPlace).
struct InPlaceLoans {
  std::vector<std::unique_ptr<Loan>> loans;  // one per node call that lent values
  std::vector<const uint8_t*> views;         // per key of the call: its value, or null
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The batched calls, started: each returns at once with its frames sent (or its result
  // decided) and Finish gives the result. The keys, values, metas and buffers passed must stay
  // valid, and the buffers untouched, until the call is finished or destroyed.
  virtual PendingCallPtr<BatchResult> StartMSet(std::span<const std::string> keys,
                                                const IOBuffers& values, const SetOptions& options,
                                                std::span<const std::string> metas) = 0;
  // `buffers` null and `loans` null: the meta-only form (MGetMeta). `loans` set: the values are
  // lent in place (MGetInPlace) into *loans, which must outlive the call.
  virtual PendingCallPtr<GetResult> StartMGet(std::span<const std::string> keys,
                                              const GetOptions& options, const IOBuffers* buffers,
                                              InPlaceLoans* loans) = 0;
  virtual PendingCallPtr<BatchResult> StartMExist(std::span<const std::string> keys,
                                                  const ExistOptions& options) = 0;
  virtual PendingCallPtr<BatchResult> StartMDel(std::span<const std::string> keys,
                                                const DelOptions& options) = 0;

  virtual Status Ping() = 0;
  virtual Result<NodeStats> Stats() = 0;
  virtual std::vector<NodeReport> StatsPerNode() = 0;
  virtual Result<KeyPage> List(std::string_view ns, uint64_t cursor, uint32_t max_keys) = 0;

  virtual std::string_view transport() const = 0;
  virtual const std::string& transport_reason() const = 0;
  // What the token's grant names for calls that name no namespace (Client::default_namespace).
  virtual const std::optional<std::string>& default_namespace() const = 0;
  // Closes every connection; calls in flight fail with Unavailable.
  virtual void CloseAll() = 0;
};

}  // namespace kvport::client
