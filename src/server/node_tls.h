// SPDX-License-Identifier: Apache-2.0
// The node's TLS context, replaceable while the node runs: certificates are rotated (cert-manager
// renews every 60 to 90 days) without a restart, which would empty the cache.
#pragma once

#include <memory>

#include "common/thread_annotations.h"
#include "kvport/status.h"
#include "net/tls.h"

namespace kvport::server {

// The context made from the node's TLS files, and the files, to make it again. A session takes
// the current context when it is accepted (current()) and keeps it to its end; Reload changes
// what later sessions get. Thread-safe.
class NodeTls {
 public:
  // The server context of `files` (net::TlsContext::Create's errors).
  static Result<std::unique_ptr<NodeTls>> Load(const net::TlsFiles& files);

  std::shared_ptr<const net::TlsContext> current() const EXCLUDES(mu_);
  // Client certificates are required (tls_ca_file is set). The files named do not change, so
  // neither does this.
  bool requires_peer_certificate() const { return requires_peer_certificate_; }
  const net::TlsFiles& files() const { return files_; }

  // Reads the files again and, when they make a context, gives that to sessions accepted from
  // now on. On error the context in force stays and the Status says why.
  Status Reload() EXCLUDES(mu_);

 private:
  NodeTls(net::TlsFiles files, std::shared_ptr<const net::TlsContext> context);

  const net::TlsFiles files_;
  const bool requires_peer_certificate_;
  mutable Mutex mu_;
  std::shared_ptr<const net::TlsContext> current_ GUARDED_BY(mu_);
};

}  // namespace kvport::server
