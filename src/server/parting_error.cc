// SPDX-License-Identifier: Apache-2.0
#include "server/parting_error.h"

#include <sys/socket.h>

#include "net/socket.h"
#include "protocol/messages.h"

namespace kvport::server {

std::string ErrorFrameBytes(const Status& status) {
  protocol::ErrorResponse error;
  error.code = status.code();
  error.message = status.message();
  protocol::EncodedFrame frame;
  if (!protocol::EncodeResponse(0, error, protocol::Limits{}, &frame).ok()) return {};
  return std::move(frame.head);
}

void SendPartingError(net::Stream& stream, const Status& status) {
  const std::string frame = ErrorFrameBytes(status);
  if (!frame.empty()) SendPartingBytes(stream, frame);
}

void SendPartingBytes(net::Stream& stream, std::string_view bytes) {
  if (stream.tls() != nullptr && !stream.tls()->handshake_done()) return;
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  (void)stream.WriteV(&iov, 1);
  stream.ShutdownWrite();
  char scratch[1024];
  iovec in{scratch, sizeof(scratch)};
  (void)stream.ReadV(&in, 1);
}

DiscardedInput DiscardLingeringInput(net::Stream& stream) {
  DiscardedInput dropped;
  char scratch[4096];
  for (int i = 0; i < 64; ++i) {
    iovec iov{scratch, sizeof(scratch)};
    Result<net::IoProgress> r = stream.ReadV(&iov, 1);
    if (!r.ok() || r->eof) {
      dropped.open = false;
      break;
    }
    dropped.bytes += r->bytes;
    if (r->would_block) break;
  }
  return dropped;
}

}  // namespace kvport::server
