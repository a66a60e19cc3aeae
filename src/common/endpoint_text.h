// SPDX-License-Identifier: Apache-2.0
// The text forms of a cache endpoint, one grammar for the client (which connects to it) and the
// config check (which validates it without connecting):
//
//   [eic://]HOST:PORT[/NS]                               one node
//   [eic://]HOST:PORT;HOST:PORT[;...][;][/NS]            a static cluster (EIC's own form)
//   [eic://]etcd:HOST:PORT[,HOST:PORT...]/CLUSTER[/NS]   the nodes registered in etcd
//   unix:/PATH                                           a node's Unix socket on this host
//
// each optionally followed by "?replicas=N" and/or "write_quorum=M" (joined with '&'). A
// trailing '/' is ignored (LMCache strips one, SGLang does not). "etcd:" starts the etcd form
// only when a ':' follows it again (so a host named etcd, "etcd:2379", is still one node).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"

namespace kvport {

struct EndpointText {
  enum class Kind {
    kNodes,  // one node, or a static list of several
    kEtcd,   // membership from etcd
    kUnix,   // a Unix socket path
  };
  Kind kind = Kind::kNodes;
  // kNodes: the HOST:PORT entries, in the order written; kEtcd: etcd's HOST:PORT endpoints.
  // Each is non-empty; its host and port are for the caller to check.
  std::vector<std::string> addresses;
  std::string cluster;    // kEtcd: the cluster's name
  std::string unix_path;  // kUnix: the absolute path
  std::string ns;         // the /NS part; "" when none
  int replicas = 0;       // ?replicas=N (1..16); 0 when not given
  int write_quorum = 0;   // ?write_quorum=M (1..replicas); 0 when not given
};

// The most replicas an endpoint may ask for.
inline constexpr int kMaxReplicas = 16;

// The entries of an etcd endpoint list, "HOST:PORT[,HOST:PORT...]" (the etcd: form's, and the
// node's `etcd` key and --etcd flag); "" has none. InvalidArgument for an empty entry. Hosts and
// ports are the caller's to check.
Result<std::vector<std::string>> SplitEtcdEndpoints(std::string_view list);

// Splits `text` into its parts. InvalidArgument saying what is wrong (the caller names the text):
// an unknown scheme, an empty list entry, a missing cluster name, a namespace path of more than
// one segment, an unknown or out-of-range option.
Result<EndpointText> ParseEndpointText(std::string_view text);

}  // namespace kvport
