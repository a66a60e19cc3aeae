// SPDX-License-Identifier: Apache-2.0
// Member: one cache node of a cluster as clients see it, and its record in etcd.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"

namespace kvport::cluster {

struct Member {
  // Stable name of the node across restarts (`node_id` in its config; by default its advertised
  // address). Placement hashes it, so a node that restarts under the same id owns the same keys.
  std::string id;
  // "host:port" clients connect to (the node's advertised TCP address).
  std::string address;
  // Random, nonzero, new on every start of the node: a member seen again with another epoch is a
  // new, empty node. 0 in a static list, which has no epochs.
  uint64_t epoch = 0;
  // The node's capacity: placement's weight. 0 in a static list (every node weighs the same).
  uint64_t capacity_bytes = 0;
  // Highest protocol version the node speaks, and the data paths it offers ("tcp", "shm").
  uint32_t protocol_version = 0;
  std::vector<std::string> transports;
  // When the node registered this epoch (Unix time, milliseconds; 0 when unknown).
  int64_t started_unix_ms = 0;

  bool operator==(const Member&) const = default;
};

// The record a node writes under its key in etcd: a JSON object with the fields above
// (docs/cluster.md shows it). DecodeMember refuses a record that is not such an object, lacks
// id, address or epoch, or whose address is not host:port (Corruption, naming the field), so one
// bad record never takes placement down: the caller skips it.
std::string EncodeMember(const Member& member);
Result<Member> DecodeMember(std::string_view json);

}  // namespace kvport::cluster
