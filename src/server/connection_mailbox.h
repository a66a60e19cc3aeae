// SPDX-License-Identifier: Apache-2.0
// ConnectionMailbox: a connection's address for work that ends on another thread (a promotion on
// the disk tier's reader threads, a change its writer thread made durable). What is posted runs
// on the connection's loop while the connection lives, and is dropped once it is gone, so no
// such thread ever holds a pointer to a connection.
//
// It is also the connection's store::DurabilityWaiter: a change that must wait for the disk
// (store::TieredStore) holds the connection's answers from Begin, on its loop, to End, whatever
// thread that comes from; none is written meanwhile, so the client never hears of a change
// before it would survive a power loss, and answers keep their order.
#pragma once

#include <functional>
#include <memory>

#include "common/thread_annotations.h"
#include "net/event_loop.h"
#include "store/write_behind_disk.h"

namespace kvport::server {

class StreamConnection;

class ConnectionMailbox final : public store::DurabilityWaiter,
                                public std::enable_shared_from_this<ConnectionMailbox> {
 public:
  ConnectionMailbox(net::EventLoop* loop, StreamConnection* connection)
      : loop_(loop), connection_(connection) {}

  // Any thread: runs `task` on the connection's loop, unless the connection is gone by then.
  void Post(std::function<void()> task) EXCLUDES(mu_);
  // The loop's thread, as the connection goes: nothing posted runs from now on.
  void Detach() EXCLUDES(mu_);

  // store::DurabilityWaiter: Begin on the loop's thread (the change is made there), End from
  // any.
  void Begin() override;
  void End(const Status& status) override;

 private:
  Mutex mu_;
  net::EventLoop* loop_ GUARDED_BY(mu_);
  StreamConnection* connection_;  // the loop's thread only; null once detached
};

}  // namespace kvport::server
