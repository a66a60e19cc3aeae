// SPDX-License-Identifier: Apache-2.0
#include "server/access_policy.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace kvport::server {

namespace {

constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMaxSecretBytes = 255;            // HELLO carries it as a u8-length string
constexpr size_t kMaxDefaultNamespaceBytes = 255;  // and its answer the namespace, likewise

// True when `presented` equals `secret`, in time that depends only on their lengths: every byte
// of the longer one is looked at, and nothing branches on their values.
bool EqualsInConstantTime(std::string_view presented, std::string_view secret) {
  const size_t n = std::max(presented.size(), secret.size());
  unsigned diff = static_cast<unsigned>(presented.size() ^ secret.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    const unsigned char b = i < secret.size() ? static_cast<unsigned char>(secret[i]) : 0;
    diff |= static_cast<unsigned>(a ^ b);
  }
  return diff == 0;
}

Status CheckPatterns(const AccessToken& token, std::string_view right,
                     const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    const size_t star = p.find('*');
    if (star != std::string::npos && star + 1 != p.size()) {
      return Status::InvalidArgument(fmt::format(
          "token '{}': {} pattern '{}' has a '*' before its end ('*' may only end a pattern, "
          "as in 'tenant-a/*', or stand alone for every namespace)",
          token.name, right, p));
    }
  }
  return Status::Ok();
}

}  // namespace

NamespaceSet::NamespaceSet(const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    if (p == "*") {
      everything_ = true;
    } else if (!p.empty() && p.back() == '*') {
      prefixes_.push_back(p.substr(0, p.size() - 1));
    } else {
      names_.push_back(p);
    }
  }
}

NamespaceSet NamespaceSet::Everything() {
  NamespaceSet set;
  set.everything_ = true;
  return set;
}

bool NamespaceSet::Contains(std::string_view ns) const {
  if (everything_) return true;
  for (const std::string& name : names_) {
    if (ns == name) return true;
  }
  for (const std::string& prefix : prefixes_) {
    if (ns.starts_with(prefix)) return true;
  }
  return false;
}

Grant::Grant(std::string name, NamespaceSet read, NamespaceSet write, bool admin,
             std::optional<std::string> default_namespace)
    : name_(std::move(name)),
      read_(std::move(read)),
      write_(std::move(write)),
      admin_(admin),
      default_namespace_(std::move(default_namespace)) {}

bool Grant::TryHoldUnwritten(uint64_t bytes, uint64_t cap) const {
  uint64_t current = unwritten_.load(std::memory_order_relaxed);
  do {
    if (current > cap || bytes > cap - current) return false;
  } while (!unwritten_.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  return true;
}

std::shared_ptr<const Grant> Grant::Everything() {
  static const auto everything = std::make_shared<const Grant>(
      "open node", NamespaceSet::Everything(), NamespaceSet::Everything(), true);
  return everything;
}

Status ValidateTokens(const std::vector<AccessToken>& tokens) {
  std::set<std::string_view> names;
  std::set<std::string_view> secrets;
  std::set<std::string_view> cert_names;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const AccessToken& t = tokens[i];
    if (t.name.empty()) return Status::InvalidArgument(fmt::format("token {} has no name", i + 1));
    if (!names.insert(t.name).second)
      return Status::InvalidArgument(fmt::format("two tokens are named '{}'", t.name));
    for (const std::string& cert_name : t.cert_names) {
      if (cert_name.empty() || cert_name.find('\0') != std::string::npos) {
        return Status::InvalidArgument(
            fmt::format("token '{}': a certificate name is empty or holds a NUL", t.name));
      }
      // One certificate, one grant: a name in two tokens would leave the grant to list order.
      if (!cert_names.insert(cert_name).second) {
        return Status::InvalidArgument(fmt::format(
            "token '{}': certificate name '{}' is listed by another token too", t.name, cert_name));
      }
    }
    if (t.secret.empty() && !t.cert_names.empty()) {
      // Held by certificate only.
    } else if (t.secret.size() < kMinSecretBytes || t.secret.size() > kMaxSecretBytes) {
      return Status::InvalidArgument(fmt::format(
          "token '{}': its secret is {} bytes; it must be {}..{} (use a random one, e.g. "
          "`head -c 24 /dev/urandom | base64`)",
          t.name, t.secret.size(), kMinSecretBytes, kMaxSecretBytes));
    }
    const auto blank = std::find_if(t.secret.begin(), t.secret.end(), [](char c) {
      return static_cast<unsigned char>(c) <= ' ' || c == '\x7f';
    });
    if (blank != t.secret.end()) {
      // In a token file this is most often a quoted secret whose closing quote is missing:
      // YAML folds the lines after it (line breaks become spaces) into the secret.
      return Status::InvalidArgument(fmt::format(
          "token '{}': its secret holds a space, line break or control character (in a token "
          "file: is its closing quote missing?); a secret is one word, e.g. base64",
          t.name));
    }
    if (!t.secret.empty() && !secrets.insert(t.secret).second)
      return Status::InvalidArgument(
          fmt::format("token '{}' has the same secret as another token", t.name));
    KVPORT_RETURN_IF_ERROR(CheckPatterns(t, "read", t.read));
    KVPORT_RETURN_IF_ERROR(CheckPatterns(t, "write", t.write));
    if (t.default_namespace) {
      const std::string& ns = *t.default_namespace;
      if (ns.size() > kMaxDefaultNamespaceBytes) {
        return Status::InvalidArgument(
            fmt::format("token '{}': its namespace is {} bytes; a namespace is at most {}", t.name,
                        ns.size(), kMaxDefaultNamespaceBytes));
      }
      if (!NamespaceSet(t.read).Contains(ns) || !NamespaceSet(t.write).Contains(ns)) {
        return Status::InvalidArgument(fmt::format(
            "token '{}': its namespace '{}' must be one it may read and write (add it to `read` "
            "and `write`)",
            t.name, ns));
      }
    }
  }
  return Status::Ok();
}

