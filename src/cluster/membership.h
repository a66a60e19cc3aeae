// SPDX-License-Identifier: Apache-2.0
// Membership: where a client learns which nodes make up a cluster.
//
// Two sources: a static list ("host:port;host:port", EIC's own form; StaticMembership) and etcd
// (nodes register themselves with a lease; EtcdMembership watches the prefix). Placement reads
// Members() whenever generation() moved, so a source only has to keep the list current.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/member.h"

namespace kvport::cluster {

class Membership {
 public:
  virtual ~Membership() = default;

  // The live members now, sorted by id, without duplicates. May be empty (every node's lease
  // lapsed). Thread-safe.
  virtual std::vector<Member> Members() const = 0;
  // Changes whenever Members() does (it may change without Members() changing). One atomic
  // load: callers read it on every call. Thread-safe.
  virtual uint64_t generation() const = 0;
  // One line for logs and errors: "static list of 3 nodes", "etcd 127.0.0.1:2379 cluster c1".
  virtual std::string Describe() const = 0;
};

// A fixed list of nodes: ids are their addresses, epochs and capacities 0 (equal weights).
class StaticMembership final : public Membership {
 public:
  explicit StaticMembership(std::vector<std::string> addresses);
  std::vector<Member> Members() const override { return members_; }
  uint64_t generation() const override { return 1; }
  std::string Describe() const override;

 private:
  std::vector<Member> members_;
};

}  // namespace kvport::cluster
