// SPDX-License-Identifier: Apache-2.0
#include "server/connection_mailbox.h"

#include "kvport/log.h"
#include "server/stream_connection.h"

namespace kvport::server {

void ConnectionMailbox::Post(std::function<void()> task) {
  MutexLock lock(mu_);
  if (loop_ == nullptr) return;
  // Checked again on the loop: the connection may go between this Post and the task's turn,
  // and Detach runs on that same thread.
  loop_->Post([self = shared_from_this(), task = std::move(task)] {
    if (self->connection_ != nullptr) task();
  });
}

void ConnectionMailbox::Detach() {
  MutexLock lock(mu_);
  loop_ = nullptr;
  connection_ = nullptr;
}

void ConnectionMailbox::Begin() {
  if (connection_ != nullptr) connection_->HoldChange();
}

void ConnectionMailbox::End(const Status& status) {
  // The change is visible and the ended version gone for this process either way; a failed
  // tombstone is logged and counted by the disk tier.
  (void)status;
  Post([this] { connection_->ReleaseChange(); });
}

}  // namespace kvport::server
