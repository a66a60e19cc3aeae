// SPDX-License-Identifier: Apache-2.0
// UcxService: what a node with UCX (ServerOptions::ucx) serves over UCX. Its UCX worker listens
// where the node's TCP port listens, on the interfaces that carry that address only, and moves
// the values of UCX-attached sessions (docs/protocol.md, "Version 9"; docs/transports.md,
// "UCX"): a UCX_ATTACH on a TCP session registers the session's ArenaWindow under a fresh
// random key; each put or get message names that key, and is served only inside the window
// (what the session reserved or leased, while the session lives and its token stands). No
// remote key to the node's memory is handed out: over UCX's software transports nothing would
// hold a peer to it. When the session ends its key is forgotten and the endpoints that carried
// its messages are closed.
//
// The worker is progressed on one I/O thread's event loop; the sessions that attach and detach
// run on any.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/thread_annotations.h"
#include "device/ucx_worker.h"
#include "kvport/status.h"
#include "kvport/ucx.h"
#include "net/event_loop.h"
#include "protocol/messages.h"
#include "server/arena_window.h"

namespace kvport::server {

class UcxService final : public net::EventHandler {
 public:
  // Opens UCX (`library`: ServerOptions::ucx_library; "" searches libucp.so.0) limited to the
  // interfaces holding `listen_host` (all of them for a wildcard address) and listens on
  // `listen_host`, on a port of the kernel's choosing; at most `max_endpoints` peers at once.
  // NotSupported naming why when UCX is not usable here; Unavailable when UCX refuses.
  static Result<std::unique_ptr<UcxService>> Create(std::string_view library,
                                                    std::string_view listen_host,
                                                    size_t max_endpoints);
  ~UcxService() override;

  // Progresses the worker on `loop`, sleeping on its event fd between events. Call before the
  // loop runs; the service must outlive the loop.
  Status Watch(net::EventLoop* loop);
  void OnEvents(uint32_t events) override;

  uint16_t port() const { return port_; }
  // Makes `window` reachable under a new random key (kUcxSessionKeyBytes bytes), returned.
  std::string Open(std::shared_ptr<ArenaWindow> window) EXCLUDES(mu_);
  // The session of `key` ended: its window is shut and forgotten, and the endpoints that
  // carried its messages are closed.
  void Close(const std::string& key) EXCLUDES(mu_);

  // "UCX 1.13.1 (tcp, posix, ...) on 127.0.0.1:PORT (lo)", for the start line.
  std::string Describe() const;
  // Whether UCX found a transport over RDMA hardware here (otherwise only software ones).
  bool has_rdma() const;
  size_t sessions() const EXCLUDES(mu_);

 private:
  UcxService() = default;
  std::shared_ptr<ArenaWindow> Find(std::string_view key) const EXCLUDES(mu_);
  // The window a message's key names, admitted for the endpoint it came through; why not.
  Result<std::shared_ptr<ArenaWindow>> Admit(std::string_view key, ucx::EndpointId from) const;
  void OnPut(ucx::Worker::Guard& held, const ucx::Worker::Message& message);
  void OnGet(ucx::Worker::Guard& held, const ucx::Worker::Message& message);
  void Answer(ucx::Worker::Guard& held, ucx::EndpointId to, protocol::UcxMessage kind,
              uint64_t token, const Status& outcome);

  std::unique_ptr<UcxRuntime> runtime_;
  std::unique_ptr<ucx::Worker> worker_;
  std::string host_;
  std::string interfaces_;  // UCX_NET_DEVICES' value; empty: every interface
  uint16_t port_ = 0;
  mutable Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<ArenaWindow>> windows_ GUARDED_BY(mu_);
};

}  // namespace kvport::server
