// SPDX-License-Identifier: Apache-2.0
#include "server/parting_error.h"

#include <sys/socket.h>

#include "net/socket.h"
#include "protocol/messages.h"

namespace kvport::server {

void SendPartingError(int fd, const Status& status) {
  protocol::ErrorResponse error;
  error.code = status.code();
  error.message = status.message();
  protocol::EncodedFrame frame;
  if (!protocol::EncodeResponse(0, error, protocol::Limits{}, &frame).ok()) return;
  iovec iov{frame.head.data(), frame.head.size()};
  (void)net::WriteV(fd, &iov, 1);
  ::shutdown(fd, SHUT_WR);
  char scratch[1024];
  iovec in{scratch, sizeof(scratch)};
  (void)net::ReadV(fd, &in, 1);
}

}  // namespace kvport::server
