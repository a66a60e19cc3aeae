// SPDX-License-Identifier: Apache-2.0
// The endpoint: a listener and its connections on one event loop of their own, the cap on
// connections, and the three pages (the routes). A connection's own rules (deadlines, sizes,
// keep-alive) are in http_connection.h, the message format in http_message.h.
#include "http/http_server.h"

#include <algorithm>
#include <cctype>
#include <thread>
#include <unordered_map>

#include "common/thread_annotations.h"
#include "http/http_connection.h"
#include "http/http_message.h"
#include "kvport/host_info.h"
#include "kvport/log.h"
#include "net/event_loop.h"
#include "net/host_port.h"
#include "net/tcp_listener.h"
#include "net/tls.h"

namespace kvport::http {

namespace {

// Connections accepted per readiness event, so that a storm of them cannot starve the requests
// of those already open.
constexpr int kMaxAcceptsPerEvent = 64;
// After accept fails (out of descriptors): the pending connection stays queued, and the
// level-triggered listener would otherwise report it again at once, for ever.
constexpr std::chrono::milliseconds kAcceptErrorPause(100);
// At most one warning line per kind in this long (a peer that fills the table would otherwise
// write one line per connection).
constexpr std::chrono::seconds kWarningInterval(10);

// A warning written at most once per kWarningInterval, with how many it stood for.
struct RateLimitedWarning {
  MonotonicClock::time_point last{};
  uint64_t unlogged = 0;
  bool ever = false;

  // True when a line is due now; `*count` is then the events it reports (this one included).
  bool Due(uint64_t* count) {
    ++unlogged;
    const MonotonicClock::time_point now = MonotonicClock::now();
    if (ever && now - last < kWarningInterval) return false;
    ever = true;
    last = now;
    *count = unlogged;
    unlogged = 0;
    return true;
  }
};

}  // namespace

struct HttpServer::Impl final : public HttpConnectionOwner, public net::EventHandler {
  explicit Impl(const HttpOptions& o)
      : options(o), https(!o.tls_cert_file.empty() || !o.tls_key_file.empty()) {}

  HttpOptions options;
  const bool https;  // options name a certificate
  // The context new connections are accepted under (ReloadTls replaces it); null: plain HTTP.
  mutable Mutex tls_mu;
  std::shared_ptr<const net::TlsContext> tls GUARDED_BY(tls_mu);
  std::string address;  // as bound, "127.0.0.1:9470"
  uint16_t port = 0;

  // Declared first, destroyed last: the listener and the connections unwatch themselves in it.
  std::unique_ptr<net::EventLoop> loop;
  std::thread thread;

  // Loop thread only (and ~Impl, after the thread has been joined).
  std::unique_ptr<net::TcpListener> listener;
  bool accepting = false;
  net::TimerId resume_timer = 0;
  std::unordered_map<HttpConnection*, std::unique_ptr<HttpConnection>> connections;
  RateLimitedWarning full_warning;
  RateLimitedWarning accept_warning;

  // The node reported on. A request holds node_mu while it reads the node, so Attach(nullptr)
  // returns only once no request uses the old one.
  mutable Mutex node_mu;
  const Server* node GUARDED_BY(node_mu) = nullptr;

  Mutex stop_mu;
  bool stopped GUARDED_BY(stop_mu) = false;

  std::shared_ptr<const net::TlsContext> CurrentTls() const EXCLUDES(tls_mu) {
    MutexLock lock(tls_mu);
    return tls;
  }
  // The server role without a CA file: no client certificate is asked for (see HttpOptions).
  Result<std::shared_ptr<net::TlsContext>> MakeTls() const {
    return net::TlsContext::Create(net::TlsRole::kServer,
                                   {options.tls_cert_file, options.tls_key_file, ""});
  }

  ~Impl() override {
    // Normally Stop() has shut down on the loop thread and this does nothing. If the loop ended
    // early (epoll failed), or never ran (Start failed), it is done here, while the loop they
    // unwatch themselves from exists; the loop then runs what is still posted (the Shutdown that
    // Stop posted finds nothing left to do) before the members go.
    Shutdown();
    loop.reset();
  }

  // --- Connections ------------------------------------------------------------------------

