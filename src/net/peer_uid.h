// SPDX-License-Identifier: Apache-2.0
// The uid of the process at the other end of a TCP connection over loopback: what SO_PEERCRED
// says for a Unix socket, found for TCP in the kernel's socket table (/proc/net/tcp, tcp6),
// where the peer's socket is listed with its owner. Only loopback peers are on this host.
#pragma once

#include <sys/types.h>

#include "kvport/status.h"

namespace kvport::net {

// The uid owning the peer socket of TCP socket `fd`. NotSupported when the peer is not on a
// loopback address; NotFound when the table does not list it (it closed meanwhile).
Result<uid_t> LoopbackPeerUid(int fd);

}  // namespace kvport::net
