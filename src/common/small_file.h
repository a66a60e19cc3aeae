// SPDX-License-Identifier: Apache-2.0
// Reading a small file that someone else wrote (a config file, a token file) without trusting
// what is at the path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport {

// The whole text of the regular file at `path`, at most `max_bytes`. The path is checked with
// stat() before it is opened, so a FIFO or a device is never opened at all; the open is
// O_NONBLOCK and the opened file is checked again with fstat(), so a path swapped for a FIFO in
// between cannot block the read either; and the read stops past the cap, so a file that grows
// meanwhile cannot make it read without bound. `what` names the file in errors ("config
// file"). Errors: NotFound (no such file), InvalidArgument (not a regular file, too large),
// IoError (cannot be read); each names the file.
// `*mode`, when not null, gets the file's permission bits.
Result<std::string> ReadSmallRegularFile(const std::string& path, uint64_t max_bytes,
                                         std::string_view what, uint32_t* mode = nullptr);

// Refuses a file that holds secrets (a token file, a private key) whose permission bits `mode`
// let in someone the secret is not for: `refused` are the bits that must be clear (0007: other
// users; 0077: the file's group as well). Checked on the file read (ReadSmallRegularFile's
// `*mode`), so a symbolic link is judged by what it points to. InvalidArgument naming the file,
// its mode and the fix (chmod 600).
Status CheckSecretFileMode(const std::string& path, uint32_t mode, uint32_t refused,
                           std::string_view what);

}  // namespace kvport
