// SPDX-License-Identifier: Apache-2.0
#include "session_driver.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "kvport/log.h"
#include "kvport/ucx.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "session_inputs.h"

namespace kvport::fuzz {
namespace {

// Chunk boundaries synchronised with the node per input; the rest goes in one write. Bounds the
// cost of an input (each boundary is two round trips) without bounding its length.
constexpr int kMaxBarriers = 128;
// How long the node may make no progress (not read what is written, not close after the end of
// the stream) before that is reported: a bound so that a stuck node fails the run instead of
// hanging it, never a timing assertion.
constexpr int kStuckMs = 20'000;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Status Errno(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

Result<int> ConnectTo(const Server& server, bool unix_socket) {
  int fd = -1;
  if (unix_socket) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Errno("socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = server.unix_socket_path();
    std::memcpy(addr.sun_path, path.c_str(), std::min(path.size(), sizeof(addr.sun_path) - 1));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Status s = Errno("connect " + path);
      ::close(fd);
      return s;
    }
  } else {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Errno("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server.port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Status s = Errno("connect");
      ::close(fd);
      return s;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Reads and drops what the node has sent; false once it has closed the connection. (Descriptors
// an SHM_ATTACH answer carries are closed by the kernel: no control buffer is given.)
bool Drain(int fd) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

// Writes all of `bytes`, reading responses meanwhile. OK with *closed set when the node closed
// the connection first (after a malformed frame, say).
Status WriteAll(int fd, std::string_view bytes, bool* closed) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *closed = true;  // EPIPE, ECONNRESET: the node closed
      return Status::Ok();
    }
    pollfd p{fd, POLLIN | POLLOUT, 0};
    int ready = ::poll(&p, 1, kStuckMs);
    if (ready == 0) {
      return Status::Internal("the node neither read the input nor answered for " +
                              std::to_string(kStuckMs) + " ms");
    }
    if (ready > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !Drain(fd)) {
      *closed = true;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// What the input asked to be stored, key by key.
struct Written {
  std::vector<std::pair<std::string, std::string>> whole;  // (value, meta) of whole MSET frames
  bool any_bytes = false;  // an ARENA_RESERVE named it: its bytes are the client's to write
};
using Key = std::pair<std::string, std::string>;  // (namespace, key)

// The requests of `stream` as the node decodes them (same codec, same limits), up to the first
// that does not decode or is cut short.
std::map<Key, Written> KeysWritten(std::string_view stream) {
  const protocol::Limits limits = FuzzLimits();
  std::map<Key, Written> keys;
  size_t pos = 0;
  for (;;) {
    protocol::FrameHeader h;
    if (!protocol::DecodeFrameHeader(stream.substr(pos), limits, &h).ok()) break;
    if (stream.size() - pos < h.head_length()) break;
    std::string_view descriptor =
        stream.substr(pos + protocol::kFrameHeaderSize, h.descriptor_length);
    protocol::AnyRequest request;
    if (!protocol::DecodeAnyRequest(h, descriptor, limits, &request).ok()) break;
    pos += h.head_length();
    if (const auto* mset = std::get_if<protocol::MsetRequest>(&request)) {
      const bool whole = stream.size() - pos >= h.payload_length;
      uint64_t offset = 0;
      for (const protocol::MsetItem& item : mset->items) {
        Written& w = keys[{std::string(mset->ns), std::string(item.key)}];
        if (whole) {
          w.whole.emplace_back(std::string(stream.substr(pos + offset, item.value_length)),
                               std::string(item.meta));
        }
        offset += item.value_length;
      }
      if (!whole) break;
      pos += h.payload_length;
    } else if (const auto* reserve = std::get_if<protocol::ArenaReserveRequest>(&request)) {
      for (const protocol::MsetItem& item : reserve->items)
        keys[{std::string(reserve->ns), std::string(item.key)}].any_bytes = true;
    }
  }
  return keys;
}

}  // namespace

Result<std::unique_ptr<SessionDriver>> SessionDriver::Start() {
  // Every malformed input makes the node log a warning: thousands a second under the fuzzer.
  log::SetLevel(log::Level::kError);
  std::unique_ptr<SessionDriver> d(new SessionDriver());
  std::string dir = (std::filesystem::temp_directory_path() / "kvport-fuzz-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return Errno("mkdtemp");
  d->dir_ = dir;

  const protocol::Limits limits = FuzzLimits();
  ServerOptions options;  // 127.0.0.1, an ephemeral port
  options.unix_socket = dir + "/node.sock";
  options.capacity_bytes = 1 << 20;  // small: eviction is reached
  options.threads = 1;               // the barrier relies on one loop serving every connection
  options.max_key_bytes = limits.max_key_bytes;
  options.max_namespace_bytes = limits.max_namespace_bytes;
  options.max_meta_bytes = limits.max_meta_bytes;
  options.max_value_bytes = limits.max_value_bytes;
  options.max_batch_keys = limits.max_batch_keys;
  options.max_frame_bytes = limits.max_frame_bytes;
  options.max_connection_outstanding_bytes = 16 << 10;  // backpressure is reached
  options.idle_timeout = std::chrono::milliseconds(0);
  options.ttl_sweep_interval = std::chrono::milliseconds(0);
  options.shutdown_grace = std::chrono::milliseconds(100);
  // UCX_ATTACH and the requests it opens to a TCP session, where this host has a usable UCX.
  options.ucx = ProcessUcxRuntime().usable();
  KVPORT_ASSIGN_OR_RETURN(d->server_, Server::Start(options));
  KVPORT_ASSIGN_OR_RETURN(testing::TestClient sync,
                          testing::TestClient::Connect(d->server_->port()));
  d->sync_.emplace(std::move(sync));
  return d;
}

SessionDriver::~SessionDriver() {
  sync_.reset();
  if (server_ != nullptr) server_->Stop();
  server_.reset();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

Status SessionDriver::Barrier() {
  for (int i = 0; i < 2; ++i) {
    Status s = sync_->Ping();
    if (!s.ok()) return s.WithContext("the node stopped serving another connection");
  }
  return Status::Ok();
}

Status SessionDriver::Run(std::string_view input) {
  if (input.empty()) return Status::Ok();
  const auto control = static_cast<uint8_t>(input[0]);
  const uint8_t feed = control & 3;
  const bool unix_socket = (control & kUnixSocket) != 0;
  const bool hello = (control & kNoHello) != kNoHello;
  const std::string stream = (hello ? HelloFrame() : std::string()) + std::string(input.substr(1));

  KVPORT_ASSIGN_OR_RETURN(int raw, ConnectTo(*server_, unix_socket));
  Fd fd(raw);
  // xorshift32 seeded by the input: the same input is always cut the same way.
  uint32_t rng = 0x9e3779b9u ^ (control * 0x01000193u) ^ static_cast<uint32_t>(input.size());
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
  };
  size_t pos = 0;
  int barriers = 0;
  bool closed = false;
  while (pos < stream.size() && !closed) {
    size_t len = stream.size() - pos;
    if (barriers < kMaxBarriers) {
      if (feed == kFeedByteByByte) len = 1;
      if (feed == kFeedSmallChunks) len = 1 + next() % 8;
      if (feed == kFeedChunks) len = 1 + next() % 64;
    }
    len = std::min(len, stream.size() - pos);
    KVPORT_RETURN_IF_ERROR(WriteAll(fd.get(), std::string_view(stream).substr(pos, len), &closed));
    pos += len;
    if (feed != kFeedAtOnce && barriers < kMaxBarriers && pos < stream.size()) {
      KVPORT_RETURN_IF_ERROR(Barrier());
      ++barriers;
    }
    if (!Drain(fd.get())) closed = true;
  }

  // End of the stream: the node must close the connection (whatever state it was in).
  ::shutdown(fd.get(), SHUT_WR);
  while (!closed) {
    pollfd p{fd.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, kStuckMs);
    if (ready == 0) {
      return Status::Internal("the node did not close the connection within " +
                              std::to_string(kStuckMs) + " ms of the client's end of stream");
    }
    if (ready > 0 && !Drain(fd.get())) closed = true;
  }
  return Check(stream);
}

Status SessionDriver::Check(const std::string& stream) {
  // A fresh, well-formed client.
  KVPORT_ASSIGN_OR_RETURN(testing::TestClient client,
                          testing::TestClient::Connect(server_->port()));
  const std::map<Key, Written> keys = KeysWritten(stream);
  std::map<std::string, std::vector<std::string>> by_namespace;
  for (const auto& [key, written] : keys)
    by_namespace[key.first].push_back(key.second);

  const size_t batch = FuzzLimits().max_batch_keys;
  for (const auto& [ns, names] : by_namespace) {
    for (size_t i = 0; i < names.size(); i += batch) {
      std::vector<std::string> part(
          names.begin() + static_cast<ptrdiff_t>(i),
          names.begin() + static_cast<ptrdiff_t>(std::min(i + batch, names.size())));
      KVPORT_ASSIGN_OR_RETURN(std::vector<testing::GetItem> got, client.Mget(ns, part));
      for (size_t k = 0; k < part.size(); ++k) {
        if (got[k].status != StatusCode::kOk) continue;  // absent: evicted, deleted, never stored
        const Written& w = keys.at({ns, part[k]});
        if (w.any_bytes) continue;
        const std::pair<std::string, std::string> found{got[k].value, got[k].meta};
        if (std::find(w.whole.begin(), w.whole.end(), found) != w.whole.end()) continue;
        return Status::Internal(
            "key '" + part[k] + "' in namespace '" + ns + "' holds " +
            std::to_string(got[k].value.size()) + " bytes that " +
            (w.whole.empty() ? "no MSET of the input delivered whole (half-written data visible)"
                             : "match no MSET of it that arrived whole"));
      }
      KVPORT_ASSIGN_OR_RETURN(std::vector<StatusCode> deleted, client.Mdel(ns, part));
      (void)deleted;
    }
  }

  // A value stored now reads back.
  const std::string value = "probe-" + std::to_string(stream.size());
  KVPORT_ASSIGN_OR_RETURN(std::vector<StatusCode> set,
                          client.Mset("fuzz-probe", {{"probe", value, "meta"}}));
  if (set.size() != 1 || set[0] != StatusCode::kOk) {
    return Status::Internal(
        "a fresh client's MSET was not stored: " +
        std::string(StatusCodeName(set.empty() ? StatusCode::kInternal : set[0])));
  }
  KVPORT_ASSIGN_OR_RETURN(std::vector<testing::GetItem> probe,
                          client.Mget("fuzz-probe", {"probe"}));
  if (probe.size() != 1 || probe[0].status != StatusCode::kOk || probe[0].value != value) {
    return Status::Internal("a fresh client's MGET did not read back what it stored");
  }
  KVPORT_ASSIGN_OR_RETURN(std::vector<StatusCode> deleted, client.Mdel("fuzz-probe", {"probe"}));
  (void)deleted;
  // Answered in order, so every earlier response has left and released its pins.
  KVPORT_RETURN_IF_ERROR(client.Ping());

  const ServerStats stats = server_->Stats();
  for (const char* counter : {"reserved_bytes", "pinned_bytes", "leased_bytes"}) {
    if (stats.Get(counter) != 0) {
      return Status::Internal(std::string(counter) + " is " + std::to_string(stats.Get(counter)) +
                              " after the fuzzed connection closed (something it held is left)");
    }
  }
  return Status::Ok();
}

}  // namespace kvport::fuzz
