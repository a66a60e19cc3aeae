// SPDX-License-Identifier: Apache-2.0
// Connection::Frame: the response being read, kept between reads so that the reader role can
// change hands in the middle of it; and the node's ERROR as a Status.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "client/connection.h"
#include "kvport/status.h"
#include "protocol/frame.h"
#include "protocol/limits.h"

namespace kvport::client {

// An ERROR response: code, u16 message length, at most 1024 message bytes.
inline constexpr uint32_t kMaxErrorDescriptorBytes = 1 + 2 + 1024;

// The response being read, kept between reads so that the reader role can change hands in the
// middle of it: a caller whose deadline passes returns at once and the next holder goes on.
struct Connection::Frame {
  enum class Phase { kHeader, kDescriptor, kErrorDescriptor, kPayload };

  // Back to waiting for the next response's header.
  void Reset() {
    phase = Phase::kHeader;
    call = nullptr;
    until = kNoDeadline;
    result = Status::Ok();
    to_caller = false;
    drain = false;
    abandoned = false;
    Expect(head, sizeof(head));
  }
  // The next bytes go to [at, at + n) (a null `at` discards them).
  void Expect(void* at, size_t n) {
    iov.assign(1, iovec{at, n});
    next = 0;
    left = n;
  }
  // Whether any byte of this response has been read.
  bool open() const { return phase != Phase::kHeader || left != sizeof(head); }

  Phase phase = Phase::kHeader;
  char head[protocol::kFrameHeaderSize];
  protocol::FrameHeader header;
  Ticket call;                   // the call it answers; null when nobody waits for it
  Deadline until = kNoDeadline;  // past this, the node stalled: the connection closes
  // The bytes awaited now: iov[next..], `left` of them; a null base discards.
  std::vector<iovec> iov;
  std::vector<iovec> handler_iov;  // where a handler places a payload, before it becomes iov
  size_t next = 0;
  uint64_t left = 0;
  bool to_caller = false;  // iov are the call's buffers: read under io_mu, checking abandoned
  bool drain = false;      // the bytes awaited are discarded: counted in drained_ at the end
  bool abandoned = false;  // the call gave up in the middle of it
  Status result;           // the handler's verdict, the call's result once the payload is in
  DescriptorBytes descriptor;
  char error[1 + 2 + 1024];  // an ERROR's descriptor, at most kMaxErrorDescriptorBytes
  char sink[16 * 1024];      // where discarded bytes go
};

// The node's ERROR response as a Status.
Status NodeError(const protocol::FrameHeader& header, std::string_view descriptor,
                 const protocol::Limits& limits, std::string_view peer);

}  // namespace kvport::client
