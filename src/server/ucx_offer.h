// SPDX-License-Identifier: Apache-2.0
// UcxOffer: what a node with UCX (ServerOptions::ucx) offers TCP sessions: its UCX worker, the
// arena and the lease words registered for one-sided access, and the keys and ranges that
// UCX_ATTACH hands out (docs/protocol.md, "Version 8"; docs/transports.md, "UCX"). The worker is
// progressed on one I/O thread's event loop: clients' reads and writes over transports without
// hardware RMA (UCX's tcp, its shared memory) need the node's worker to take part.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "device/ucx_rma.h"
#include "kvport/status.h"
#include "kvport/ucx.h"
#include "net/event_loop.h"

namespace kvport::server {

class UcxOffer final : public net::EventHandler {
 public:
  // Opens UCX (`library`: ServerOptions::ucx_library; "" searches libucp.so.0), makes the worker
  // and registers [arena, arena + arena_bytes) and [words, words + words_bytes). NotSupported
  // naming why when UCX is not usable here; Unavailable when UCX refuses.
  static Result<std::unique_ptr<UcxOffer>> Create(std::string_view library, uint8_t* arena,
                                                  uint64_t arena_bytes, const void* words,
                                                  uint64_t words_bytes);
  ~UcxOffer() override;

  // Progresses the worker on `loop`, sleeping on its event fd between events. Call before the
  // loop runs; the offer must outlive the loop.
  Status Watch(net::EventLoop* loop);
  void OnEvents(uint32_t events) override;

  const std::string& worker_address() const { return worker_->address(); }
  const ucx::LocalRegion& arena() const { return *arena_; }
  const ucx::LocalRegion& lease_words() const { return *words_; }
  // "UCX 1.13.1 (tcp, posix, ...)", for the start line.
  std::string Describe() const;

 private:
  UcxOffer() = default;

  std::unique_ptr<UcxRuntime> runtime_;
  std::unique_ptr<ucx::Worker> worker_;
  std::unique_ptr<ucx::LocalRegion> arena_;
  std::unique_ptr<ucx::LocalRegion> words_;
};

}  // namespace kvport::server
