// SPDX-License-Identifier: Apache-2.0
// Writing on a connection: one frame at a time, with the deferred lease releases riding in the
// same write as the next request.
#include <chrono>
#include <mutex>
#include <vector>

#include "client/connection.h"
#include "client/socket_io.h"
#include "kvport/log.h"
#include "protocol/messages.h"

namespace kvport::client {
namespace {

// Lease releases that wait for the next request (ReleaseLease) before they are sent by
// themselves, and how long such a write may wait for the connection.
constexpr size_t kMaxDeferredReleases = 64;
constexpr std::chrono::seconds kReleaseWriteTimeout{5};

}  // namespace

void Connection::ReleaseLease(uint64_t lease_id) {
  bool send_now = true;
  {
    WaitableLock lock(mu_);
    if (!alive_.load(std::memory_order_relaxed)) return;  // the session's leases went with it
    MutexLock deferred(deferred_mu_);
    deferred_releases_.push_back(lease_id);
    // While a caller reads, or between calls, a callback of the watcher is still to come (the
    // one asked for when the reader role is let go) and sends what no request carried. Once
    // the watcher holds the role it asks only for the socket: the release goes now.
    send_now = reader_ == Reader::kWatcher || deferred_releases_.size() >= kMaxDeferredReleases;
  }
  if (!send_now) return;
  Status s = WriteFrame(nullptr, MonotonicClock::now() + kReleaseWriteTimeout);
  if (!s.ok()) log::Debug("ARENA_RELEASE on {}: {}", peer_, s.ToString());
}

void Connection::SendDeferredReleases() {
  {
    MutexLock lock(deferred_mu_);
    if (deferred_releases_.empty()) return;
  }
  // Never wait for a writer on the watcher's thread: a writer takes what is deferred with its
  // frame. (One that took the list just before these were added leaves them for the next
  // request or callback; at most kMaxDeferredReleases wait so.)
  Status s = WriteFrame(nullptr, MonotonicClock::now() + kReleaseWriteTimeout, /*if_free=*/true);
  if (!s.ok()) log::Debug("ARENA_RELEASE on {}: {}", peer_, s.ToString());
}

Status Connection::WriteFrame(const protocol::EncodedFrame* frame, Deadline deadline,
                              bool if_free) {
  std::unique_lock write_lock(write_mu_, std::defer_lock);
  if (if_free && !write_lock.try_lock()) return Status::Ok();
  if (!write_lock.owns_lock() && !write_lock.try_lock_until(deadline)) {
    return Status::Timeout("deadline passed while waiting to write on the connection to " + peer_ +
                           " (busy with other requests)");
  }
  std::vector<iovec>& iov = write_iov_;
  iov.clear();
  {
    MutexLock lock(deferred_mu_);
    sending_releases_.swap(deferred_releases_);
  }
  if (!sending_releases_.empty()) {
    protocol::ArenaReleaseRequest release;
    release.lease_ids.swap(sending_releases_);
    Status encoded =
        protocol::EncodeRequest(NextRequestId(), release, limits_, &release_frame_, version_);
    release.lease_ids.swap(sending_releases_);
    sending_releases_.clear();
    if (encoded.ok()) {
      iov.push_back({release_frame_.head.data(), release_frame_.head.size()});
    } else {
      log::Debug("ARENA_RELEASE on {}: {}", peer_, encoded.ToString());
    }
  }
  if (frame != nullptr) {
    iov.push_back({const_cast<char*>(frame->head.data()), frame->head.size()});
    for (const protocol::PayloadSpan& span : frame->payloads) {
      iov.push_back({const_cast<void*>(span.data), span.size});
    }
  }
  Status written = WriteFully(stream_, iov, deadline);
  write_lock.unlock();
  if (written.ok()) return written;
  // The stream may hold part of a frame: nothing more can be sent on it.
  Close(written);
  if (written.code() == StatusCode::kTimeout) {
    return Status::Timeout("deadline passed while writing a request to " + peer_);
  }
  return close_reason();
}

}  // namespace kvport::client
