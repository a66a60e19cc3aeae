// SPDX-License-Identifier: Apache-2.0
// StreamTransport: values in the frames' payload sections, written from the caller's buffers
// (writev) and read straight into them (readv), over TCP or a node's Unix socket.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/batch_call.h"
#include "client/transport.h"

namespace kvport::client {

class StreamTransport final : public Transport {
 public:
  StreamTransport(std::unique_ptr<ConnectionPool> pool, std::string name);

  std::string_view name() const override { return name_; }
  TransportCapabilities capabilities() const override { return {}; }
  ConnectionPool& pool() override { return *pool_; }
  std::vector<FrameResult> Put(const PutBatch& batch, Deadline deadline) override;
  std::vector<FrameResult> Get(const GetBatch& batch, Deadline deadline) override;

 private:
  std::unique_ptr<ConnectionPool> pool_;
  const std::string name_;
};

// The FrameResult of a call, before its per-item answers are filled in.
template <typename Handler>
FrameResult StartResult(const FrameCall<Handler>& call) {
  FrameResult r;
  r.slice = call.slice;
  r.status = call.status;
  if (call.conn != nullptr) r.peer = call.conn->peer();
  return r;
}

}  // namespace kvport::client
