// SPDX-License-Identifier: Apache-2.0
// Sealing the size of a memfd that a node hands to same-host clients (its arena, its lease
// words).
//
// A client that receives such a descriptor (SHM_ATTACH) holds the same open file as the node,
// so it could ftruncate() it. Shrunk, every page past the new end faults (SIGBUS) the next time
// the node touches it: one client's mistake or malice would kill the whole cache. Grown, the
// file would charge the node's memory for the client. With F_SEAL_SHRINK and F_SEAL_GROW both
// fail with EPERM, for every holder of the file, the node included. F_SEAL_SEAL then keeps a
// client from adding seals of its own (F_SEAL_FUTURE_WRITE would stop the other clients from
// mapping the arena writable, and so from filling their reservations).
//
// Sealing needs the memfd to be created with MFD_ALLOW_SEALING (kMemfdSealable) and sized first.
#pragma once

#include <sys/mman.h>

#include "kvport/status.h"

namespace kvport {

// memfd_create flags for a memfd SealMemfdSize will seal.
inline constexpr unsigned kMemfdSealable = MFD_CLOEXEC | MFD_ALLOW_SEALING;

// Adds F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL to `fd`, a memfd created with kMemfdSealable and
// already at its final size. IoError naming `what`, the seals and errno when the kernel refuses
// (a memfd without MFD_ALLOW_SEALING, a file system without seals, a seccomp policy).
Status SealMemfdSize(int fd, const char* what);

}  // namespace kvport
