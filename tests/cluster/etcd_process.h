// SPDX-License-Identifier: Apache-2.0
// EtcdProcess: a real etcd (Debian's etcd-server, /usr/bin/etcd, or $KVPORT_ETCD_BINARY) run as
// a child process on free loopback ports with a data directory of its own, for the cluster
// tests. It runs with short heartbeat and election intervals so 1-second leases work.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvport/status.h"

namespace kvport::testing {

class EtcdProcess {
 public:
  // Starts etcd and waits (bounded) until it answers on its client port. Unavailable, with the
  // tail of etcd's log, when it does not; NotFound naming the package when there is no binary.
  static Result<std::unique_ptr<EtcdProcess>> Start();
  ~EtcdProcess();  // kills etcd and removes its data directory

  // "127.0.0.1:PORT": what --etcd and etcd: endpoints take.
  const std::string& endpoint() const { return endpoint_; }
  // Its client port (the PORT of endpoint()).
  uint16_t port() const {
    return static_cast<uint16_t>(std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1)));
  }

  // Stops etcd (SIGTERM, then SIGKILL if it lingers) and waits for it; its data stays.
  Status Stop();
  // Starts it again on the same ports with the same data (leases and keys survive, as in a real
  // etcd restart), and waits until it answers.
  Status Restart();

 private:
  EtcdProcess() = default;
  Status Launch();

  std::string endpoint_;
  std::string peer_url_;
  std::string data_dir_;
  std::string log_path_;
  int pid_ = -1;
};

}  // namespace kvport::testing
