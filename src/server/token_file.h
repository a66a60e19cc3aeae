// SPDX-License-Identifier: Apache-2.0
// The token file a node's tokens_file names (docs/security.md, "Token file"):
//
//   tokens:
//     - name: lmcache-prefill        # unique; appears in logs, never the secret
//       secret: "7Gf1...24 random bytes, base64"
//       cert_names: ["prefill-0"]    # client certificates holding this grant (mutual TLS)
//       read: ["lmcache/*", ""]      # namespace patterns: a name, "prefix*", or "*"
//       write: ["lmcache/*"]
//       admin: false                 # STATS of every namespace, LIST of any
//
// yaml-cpp stays inside token_file.cc.
#pragma once

#include <string>
#include <vector>

#include "kvport/server.h"
#include "kvport/status.h"

namespace kvport::server {

// Largest token file read.
inline constexpr uint64_t kMaxTokenFileBytes = uint64_t{1} << 20;

// Reads and validates (ValidateTokens) the tokens of `path`. Refuses a file other users may
// read or write (its mode grants "other" anything): the secrets would not be secret.
// InvalidArgument naming the file, the entry and what is wrong; NotFound; IoError.
Result<std::vector<AccessToken>> LoadTokenFile(const std::string& path);

// The tokens of a token file's text (`origin` names it in errors).
Result<std::vector<AccessToken>> ParseTokens(const std::string& text, const std::string& origin);

}  // namespace kvport::server