AccessPolicy::AccessPolicy(bool required, const std::vector<AccessToken>& tokens)
    : required_(required), entries_(Compile(tokens)) {}

std::vector<AccessPolicy::Entry> AccessPolicy::Compile(const std::vector<AccessToken>& tokens) {
  std::vector<Entry> entries;
  entries.reserve(tokens.size());
  for (const AccessToken& t : tokens) {
    entries.push_back(
        {t.secret, t.cert_names,
         std::make_shared<const Grant>(t.name, NamespaceSet(t.read), NamespaceSet(t.write), t.admin,
                                       t.default_namespace)});
  }
  return entries;
}

Result<std::shared_ptr<const Grant>> AccessPolicy::Authenticate(
    std::string_view secret, const std::vector<std::string>& cert_names) const {
  if (!required_) return Grant::Everything();
  MutexLock lock(mu_);
  if (secret.empty()) return AuthenticateCertificate(cert_names);
  // Every entry is compared, whichever matches, so the time taken does not say which one did.
  // A token held by certificate only has no secret to match.
  const Entry* match = nullptr;
  for (const Entry& e : entries_) {
    if (!e.secret.empty() && EqualsInConstantTime(secret, e.secret)) match = &e;
  }
  if (match == nullptr) return Status::PermissionDenied("the token presented is not accepted");
  return match->grant;
}

Result<std::shared_ptr<const Grant>> AccessPolicy::AuthenticateCertificate(
    const std::vector<std::string>& cert_names) const {
  const Entry* match = nullptr;
  for (const Entry& e : entries_) {
    for (const std::string& listed : e.cert_names) {
      if (std::find(cert_names.begin(), cert_names.end(), listed) == cert_names.end()) continue;
      if (match != nullptr && match != &e) {
        return Status::PermissionDenied(fmt::format(
            "the client certificate's names map to two tokens ('{}' and '{}'): give it one",
            match->grant->name(), e.grant->name()));
      }
      match = &e;
    }
  }
  if (match != nullptr) return match->grant;
  if (!cert_names.empty()) {
    // A certificate the CA signed is not by itself a grant: without a token naming it, the
    // client is where a client without a token is.
    return Status::PermissionDenied(fmt::format(
        "this node requires a token, and the client certificate (names: {}) is not listed in "
        "any token's cert_names",
        fmt::join(cert_names, ", ")));
  }
  return Status::PermissionDenied(
      "this node requires a token (set KVPORT_TOKEN, the token_file config key, or "
      "InitOptions::token)");
}

void AccessPolicy::Replace(const std::vector<AccessToken>& tokens) {
  std::vector<Entry> entries = Compile(tokens);
  MutexLock lock(mu_);
  entries_.swap(entries);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

size_t AccessPolicy::token_count() const {
  MutexLock lock(mu_);
  return entries_.size();
}

Status SessionAccess::Authenticate(const AccessPolicy& policy, std::string_view secret,
                                   std::vector<std::string> cert_names) {
  const uint64_t generation = policy.generation();
  KVPORT_ASSIGN_OR_RETURN(grant_, policy.Authenticate(secret, cert_names));
  secret_.assign(secret);
  cert_names_ = std::move(cert_names);
  generation_ = generation;
  return Status::Ok();
}

Status SessionAccess::Refresh(const AccessPolicy& policy) {
  const uint64_t generation = policy.generation();
  if (generation == generation_ || grant_ == nullptr) return Status::Ok();
  Result<std::shared_ptr<const Grant>> grant = policy.Authenticate(secret_, cert_names_);
  if (!grant.ok()) {
    grant_.reset();
    return Status::PermissionDenied("the token of this session was revoked");
  }
  grant_ = std::move(grant).value();
  generation_ = generation;
  return Status::Ok();
}

}  // namespace kvport::server
