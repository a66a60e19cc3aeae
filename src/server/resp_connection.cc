// SPDX-License-Identifier: Apache-2.0
// The Redis protocol's connection commands: PING, ECHO, HELLO, AUTH, CLIENT, SELECT and QUIT,
// which read and change the connection's own state (its protocol version, token, name and
// namespace) rather than keys.
#include <fmt/core.h>

#include <optional>
#include <string>

#include "server/resp_command_parts.h"
#include "server/unauthenticated.h"

namespace kvport::server::resp {

namespace {

// The namespace a client's keys live in once authenticated: its token's default, else "".
void TakeDefaultNamespace(RespClient& client) {
  const std::optional<std::string>& ns = client.access.grant().default_namespace();
  client.ns = ns ? *ns : std::string();
}

// AUTH [name] secret: a kvport token. With a name, the token must be the one of that name.
// On a node with tokens a peer that failed too often is refused before its secret is looked at,
// and the connection closes once its peer is backed off, so guesses cannot be pipelined on it
// (server/auth_throttle.h).
bool Authenticate(Context& c, std::optional<std::string_view> name, std::string_view secret) {
  UnauthenticatedConnections* table = c.service.unauthenticated();
  AuthThrottle* throttle = table != nullptr ? table->throttle() : nullptr;
  std::string peer;
  if (throttle != nullptr) {
    // Until its first success the connection is in the table, under its address; after it, a
    // new AUTH is charged to the token it holds.
    if (std::optional<std::string> address = table->AddressOf(c.client.id)) {
      peer = std::move(*address);
    } else if (c.client.access.authenticated()) {
      peer = AuthThrottle::TokenPeer(c.client.access.grant().name());
    }
    Status admitted = throttle->Admit(peer);
    if (!admitted.ok()) {
      c.service.counters().CountAuthThrottled();
      c.w.Error("ERR " + admitted.message());
      c.client.quit = true;
      return false;
    }
  }
  SessionAccess attempt;
  Status s = attempt.Authenticate(c.service.access(), secret);
  if (s.ok() && name && c.service.access().required() && attempt.grant().name() != *name &&
      *name != "default") {
    s = Status::PermissionDenied("token name mismatch");
  }
  if (!s.ok()) {
    c.service.counters().CountAuthFailure();
    c.w.Error("WRONGPASS invalid username-password pair or user is disabled.");
    if (throttle != nullptr && !secret.empty() && throttle->Charge(peer)) c.client.quit = true;
    return false;
  }
  c.client.access = std::move(attempt);
  TakeDefaultNamespace(c.client);
  return true;
}

// Whether a client or library name is LMCache's ("lmcache", "LMCache-redis", ...): such a client
// stores its chunks as folded pairs.
bool NamesLMCache(std::string_view name) {
  return name.size() >= 7 && ArgIs(name.substr(0, 7), "LMCACHE");
}

void SetClientName(RespClient& client, std::string_view name) {
  client.name.assign(name);
  if (NamesLMCache(name)) client.folds_pairs = true;
  // "kvport.ns=NAME" selects the namespace NAME (docs/resp.md, "Namespaces").
  constexpr std::string_view kPrefix = "kvport.ns=";
  if (name.substr(0, kPrefix.size()) == kPrefix) client.ns.assign(name.substr(kPrefix.size()));
}

}  // namespace

void Ping(Context& c, Args a) {
  if (a.size() > 2) return WrongArity(c.w, a[0]);  // the table says "at least 1"
  if (a.size() == 2) return c.w.Bulk(a[1]);
  c.w.Simple("PONG");
}

void Echo(Context& c, Args a) {
  c.w.Bulk(a[1]);
}

void Auth(Context& c, Args a) {
  if (a.size() != 2 && a.size() != 3) return WrongArity(c.w, a[0]);
  const bool named = a.size() == 3;
  if (Authenticate(c, named ? std::optional<std::string_view>(a[1]) : std::nullopt, a.back())) {
    c.w.Simple("OK");
  }
}

void Hello(Context& c, Args a) {
  int version = c.client.version;
  size_t i = 1;
  if (a.size() >= 2) {
    std::optional<int64_t> v = ParseInteger(a[1]);
    if (!v) return c.w.Error("ERR Protocol version is not an integer or out of range");
    if (*v != 2 && *v != 3) return c.w.Error("NOPROTO unsupported protocol version");
    version = static_cast<int>(*v);
    i = 2;
  }
  std::optional<std::string_view> name;
  for (; i < a.size(); ++i) {
    if (ArgIs(a[i], "AUTH") && i + 2 < a.size()) {
      if (!Authenticate(c, a[i + 1], a[i + 2])) return;
      i += 2;
    } else if (ArgIs(a[i], "SETNAME") && i + 1 < a.size()) {
      name = a[++i];
    } else {
      return c.w.Error(fmt::format("ERR Syntax error in HELLO option '{}'", a[i]));
    }
  }
  if (!c.client.access.authenticated()) {
    return c.w.Error(
        "NOAUTH HELLO must be called with the client already authenticated, "
        "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
        "authenticate the client and select the RESP protocol version at the same "
        "time");
  }
  if (name) SetClientName(c.client, *name);
  c.client.version = version;
  RespWriter w(c.w.out(), version);  // the reply is already in the new version
  w.Map(7);
  w.Bulk("server");
  w.Bulk("redis");
  w.Bulk("version");
  w.Bulk(kRedisVersion);
  w.Bulk("proto");
  w.Integer(version);
  w.Bulk("id");
  w.Integer(static_cast<int64_t>(c.client.id));
  w.Bulk("mode");
  w.Bulk("standalone");
  w.Bulk("role");
  w.Bulk("master");
  w.Bulk("modules");
  w.Array(0);
}

void ClientSetName(Context& c, Args a) {
  if (a[2].find_first_of(" \n\r") != std::string_view::npos) {
    return c.w.Error("ERR Client names cannot contain spaces, newlines or special characters.");
  }
  SetClientName(c.client, a[2]);
  c.w.Simple("OK");
}

void ClientGetName(Context& c, Args) {
  if (c.client.name.empty()) return c.w.Null();
  c.w.Bulk(c.client.name);
}

void ClientId(Context& c, Args) {
  c.w.Integer(static_cast<int64_t>(c.client.id));
}

void ClientNamespace(Context& c, Args a) {
  if (a.size() > 3) return WrongArity(c.w, "client|namespace");
  if (a.size() == 2) return c.w.Bulk(c.client.ns);
  if (!c.grant().may_read(a[2]) && !c.grant().may_write(a[2])) {
    return c.w.Error(
        fmt::format("NOPERM token '{}' may not use namespace '{}'", c.grant().name(), a[2]));
  }
  c.client.ns.assign(a[2]);
  c.w.Simple("OK");
}

// redis-py and others announce their library: kept only to tell LMCache (NamesLMCache).
void ClientSetInfo(Context& c, Args a) {
  if (ArgIs(a[2], "LIB-NAME") && NamesLMCache(a[3])) c.client.folds_pairs = true;
  c.w.Simple("OK");
}

void Select(Context& c, Args a) {
  std::optional<int64_t> db = ParseInteger(a[1]);
  if (!db) return NotInteger(c.w);
  if (*db != 0) return c.w.Error("ERR DB index is out of range");
  c.w.Simple("OK");
}

void Quit(Context& c, Args) {
  c.client.quit = true;
  c.w.Simple("OK");
}

}  // namespace kvport::server::resp