  // The listener.
  void OnEvents(uint32_t) override {
    if (!accepting) return;
    for (int i = 0; i < kMaxAcceptsPerEvent; ++i) {
      Result<net::Socket> accepted = listener->Accept();
      if (!accepted.ok()) {
        uint64_t count = 0;
        if (accept_warning.Due(&count)) {
          log::Warn("HTTP endpoint: {} ({} time(s) in the last {} s); pausing accept for {} ms",
                    accepted.status().ToString(), count, kWarningInterval.count(),
                    kAcceptErrorPause.count());
        }
        PauseAccepting();
        return;
      }
      if (!accepted->valid()) return;  // nothing more pending
      Admit(std::move(accepted).value());
    }
  }

  void Admit(net::Socket socket) {
    if (connections.size() >= options.max_connections) {
      // The one idle longest loses nothing; when none is idle, the one open longest: a peer
      // that holds connections busy (reading its answers a trickle at a time) holds the oldest,
      // while a probe's or a scrape's connection lives a few milliseconds.
      HttpConnection* victim = nullptr;
      for (const auto& [raw, owned] : connections) {
        if (victim == nullptr || ComesFirst(*raw, *victim)) victim = raw;
      }
      uint64_t count = 0;
      if (full_warning.Due(&count)) {
        log::Warn(
            "HTTP endpoint at its cap of {} connections: {} new connection(s) in the last {} s "
            "each closed the one idle longest (or, none idle, the one open longest)",
            options.max_connections, count, kWarningInterval.count());
      }
      victim->Evict();  // Closed() takes it out of the table
    }
    auto connection = std::make_unique<HttpConnection>(
        loop.get(), std::move(socket), CurrentTls(), this,
        HttpConnectionLimits{options.request_timeout, options.write_timeout});
    if (!connection->Start().ok()) return;  // its socket closes with it
    HttpConnection* raw = connection.get();
    connections.emplace(raw, std::move(connection));
  }

  // Whether `a` goes before `b` when the table is full.
  static bool ComesFirst(const HttpConnection& a, const HttpConnection& b) {
    if (a.idle() != b.idle()) return a.idle();
    if (a.idle()) return a.idle_since() < b.idle_since();
    return a.accepted_at() < b.accepted_at();
  }

  void Closed(HttpConnection* connection) override {
    auto it = connections.find(connection);
    if (it == connections.end()) return;
    // Not here: this may run inside the connection's own OnEvents (EventLoop's lifetime rule).
    HttpConnection* closed = it->second.release();
    connections.erase(it);
    loop->Post([closed] { delete closed; });
  }

  void PauseAccepting() {
    loop->Unwatch(listener->fd());
    accepting = false;
    resume_timer = loop->RunAfter(kAcceptErrorPause, [this] {
      resume_timer = 0;
      if (listener == nullptr) return;
      Status watched = loop->Watch(listener->fd(), EPOLLIN, this);
      if (!watched.ok()) {
        log::Error("HTTP endpoint cannot resume accepting: {}", watched.ToString());
        return;
      }
      accepting = true;
    });
  }

  // Loop thread, at Stop (or ~Impl, once no thread runs the loop). Idempotent.
  void Shutdown() {
    if (resume_timer != 0) loop->CancelTimer(resume_timer);
    resume_timer = 0;
    if (accepting) loop->Unwatch(listener->fd());
    accepting = false;
    listener.reset();
    connections.clear();  // a posted task: destroying them here is allowed
  }

  // --- Pages ------------------------------------------------------------------------------

  HttpResponse Respond(const RequestHead& request, std::string_view peer) override {
    if (request.method != "GET" && request.method != "HEAD") {
      HttpResponse response = TextResponse(405, "only GET and HEAD are served");
      response.headers.emplace_back("Allow", "GET, HEAD");
      return response;
    }
    if (request.path == "/health") return Health();
    if (request.path == "/metrics" || request.path == "/stats") {
      if (!Authorized(BearerToken(request.authorization), peer)) {
        HttpResponse response;
        response.status = 401;
        response.content_type = "application/json";
        response.body = "{\"error\": \"unauthorized\"}\n";
        response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kvport\"");
        return response;
      }
      return request.path == "/metrics" ? Metrics() : Stats();
    }
    return TextResponse(404, "not found: try /metrics, /health or /stats");
  }

  // The hook when one is set; otherwise the attached node's tokens: an admin token, or any
  // request on an open node (before a node is attached there is nothing to show: 503). A wrong
  // token is charged to `peer` as a wrong HELLO would be (Server::GrantsAdmin).
  bool Authorized(std::string_view bearer, std::string_view peer) const EXCLUDES(node_mu) {
    if (options.authorize) return options.authorize(bearer);
    MutexLock lock(node_mu);
    return node == nullptr || node->GrantsAdmin(bearer, peer);
  }

