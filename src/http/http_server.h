// SPDX-License-Identifier: Apache-2.0
// HttpServer: a node's operations endpoint (`kvport serve --http HOST:PORT`, config key
// http_listen): GET /metrics (Prometheus), /health and /stats (docs/operations.md), over HTTPS
// when given a TLS context (HttpOptions::tls: `kvport serve` on a node with TLS).
//
//   auto http = http::HttpServer::Start(options);   // binds; /health says "starting"
//   auto node = Server::Start(...);
//   (*http)->Attach(node->get());                   // /health 200 from now on
//   ...
//   (*http)->Stop();                                // before the node is destroyed
//
// It runs on one thread of its own, an event loop (net::EventLoop) that serves every HTTP
// connection without blocking, never on the node's I/O loops: a scrape reads the node's atomic
// counters and its store's statistics, like STATS.
//
// Why not a thread per connection (cpp-httplib's server, which this replaced): a liveness probe
// must be answered within a second whatever other peers do, and a pool of threads that each
// wait out an idle keep-alive connection cannot promise that (two idle connections stalled
// /health past Kubernetes' 1 s probe timeout; a thousand held it for minutes). Here no peer
// holds more than its own connection, every wait has a deadline (HttpConnection), and the
// connections are capped, so the endpoint cannot take the data path's file descriptors: it holds
// at most `max_connections` + 4 (its listener, its loop's epoll and eventfd, and for a moment a
// new connection while the one it replaces closes).
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/metrics.h"
#include "kvport/server.h"
#include "kvport/status.h"

namespace kvport::http {

inline constexpr uint32_t kDefaultMaxConnections = 64;

struct HttpOptions {
  // HOST:PORT, [IPV6]:PORT, or a bare PORT for 127.0.0.1:PORT. Port 0 picks a free one.
  std::string listen = "127.0.0.1:0";
  // Asked for every request except GET /health with the bearer token of its Authorization
  // header ("" when it has none); false answers 401. Unset (what `kvport serve` does): the
  // attached node decides (Server::GrantsAdmin: an admin token, or anything on an open node).
  std::function<bool(std::string_view bearer)> authorize;
  // HTTP connections open at once. When all are open, a new connection takes the place of the
  // one idle longest (waiting for a request: a keep-alive connection, or a head still arriving;
  // or closing after its last response), or, when none is idle, of the one open longest (reset,
  // its answer cut short), so that a probe gets in whatever the peers holding the others do.
  // Never 0.
  uint32_t max_connections = kDefaultMaxConnections;
  // The whole head of a request must arrive within this of the connection being accepted or its
  // previous response being sent: the keep-alive idle timeout, and the slow-head deadline.
  std::chrono::milliseconds request_timeout{2000};
  // A response must be sent whole within this of the first write the peer did not take at once.
  std::chrono::milliseconds write_timeout{5000};
  // HTTPS with the node's certificate and key (PEM; both or neither): every connection starts
  // with a TLS handshake, and a request in the clear is answered 400 and closed. No client
  // certificate is asked for, even on a node with tls_ca_file: a Kubernetes HTTPS probe presents
  // none (docs/security.md, "The HTTP endpoint over TLS"). Start fails with InvalidArgument
  // naming a file that cannot be used. Both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // What /metrics reports beside the node's counters (version, runtimes, transports, the
  // namespace label cap); state, auth_mode and resident_bytes are filled in per scrape.
  MetricsContext context;
};

class HttpServer {
 public:
  // Binds the address and starts serving. InvalidArgument for a bad address or option, IoError
  // when it cannot be bound.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpOptions& options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The node to report on; until then /health says "starting" (503) and /metrics and /stats
  // answer 503. Attach(nullptr) detaches (before the node is destroyed without Stop()).
  void Attach(const Server* node);

  // The bound address as HOST:PORT ("127.0.0.1:9470").
  std::string address() const;
  // "https" with HttpOptions::tls, else "http".
  std::string_view scheme() const;
  // Reads the certificate and key files again (`kvport serve` on SIGHUP, as the node's own TLS):
  // connections accepted from now on use them, open ones keep theirs. On error the certificate
  // in force stays, the error is logged and returned. OK and nothing done for plain HTTP.
  Status ReloadTls();
  uint16_t port() const;

  // Stops accepting, closes every connection (a request is answered within one turn of the
  // loop, so none is left half-answered; a response still being sent is cut short) and joins
  // the thread. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "127.0.0.1:9470" from "9470"; other text as it is. For the http_listen key and --http.
std::string HttpListenAddress(std::string_view text);

}  // namespace kvport::http
