// SPDX-License-Identifier: Apache-2.0
// HttpServer: a node's operations endpoint (`kvport serve --http HOST:PORT`, config key
// http_listen): GET /metrics (Prometheus), /health and /stats (docs/operations.md).
//
//   auto http = http::HttpServer::Start(options);   // binds; /health says "starting"
//   auto node = Server::Start(...);
//   (*http)->Attach(node->get());                   // /health 200 from now on
//   ...
//   (*http)->Stop();                                // before the node is destroyed
//
// It runs on threads of its own (cpp-httplib's, `threads` of them), never on the node's I/O
// loops: a scrape reads the node's atomic counters and its store's statistics, like STATS.
// The HTTP library's header is included only in http_server.cc.
//
// Thread safety: every member may be called from any thread.
#pragma once

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

struct HttpOptions {
  // HOST:PORT, [IPV6]:PORT, or a bare PORT for 127.0.0.1:PORT. Port 0 picks a free one.
  std::string listen = "127.0.0.1:0";
  // Asked for every request except GET /health with the bearer token of its Authorization
  // header ("" when it has none); false answers 401. Unset (what `kvport serve` does): the
  // attached node decides (Server::GrantsAdmin: an admin token, or anything on an open node).
  std::function<bool(std::string_view bearer)> authorize;
  unsigned threads = 2;  // request threads
  // What /metrics reports beside the node's counters (version, runtimes, transports, the
  // namespace label cap); state, auth_mode and resident_bytes are filled in per scrape.
  MetricsContext context;
};

class HttpServer {
 public:
  // Binds the address and starts serving. InvalidArgument for a bad address, IoError when it
  // cannot be bound.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpOptions& options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The node to report on; until then /health says "starting" (503) and /metrics and /stats
  // answer 503. Attach(nullptr) detaches (before the node is destroyed without Stop()).
  void Attach(const Server* node);

  // The bound address as HOST:PORT ("127.0.0.1:9470").
  std::string address() const;
  uint16_t port() const;

  // Stops accepting, finishes the requests being answered, joins the threads. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "127.0.0.1:9470" from "9470"; other text as it is. For the http_listen key and --http.
std::string HttpListenAddress(std::string_view text);

}  // namespace kvport::http
