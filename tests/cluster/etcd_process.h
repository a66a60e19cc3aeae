// SPDX-License-Identifier: Apache-2.0
// EtcdProcess: a real etcd (Debian's etcd-server, /usr/bin/etcd, or $KVPORT_ETCD_BINARY) run as
// a child process on free loopback ports with a data directory of its own, for the cluster
// tests. It runs with short heartbeat and election intervals so 1-second leases work; optionally
// with TLS on its client port (and client certificates required), a short watch progress
// notification interval, and authentication (EnableAuth).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvport/status.h"

namespace kvport::testing {

struct EtcdProcessOptions {
  // A folder holding net::WriteTestCertificates' files: etcd serves https with node.pem and
  // node.key on its client port ("" = plain http).
  std::string tls_dir;
  bool client_cert_auth = false;  // with tls_dir: clients must present a certificate (ca.pem)
  // etcd's --experimental-watch-progress-notify-interval ("100ms"; "" = etcd's 10 minutes).
  std::string progress_notify_interval;
};

class EtcdProcess {
 public:
  // Starts etcd and waits (bounded) until it answers on its client port. Unavailable, with the
  // tail of etcd's log, when it does not; NotFound naming the package when there is no binary.
  static Result<std::unique_ptr<EtcdProcess>> Start(const EtcdProcessOptions& options = {});
  ~EtcdProcess();  // kills etcd and removes its data directory

  // "127.0.0.1:PORT": what --etcd and etcd: endpoints take.
  const std::string& endpoint() const { return endpoint_; }
  // "http://127.0.0.1:PORT", or https:// with TLS.
  std::string url() const {
    return (options_.tls_dir.empty() ? "http://" : "https://") + endpoint_;
  }
  // Its client port (the PORT of endpoint()).
  uint16_t port() const {
    return static_cast<uint16_t>(std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1)));
  }

  // Stops etcd (SIGTERM, then SIGKILL if it lingers) and waits for it; its data stays.
  Status Stop();
  // Starts it again on the same ports with the same data (leases and keys survive, as in a real
  // etcd restart), and waits until it answers.
  Status Restart();

  // Adds user root with `root_password` (role root) and turns authentication on (a plain-http
  // etcd only): from then on every call needs a token.
  Status EnableAuth(const std::string& root_password);

 private:
  EtcdProcess() = default;
  Status Launch();

  EtcdProcessOptions options_;
  std::string endpoint_;
  int health_port_ = 0;  // the client port, or the plain metrics port with TLS
  std::string peer_url_;
  std::string data_dir_;
  std::string log_path_;
  int pid_ = -1;
};

}  // namespace kvport::testing
