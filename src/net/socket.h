// SPDX-License-Identifier: Apache-2.0
// Socket: an owned file descriptor for a socket, plus the few socket options kvport sets.
//
// Every socket kvport creates is non-blocking and close-on-exec; a Socket closes its descriptor
// when destroyed. Functions here wrap one system call each and turn errno into a Status.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <string>

#include "kvport/status.h"

namespace kvport::net {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { Close(); }
  Socket(Socket&& other) noexcept : fd_(other.Release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Gives up ownership: returns the descriptor and leaves this Socket invalid.
  int Release();
  void Close();

 private:
  int fd_ = -1;
};

// What one non-blocking read or write achieved. `bytes` is what moved; `would_block` means the
// kernel had nothing more (read) or no more room (write) right now; `eof` means the peer closed
// its sending side (reads only) and nothing more will ever arrive.
struct IoProgress {
  size_t bytes = 0;
  bool would_block = false;
  bool eof = false;
};

// readv() on a non-blocking socket, retried on EINTR. An error other than EAGAIN is an IoError
// (ECONNRESET included: the caller treats any error as "connection gone").
Result<IoProgress> ReadV(int fd, const iovec* iov, int count);
// What a read would find now, reading nothing: `bytes` queued in the socket (FIONREAD); when
// none, `eof` if the peer closed, else `would_block`.
Result<IoProgress> Readable(int fd);
// writev() (sendmsg with MSG_NOSIGNAL, so a closed peer is an error, never SIGPIPE).
Result<IoProgress> WriteV(int fd, const iovec* iov, int count);

Status SetNonBlocking(int fd);
Status SetNoDelay(int fd);
// SO_RCVLOWAT: the socket reads as readable (poll, epoll) once this many bytes are queued.
Status SetReceiveLowWater(int fd, int bytes);
// TCP_NOTSENT_LOWAT: a write takes bytes (and poll, epoll report writable) only while fewer
// than this many written bytes wait unsent, held back by the peer's receive window.
Status SetNotSentLowWater(int fd, int bytes);
// SO_SNDBUF / SO_RCVBUF. The kernel may round (Linux doubles the value); tests use tiny buffers
// to force partial writes.
Status SetSendBufferSize(int fd, int bytes);
Status SetReceiveBufferSize(int fd, int bytes);

// The most descriptors WriteVWithDescriptors passes at once.
inline constexpr size_t kMaxPassedDescriptors = 4;
// writev() that attaches `pass_fds` (1..kMaxPassedDescriptors of them, in order) to the first
// byte sent (SCM_RIGHTS; Unix sockets only): the receiver gets its own descriptors of the same
// open files with that byte. When the result moved 0 bytes (would_block), nothing was passed and
// the call must be repeated.
Result<IoProgress> WriteVWithDescriptors(int fd, const iovec* iov, int count,
                                         std::span<const int> pass_fds);

// accept4() of one pending connection as a non-blocking, close-on-exec socket; an invalid Socket
// when none is pending. `where` names the listener in errors.
Result<Socket> AcceptConnection(int listen_fd, const std::string& where);

// The process on the other end of a Unix socket, as the kernel recorded it at connect
// (SO_PEERCRED): it cannot be forged by the peer.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
Result<PeerCredentials> PeerCredentialsOf(int fd);

// "host:port" of the peer of a connected socket, for logs ("unix:pid=N,uid=U" for a Unix
// socket); "?" if unknown.
std::string PeerName(int fd);
// Who the peer is, for counting connections per peer: its IP address without the port
// ("192.0.2.7", "::1"), or "unix:uid=U" for a Unix socket; "?" if unknown.
std::string PeerAddress(int fd);

}  // namespace kvport::net
