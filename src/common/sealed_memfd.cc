// SPDX-License-Identifier: Apache-2.0
#include "common/sealed_memfd.h"

#include <fcntl.h>

#include <cerrno>
#include <string>

namespace kvport {

Status SealMemfdSize(int fd, const char* what) {
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Status::FromErrno(std::string(what) +
                                 ": sealing the memfd's size (fcntl F_ADD_SEALS "
                                 "F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL)",
                             errno);
  }
  return Status::Ok();
}

}  // namespace kvport
