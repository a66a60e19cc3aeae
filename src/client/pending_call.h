// SPDX-License-Identifier: Apache-2.0
// PendingCall: a batched call of a Backend that has been started (its first frames sent) and
// not yet finished: the post/check shape of NIXL's transfers, under the blocking calls and
// kvport::Client's async ones alike (a blocking call is Start, then Finish).
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kvport/client.h"
#include "kvport/status.h"

namespace kvport::client {

// A started call. Its owner lets it go with Dispose (PendingCallPtr does), never delete: a call
// whose kind is cached goes back to its CallCache once finished.
template <typename R>
class PendingCall {
 public:
  // Whether Finish would return without waiting for a node. Never blocks: it reads what has
  // arrived and takes the next step of a call with several (so polling it makes progress).
  virtual bool Ready() = 0;
  // The call's result, exactly what the blocking call returns; waits for what is still in
  // flight (at most until the call's deadline). Called once.
  virtual Result<R> Finish() = 0;
  // Destroys the call, or keeps it for reuse when it has finished.
  virtual void Dispose() { delete this; }

 protected:
  virtual ~PendingCall() = default;
};

template <typename R>
void DisposeCall::operator()(PendingCall<R>* call) const {
  call->Dispose();
}

template <typename R>
using PendingCallPtr = std::unique_ptr<PendingCall<R>, DisposeCall>;

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
PendingCallPtr<R> Decided(Result<R> result) {
  return PendingCallPtr<R>(new DecidedCall<R>(std::move(result)));
}

// Finished calls of one kind, kept for the next call of that kind: their lists keep their
// capacity, so a warm call allocates nothing. Thread-safe; keeps at most kKept.
template <typename T>
class CallCache {
 public:
  static constexpr size_t kKept = 64;

  // A kept call, or a new one.
  std::unique_ptr<T> Take() {
    {
      std::lock_guard lock(mu_);
      if (!kept_.empty()) {
        std::unique_ptr<T> call = std::move(kept_.back());
        kept_.pop_back();
        return call;
      }
    }
    return std::make_unique<T>();
  }
  // Keeps `call`, or destroys it (outside the lock) when kKept are kept.
  void Keep(std::unique_ptr<T> call) {
    std::lock_guard lock(mu_);
    if (kept_.size() < kKept) kept_.push_back(std::move(call));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<T>> kept_;
};

// A PendingCall of a cached kind (Self derives from it): started from its cache's Take, it goes
// back with Dispose once finished; one disposed of unfinished is destroyed, which gives up
// what it has in flight, and so is one whose lists grew past kKeptKeys keys (Self's
// kept_keys(): the most keys it has held), so the cache stays small. Self's Finish calls
// Finished(); Self's Release() lets go of what a kept call must not hold (staging slots, loans).
template <typename R, typename Self>
class CachedCall : public PendingCall<R> {
 public:
  static constexpr size_t kKeptKeys = 4096;

  ~CachedCall() override = default;
  void Dispose() final {
    std::shared_ptr<CallCache<Self>> cache = std::move(cache_);
    Self* self = static_cast<Self*>(this);
    if (cache == nullptr || !finished_ || self->kept_keys() > kKeptKeys) {
      delete this;
      return;
    }
    self->Release();
    cache->Keep(std::unique_ptr<Self>(self));
  }

  // Taken from `cache` for a new call.
  void StartFrom(std::shared_ptr<CallCache<Self>> cache) {
    cache_ = std::move(cache);
    finished_ = false;
  }

 protected:
  void Finished() { finished_ = true; }

 private:
  std::shared_ptr<CallCache<Self>> cache_;
  bool finished_ = false;
};

}  // namespace kvport::client
