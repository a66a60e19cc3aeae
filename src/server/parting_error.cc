// SPDX-License-Identifier: Apache-2.0
#include "server/parting_error.h"

#include <sys/socket.h>

#include "net/socket.h"
#include "protocol/messages.h"

namespace kvport::server {

void SendPartingError(net::Stream& stream, const Status& status) {
  if (stream.tls() != nullptr && !stream.tls()->handshake_done()) return;
  protocol::ErrorResponse error;
  error.code = status.code();
  error.message = status.message();
  protocol::EncodedFrame frame;
  if (!protocol::EncodeResponse(0, error, protocol::Limits{}, &frame).ok()) return;
  SendPartingBytes(stream, frame.head);
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

bool DiscardLingeringInput(net::Stream& stream) {
  char scratch[4096];
  for (int i = 0; i < 64; ++i) {
    iovec iov{scratch, sizeof(scratch)};
    Result<net::IoProgress> r = stream.ReadV(&iov, 1);
    if (!r.ok() || r->eof) return false;
    if (r->would_block) return true;
  }
  return true;
}

}  // namespace kvport::server
