// SPDX-License-Identifier: Apache-2.0
// The only file that includes cpp-httplib (its header is large: keep it out of every other).
#include "http/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>

#include "common/thread_annotations.h"
#include "kvport/log.h"
#include "net/host_port.h"

namespace kvport::http {

struct HttpServer::Impl {
  HttpOptions options;
  httplib::Server server;
  net::HostPort address;
  std::thread thread;
  std::atomic<bool> listen_returned{false};

  // The node reported on. A scrape holds node_mu while it reads the node, so Attach(nullptr)
  // returns only once no request uses the old one.
  mutable Mutex node_mu;
  const Server* node GUARDED_BY(node_mu) = nullptr;

  Mutex stop_mu;
  bool stopped GUARDED_BY(stop_mu) = false;

  // The hook when one is set; otherwise the attached node's tokens: an admin token, or any
  // request on an open node (before a node is attached there is nothing to show: 503).
  bool Authorized(const httplib::Request& request) const EXCLUDES(node_mu) {
    std::string_view bearer;
    const std::string& header = request.get_header_value("Authorization");
    constexpr std::string_view kScheme = "Bearer ";
    if (header.size() > kScheme.size()) {
      bool scheme = true;
      for (size_t i = 0; i < kScheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(header[i])) !=
            std::tolower(static_cast<unsigned char>(kScheme[i]))) {
          scheme = false;
        }
      }
      if (scheme) bearer = std::string_view(header).substr(kScheme.size());
    }
    if (options.authorize) return options.authorize(bearer);
    MutexLock lock(node_mu);
    return node == nullptr || node->GrantsAdmin(bearer);
  }

  // Answers 401 (and false) when the request may not see the node's data.
  bool Guard(const httplib::Request& request, httplib::Response& response) const {
    if (Authorized(request)) return true;
    response.status = 401;
    response.set_header("WWW-Authenticate", "Bearer realm=\"kvport\"");
    response.set_content("{\"error\": \"unauthorized\"}\n", "application/json");
    return false;
  }

  void Health(httplib::Response& response) const EXCLUDES(node_mu) {
    std::string_view status = "starting";
    {
      MutexLock lock(node_mu);
      if (node != nullptr) {
        switch (node->state()) {
          case ServerState::kServing:
            status = "serving";
            break;
          case ServerState::kDraining:
            status = "draining";
            break;
          case ServerState::kStopped:
            status = "stopped";
            break;
        }
      }
    }
    response.status = status == "serving" ? 200 : 503;
    response.set_content(RenderHealthJson(status, options.context.version), "application/json");
  }

  // Runs `render` on the attached node, or answers 503 when there is none.
  template <typename F>
  void WithNode(httplib::Response& response, const char* content_type, F render) const
      EXCLUDES(node_mu) {
    MutexLock lock(node_mu);
    if (node == nullptr) {
      response.status = 503;
      response.set_content("{\"status\": \"starting\"}\n", "application/json");
      return;
    }
    response.set_content(render(*node), content_type);
  }

  void Metrics(httplib::Response& response) const {
    WithNode(response, "text/plain; version=0.0.4; charset=utf-8", [this](const Server& n) {
      MetricsContext context = options.context;
      context.state = n.state();
      context.auth_mode = n.auth_mode();
      context.resident_bytes = ProcessResidentBytes();
      return RenderMetrics(n.Stats(), context);
    });
  }

  void Stats(httplib::Response& response) const {
    WithNode(response, "application/json",
             [](const Server& n) { return RenderStatsJson(n.Stats()); });
  }
};

std::string HttpListenAddress(std::string_view text) {
  const bool bare_port = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (bare_port) return "127.0.0.1:" + std::string(text);
  return std::string(text);
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  Result<net::HostPort> address = net::ParseHostPort(HttpListenAddress(options.listen));
  if (!address.ok()) return address.status().WithContext("HTTP listen address");
  impl->address = *address;

  Impl* raw = impl.get();
  const unsigned threads = options.threads > 0 ? options.threads : 1;
  impl->server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm holds
  // the body until the client's delayed ACK, 40 ms per response (measured).
  impl->server.set_tcp_nodelay(true);
  impl->server.set_keep_alive_max_count(100);
  impl->server.set_read_timeout(5, 0);
  impl->server.set_write_timeout(5, 0);
  impl->server.set_payload_max_length(64 * 1024);
  impl->server.Get("/health", [raw](const httplib::Request&, httplib::Response& response) {
    raw->Health(response);
  });
  impl->server.Get("/metrics", [raw](const httplib::Request& request, httplib::Response& response) {
    if (raw->Guard(request, response)) raw->Metrics(response);
  });
  impl->server.Get("/stats", [raw](const httplib::Request& request, httplib::Response& response) {
    if (raw->Guard(request, response)) raw->Stats(response);
  });
  impl->server.set_error_handler([](const httplib::Request&, httplib::Response& response) {
    if (response.status == 404) {
      response.set_content("not found: try /metrics, /health or /stats\n", "text/plain");
    }
  });

  const std::string& host = impl->address.host;
  if (impl->address.port == 0) {
    const int port = impl->server.bind_to_any_port(host);
    if (port <= 0) {
      return Status::IoError("cannot listen for HTTP on " + impl->address.ToString());
    }
    impl->address.port = static_cast<uint16_t>(port);
  } else if (!impl->server.bind_to_port(host, impl->address.port)) {
    return Status::IoError("cannot listen for HTTP on " + impl->address.ToString() +
                           " (address in use, or not an address of this host?)");
  }
  impl->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    raw->listen_returned.store(true, std::memory_order_release);
  });
  // httplib's stop() does nothing until its accept loop runs: wait for it here, so that a Stop
  // right after Start cannot leave the loop running (and the join waiting) for ever.
  while (!impl->server.is_running() && !impl->listen_returned.load(std::memory_order_acquire)) {
    std::this_thread::yield();
  }
  log::Info("HTTP endpoint on http://{}/ (/metrics, /health, /stats)", impl->address.ToString());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::Attach(const Server* node) {
  MutexLock lock(impl_->node_mu);
  impl_->node = node;
}

std::string HttpServer::address() const {
  return impl_->address.ToString();
}

uint16_t HttpServer::port() const {
  return impl_->address.port;
}

void HttpServer::Stop() {
  MutexLock lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace kvport::http
