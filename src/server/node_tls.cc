// SPDX-License-Identifier: Apache-2.0
#include "server/node_tls.h"

namespace kvport::server {

Result<std::unique_ptr<NodeTls>> NodeTls::Load(const net::TlsFiles& files) {
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<net::TlsContext> context,
                          net::TlsContext::Create(net::TlsRole::kServer, files));
  return std::unique_ptr<NodeTls>(new NodeTls(files, std::move(context)));
}

NodeTls::NodeTls(net::TlsFiles files, std::shared_ptr<const net::TlsContext> context)
    : files_(std::move(files)),
      requires_peer_certificate_(context->requires_peer_certificate()),
      current_(std::move(context)) {}

std::shared_ptr<const net::TlsContext> NodeTls::current() const {
  MutexLock lock(mu_);
  return current_;
}

Status NodeTls::Reload() {
  // Made outside the lock: reading and parsing the files must not hold up accepts.
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<net::TlsContext> context,
                          net::TlsContext::Create(net::TlsRole::kServer, files_));
  MutexLock lock(mu_);
  current_ = std::move(context);
  return Status::Ok();
}

}  // namespace kvport::server
