// SPDX-License-Identifier: Apache-2.0
// SocketWatcher: the one thread per process that reads the connections nobody else reads.
//
// A Connection's responses are read by the caller waiting for one (docs/client.md, "Threads").
// Between calls somebody must still watch the socket: a late response to drain, a half-read
// response to finish, an answer nobody waits for (ARENA_RELEASE), the node going away. That used
// to be a thread per connection, hundreds of them in a process with a few workers each holding
// connections to a 32-node cluster. Now every connection of the process registers with one
// watcher: an epoll thread that calls a connection back (Watched::OnWatch) when its socket is
// readable or a time it asked for has come. A callback must not block: it reads what the socket
// holds and asks to be called again (Watch).
//
// A registration is one-shot, like EPOLLONESHOT: each Watch asks for one callback, on the first
// of "the socket is readable" (when `readable`) and `at`; afterwards nothing is asked until the
// next Watch, which replaces the request (the earlier of the two times stands only when asked
// again). A callback may come without its condition (a readable socket somebody else drained
// meanwhile): it must check its state and may do nothing.
//
// One watcher per process (Shared): every client of the process shares it, and it lives while
// any connection does. A child process after fork() gets a watcher of its own, even when the
// fork came while another thread was getting one.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "client/socket_io.h"
#include "kvport/status.h"
#include "net/socket.h"

namespace kvport::client {

class SocketWatcher {
 public:
  class Watched {
   public:
    // Runs on the watcher's thread, never for two registrations at once.
    virtual void OnWatch() = 0;

   protected:
    virtual ~Watched() = default;
  };

  // The process's watcher, started on first use (and again in a forked child). Unavailable
  // when the thread's epoll or eventfd cannot be made.
  static Result<std::shared_ptr<SocketWatcher>> Shared();
  // Tests: runs `hook` inside Shared(), under its lock, before it looks for a watcher (null:
  // none).
  static void SetCreateHookForTesting(std::function<void()> hook);

  ~SocketWatcher();  // stops and joins the thread: every registration is removed by then
  SocketWatcher(const SocketWatcher&) = delete;
  SocketWatcher& operator=(const SocketWatcher&) = delete;

  // Registers `watched` with the socket `fd`, asking for nothing yet. `fd` must stay open until
  // Remove returns.
  Status Add(Watched* watched, int fd);
  // Asks for one callback: when the socket is readable (if `readable`) or at `at`, whichever
  // comes first (kNoDeadline: no time). Any thread, any lock of the watched object's held: it
  // takes only the watcher's own lock, and makes a system call only to arm the socket or to wake
  // the thread for a time earlier than the one it sleeps toward.
  void Watch(Watched* watched, bool readable, Deadline at);
  // Unregisters `watched`: once it returns, no callback for it runs or will run. Must not be
  // called from its own callback, nor holding a lock the callback takes.
  void Remove(Watched* watched);

  // Registrations: for tests and diagnostics.
  size_t watched() const;

 private:
  SocketWatcher(net::Socket epoll, net::Socket wake);
  void Run();
  void Wake();

  struct Entry {
    int fd = -1;
    bool armed = false;         // the socket is in epoll's interest list, not yet reported
    Deadline at = kNoDeadline;  // a callback is asked for at this time
  };

  const net::Socket epoll_;
  const net::Socket wake_;  // an eventfd in epoll: a Watch for an earlier time, or the stop

  mutable std::mutex mu_;
  // A callback ended (Remove waits for its own), or the thread started (Shared waits for it).
  std::condition_variable visited_;
  std::unordered_map<Watched*, Entry> entries_;
  Watched* visiting_ = nullptr;            // whose callback runs now
  Deadline sleeping_until_ = kNoDeadline;  // the time the thread's epoll_wait ends at
  bool running_ = false;                   // the thread has entered Run
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvport::client
