// SPDX-License-Identifier: Apache-2.0
// CallGate: lets Python threads call into an object (a client, a node) that another thread may
// close at any moment, without a call ever running on a destroyed object.
//
// A call enters the gate (TryEnter) before it touches the object and holds its Pass until it
// returns; Close() shuts the gate to new calls, waits until every call inside has left, and only
// then runs the destruction. So close()/stop() during a call waits for that call (each is bounded
// by its own deadline), and a call after it (or one that arrives while it waits) is refused.
// Close() must be called without the GIL: the calls it waits for may need it to leave.
//
// Atomics only, no mutex: a child forked while another thread of the parent was inside cannot
// find the gate locked. That thread does not exist in the child, so there Close() does not wait
// for the calls the parent had in flight (the kvport client abandons its state in a forked child
// anyway; docs/client.md "Fork").
#pragma once

#include <unistd.h>

#include <atomic>
#include <optional>
#include <utility>

namespace kvport::python {

class CallGate {
 public:
  class Pass {
   public:
    Pass(Pass&& other) noexcept : gate_(std::exchange(other.gate_, nullptr)) {}
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    Pass& operator=(Pass&&) = delete;
    ~Pass() {
      if (gate_ != nullptr) gate_->Leave();
    }

   private:
    friend class CallGate;
    explicit Pass(CallGate* gate) : gate_(gate) {}
    CallGate* gate_;
  };

  // A Pass while the gate is open; nullopt once Close() began.
  std::optional<Pass> TryEnter() {
    in_flight_.fetch_add(1);  // seq_cst with Close()'s store: either sees the other
    if (closing_.load()) {
      Leave();
      return std::nullopt;
    }
    return Pass(this);
  }

  bool open() const { return !closing_.load(); }

  // Shuts the gate, waits for the calls inside, then runs `destroy` (once, whoever closes
  // first); a concurrent Close() returns after that destruction finished. Without the GIL.
  template <typename Destroy>
  void Close(Destroy&& destroy) {
    if (closing_.exchange(true)) {
      if (Forked()) return;  // the closing thread was the parent's
      for (bool done = closed_.load(); !done; done = closed_.load())
        closed_.wait(false);
      return;
    }
    if (!Forked()) {
      for (int n = in_flight_.load(); n != 0; n = in_flight_.load())
        in_flight_.wait(n);
    }
    std::forward<Destroy>(destroy)();
    closed_.store(true);
    closed_.notify_all();
  }

 private:
  void Leave() {
    if (in_flight_.fetch_sub(1) == 1 && closing_.load()) in_flight_.notify_all();
  }

  // In a child forked after construction (a system call: Close() only).
  bool Forked() const { return ::getpid() != pid_; }

  std::atomic<int> in_flight_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> closed_{false};
  const pid_t pid_ = ::getpid();
};

}  // namespace kvport::python