  HttpResponse Health() const EXCLUDES(node_mu) {
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
    HttpResponse response;
    response.status = status == "serving" ? 200 : 503;
    response.content_type = "application/json";
    response.body = RenderHealthJson(status, options.context.version);
    return response;
  }

  // Runs `render` on the attached node, or answers 503 when there is none.
  template <typename F>
  HttpResponse WithNode(const char* content_type, F render) const EXCLUDES(node_mu) {
    HttpResponse response;
    response.content_type = "application/json";
    MutexLock lock(node_mu);
    if (node == nullptr) {
      response.status = 503;
      response.body = "{\"status\": \"starting\"}\n";
      return response;
    }
    response.content_type = content_type;
    response.body = render(*node);
    return response;
  }

  HttpResponse Metrics() const {
    return WithNode("text/plain; version=0.0.4; charset=utf-8", [this](const Server& n) {
      MetricsContext context = options.context;
      context.state = n.state();
      context.auth_mode = n.auth_mode();
      context.resident_bytes = ProcessResidentBytes();
      return RenderMetrics(n.Stats(), context);
    });
  }

  HttpResponse Stats() const {
    return WithNode("application/json", [](const Server& n) { return RenderStatsJson(n.Stats()); });
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
  if (options.max_connections == 0) {
    return Status::InvalidArgument("HTTP max_connections is 0: no request could be answered");
  }
  if (options.request_timeout.count() <= 0 || options.write_timeout.count() <= 0) {
    return Status::InvalidArgument("HTTP request_timeout and write_timeout must be positive");
  }
  auto impl = std::make_unique<Impl>(options);
  if (impl->https) {
    Result<std::shared_ptr<net::TlsContext>> tls = impl->MakeTls();
    if (!tls.ok()) return tls.status().WithContext("HTTPS");
    MutexLock lock(impl->tls_mu);
    impl->tls = std::move(tls).value();
  }
  Result<net::HostPort> address = net::ParseHostPort(HttpListenAddress(options.listen));
  if (!address.ok()) return address.status().WithContext("HTTP listen address");

  KVPORT_ASSIGN_OR_RETURN(impl->loop, net::EventLoop::Create());
  Result<std::unique_ptr<net::TcpListener>> listener = net::TcpListener::Listen(*address);
  if (!listener.ok()) {
    if (listener.status().code() == StatusCode::kInvalidArgument) return listener.status();
    return Status::IoError("cannot listen for HTTP on " + address->ToString() + ": " +
                           listener.status().message() +
                           " (address in use, or not an address of this host?)");
  }
  impl->listener = std::move(listener).value();
  impl->address = impl->listener->address().ToString();
  impl->port = impl->listener->port();
  KVPORT_RETURN_IF_ERROR(impl->loop->Watch(impl->listener->fd(), EPOLLIN, impl.get()));
  impl->accepting = true;

  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop->Run(); });
  log::Info("HTTP endpoint on {}://{}/ (/metrics, /health, /stats; at most {} connections{})",
            raw->https ? "https" : "http", impl->address, options.max_connections,
            raw->https ? "; no client certificate asked for" : "");
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
  return impl_->address;
}

std::string_view HttpServer::scheme() const {
  return impl_->https ? "https" : "http";
}

Status HttpServer::ReloadTls() {
  if (!impl_->https) return Status::Ok();
  Result<std::shared_ptr<net::TlsContext>> tls = impl_->MakeTls();
  if (!tls.ok()) {
    log::Warn("HTTPS: keeping the certificate in force: {}", tls.status().ToString());
    return tls.status().WithContext("HTTPS");
  }
  MutexLock lock(impl_->tls_mu);
  impl_->tls = std::move(tls).value();
  log::Info("HTTPS: certificate reloaded for new connections");
  return Status::Ok();
}

uint16_t HttpServer::port() const {
  return impl_->port;
}

void HttpServer::Stop() {
  MutexLock lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  Impl* raw = impl_.get();
  // Run() runs the tasks posted before Stop() before it returns.
  raw->loop->Post([raw] { raw->Shutdown(); });
  raw->loop->Stop();
  if (raw->thread.joinable()) raw->thread.join();
}

}  // namespace kvport::http
