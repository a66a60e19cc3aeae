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
  void StartPut(const PutBatch& batch, Deadline deadline,
                std::unique_ptr<TransportCall>* call) override;
  void StartGet(const GetBatch& batch, Deadline deadline, Loan* loan,
                std::unique_ptr<TransportCall>* call) override;

 private:
  std::unique_ptr<ConnectionPool> pool_;
  const std::string name_;
};

}  // namespace kvport::client
