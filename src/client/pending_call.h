// SPDX-License-Identifier: Apache-2.0
// PendingCall: a batched call of a Backend that has been started (its first frames sent) and
// not yet finished: the post/check shape of NIXL's transfers, under the blocking calls and
// kvport::Client's async ones alike (a blocking call is Start, then Finish).
#pragma once

#include <memory>
#include <utility>

#include "kvport/status.h"

namespace kvport::client {

template <typename R>
class PendingCall {
 public:
  virtual ~PendingCall() = default;
  // Whether Finish would return without waiting for a node. Never blocks: it reads what has
  // arrived and takes the next step of a call with several (so polling it makes progress).
  virtual bool Ready() = 0;
  // The call's result, exactly what the blocking call returns; waits for what is still in
  // flight (at most until the call's deadline). Called once.
  virtual Result<R> Finish() = 0;
};

// A call decided before anything was sent (refused, or empty).
template <typename R>
class DecidedCall final : public PendingCall<R> {
 public:
  explicit DecidedCall(Result<R> result) : result_(std::move(result)) {}
  bool Ready() override { return true; }
  Result<R> Finish() override { return std::move(result_); }

 private:
  Result<R> result_;
};

template <typename R>
std::unique_ptr<PendingCall<R>> Decided(Result<R> result) {
  return std::make_unique<DecidedCall<R>>(std::move(result));
}

}  // namespace kvport::client
