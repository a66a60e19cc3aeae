// SPDX-License-Identifier: Apache-2.0
// How a connection ends: SendPartingError, the last words to a connection the node is about to
// close before it has said anything else on it (a refused connection, one closed before HELLO);
// DiscardLingeringInput, the reads of a connection half-closed after its last answer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kvport/status.h"
#include "net/stream.h"

namespace kvport::server {

// One ERROR frame of the kvport protocol (request id 0) carrying `status`.
std::string ErrorFrameBytes(const Status& status);

// Writes one ERROR frame (request id 0) carrying `status` and half-closes `stream`, best
// effort: the few bytes fit a socket that has sent nothing yet, so nothing waits on them. Unread
// input is read first, so that the caller's close is not a reset that could destroy the ERROR
// before the peer reads it. The caller then closes the stream. A TLS stream whose handshake is
// not complete gets nothing (there is no channel to say it on).
void SendPartingError(net::Stream& stream, const Status& status);
// The same with bytes of the caller's protocol (a RESP error line).
void SendPartingBytes(net::Stream& stream, std::string_view bytes);

// What one DiscardLingeringInput call did: the bytes dropped, and whether the peer's side is
// still open (false: it closed, or the read failed, and the caller closes).
struct DiscardedInput {
  bool open = true;
  size_t bytes = 0;
};
// One readiness event of a connection that half-closed after its last answer and waits for the
// peer to close: reads and drops what the peer still sends, at most 256 KiB (so one peer does
// not hold the loop).
DiscardedInput DiscardLingeringInput(net::Stream& stream);

}  // namespace kvport::server
