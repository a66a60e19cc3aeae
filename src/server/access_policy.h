// SPDX-License-Identifier: Apache-2.0
// Who may do what on a node: the tokens it accepts, the grant each carries, and the grant a
// session holds (docs/security.md).
//
// A node is open (no token configured: every session holds the grant of everything) or
// requires tokens: a session presents one in HELLO and holds that token's grant. On a node with
// mutual TLS a client certificate can stand for a token (AccessToken::cert_names): a session
// that presents no secret holds the grant of the token its certificate's names map to. The tokens
// can be replaced while the node runs (SIGHUP); sessions notice at their next request, because
// every replacement bumps the policy's generation, which a session compares with the one its
// grant came from (one relaxed atomic load per request).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/server.h"
#include "kvport/status.h"

namespace kvport::server {

// Namespace patterns of a token, compiled: an exact name, a prefix (written "prefix*"), or
// every namespace ("*").
class NamespaceSet {
 public:
  NamespaceSet() = default;
  explicit NamespaceSet(const std::vector<std::string>& patterns);
  static NamespaceSet Everything();

  bool Contains(std::string_view ns) const;
  bool everything() const { return everything_; }

 private:
  bool everything_ = false;
  std::vector<std::string> names_;
  std::vector<std::string> prefixes_;
};

// What one token allows. Immutable; shared by the sessions holding it.
class Grant {
 public:
  Grant(std::string name, NamespaceSet read, NamespaceSet write, bool admin,
        std::optional<std::string> default_namespace = std::nullopt);
  // The grant of an open node: everything.
  static std::shared_ptr<const Grant> Everything();

  const std::string& name() const { return name_; }
  bool may_read(std::string_view ns) const { return read_.Contains(ns); }
  bool may_write(std::string_view ns) const { return write_.Contains(ns); }
  // STATS of every namespace; LIST of any namespace.
  bool admin() const { return admin_; }
  // The namespace the token names for calls that name none (AccessToken::default_namespace).
  const std::optional<std::string>& default_namespace() const { return default_namespace_; }
  bool reads_everything() const { return read_.everything(); }
  bool writes_everything() const { return write_.everything(); }
  // Read and write of every namespace: what mapping the arena exposes (shared memory).
  bool grants_every_namespace() const { return read_.everything() && write_.everything(); }

  // The arena bytes the stream writes of this grant's sessions hold reserved and not yet
  // written, together (WriteBatch): adds `bytes` unless that takes the total above `cap`.
  // Thread-safe; the grant is shared by its sessions.
  bool TryHoldUnwritten(uint64_t bytes, uint64_t cap) const;
  void ReleaseUnwritten(uint64_t bytes) const {
    unwritten_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  uint64_t unwritten() const { return unwritten_.load(std::memory_order_relaxed); }

 private:
  std::string name_;
  NamespaceSet read_;
  NamespaceSet write_;
  bool admin_;
  std::optional<std::string> default_namespace_;
  mutable std::atomic<uint64_t> unwritten_{0};
};

// Checks a token list: names present and unique, secrets 16..255 bytes and unique (a token with
// cert_names may have none), certificate names non-empty and each in one token only, patterns
// well formed ('*' only at the end), a default namespace of at most 255 bytes that the token may
// read and write. InvalidArgument naming the token (by name, never by secret) and what is wrong.
Status ValidateTokens(const std::vector<AccessToken>& tokens);

// The tokens a node accepts. Thread-safe.
class AccessPolicy {
 public:
  // `required`: tokens are configured (possibly none yet: a tokens file may list none), so
  // every session must present an accepted one. `tokens` must pass ValidateTokens.
  AccessPolicy(bool required, const std::vector<AccessToken>& tokens);

  bool required() const { return required_; }
  // Bumped by every Replace.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // The grant of `secret` (Everything() when the node is open, whatever is presented). When
  // `secret` is empty, the grant of the token that one of `cert_names` (the names of the
  // client certificate the session's TLS verified: net::TlsSession::PeerCertificateNames) maps to.
  // PermissionDenied when the node requires a token and neither gives one, or the certificate's
  // names map to two tokens. A secret, when presented, decides alone: it is the credential the
  // client chose. The comparison takes the same time whichever token, and whichever byte of it,
  // differs.
  Result<std::shared_ptr<const Grant>> Authenticate(
      std::string_view secret, const std::vector<std::string>& cert_names = {}) const;

  // Accepts `tokens` (they must pass ValidateTokens) instead of the current ones.
  void Replace(const std::vector<AccessToken>& tokens);
  size_t token_count() const;

 private:
  struct Entry {
    std::string secret;  // empty: held by certificate only
    std::vector<std::string> cert_names;
    std::shared_ptr<const Grant> grant;
  };
  static std::vector<Entry> Compile(const std::vector<AccessToken>& tokens);
  Result<std::shared_ptr<const Grant>> AuthenticateCertificate(
      const std::vector<std::string>& cert_names) const REQUIRES(mu_);

  const bool required_;
  mutable Mutex mu_;
  std::vector<Entry> entries_ GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{0};
};

// The grant one session holds. Loop thread only.
class SessionAccess {
 public:
  // At HELLO: authenticates `secret` (or, without one, `cert_names`: AccessPolicy::
  // Authenticate) and keeps both, so a later Refresh can re-check them.
  Status Authenticate(const AccessPolicy& policy, std::string_view secret,
                      std::vector<std::string> cert_names = {});
  // Before each request: when the policy changed since the grant was taken, takes the grant
  // `secret` now has; PermissionDenied (the session should end) when it is no longer accepted.
  Status Refresh(const AccessPolicy& policy);
  // Valid after a successful Authenticate.
  const Grant& grant() const { return *grant_; }
  const std::shared_ptr<const Grant>& shared_grant() const { return grant_; }
  bool authenticated() const { return grant_ != nullptr; }

 private:
  std::string secret_;
  std::vector<std::string> cert_names_;
  uint64_t generation_ = 0;
  std::shared_ptr<const Grant> grant_;
};

}  // namespace kvport::server
