// SPDX-License-Identifier: Apache-2.0
// The encoding of etcd's v3 JSON gateway, for EtcdClient: bytes (keys, values) are base64, int64
// fields are JSON strings and fields equal to their default (0, false, "") are left out, and a
// failed call answers {"error"|"message": ..., "code": <gRPC code>} (streaming calls:
// {"error": {"grpc_code": N, "message": ...}}). Pure functions; nothing here does I/O.
// Private to cluster/: only its .cc files that talk to etcd include it (and nlohmann-json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/etcd_client.h"
#include "kvport/status.h"

namespace kvport::cluster {

// The most bytes kept of one answer or one watch message. etcd's own request limit is 1.5 MiB
// and a cluster's node records are a few hundred bytes each, so this holds the records of tens of
// thousands of nodes; an etcd (or something posing as one) that sends more cannot make a node or
// a client grow without bound.
constexpr size_t kMaxAnswerBytes = size_t{64} << 20;

std::string Base64Encode(std::string_view in);
// Standard alphabet, padding optional (etcd always pads; being lenient costs nothing).
std::optional<std::string> Base64Decode(std::string_view in);

// The first key after every key starting with `prefix`: etcd's range_end for a prefix. An
// all-0xff (or empty) prefix has none: "\0" means "to the end of the keyspace".
std::string PrefixEnd(std::string_view prefix);

// An int64 field: a JSON string in the gateway's encoding, a number from other encoders, absent
// when 0. Corruption for anything else.
Result<int64_t> Int64Field(const nlohmann::json& object, const char* field);
// A base64 bytes field ("" when absent). Corruption when it is not base64.
Result<std::string> BytesField(const nlohmann::json& object, const char* field);
Result<EtcdKeyValue> ParseKeyValue(const nlohmann::json& kv);
// The revision in a response's header (0 when there is none).
Result<int64_t> HeaderRevision(const nlohmann::json& response);

// An etcd error answer as a Status, its message prefixed with `what`: NotFound, InvalidArgument,
// Timeout and PermissionDenied (gRPC PermissionDenied and Unauthenticated) as etcd says,
// Unavailable otherwise. `retry_elsewhere` (may be null) says whether another endpoint might do
// better (this member has no leader, or timed out).
Status ErrorStatus(const nlohmann::json& error_body, std::string_view what, bool* retry_elsewhere);

// True when etcd refused a call for its token (expired, or issued before the auth settings
// changed) or for having none (auth was enabled since): authenticating again may cure it.
bool TokenRejected(const Status& status);

// `key` with every byte outside printable ASCII as '?', for messages.
std::string Printable(std::string_view key);

}  // namespace kvport::cluster
