// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of fuzz_session (session_inputs.h), one file per input: fuzz_session_seeds
// DIR (DIR must exist).
#include <cstdio>
#include <fstream>
#include <string>

#include "session_inputs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& seed : kvport::fuzz::SeedInputs()) {
    const std::string path = std::string(argv[1]) + "/" + seed.name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(seed.bytes.data(), static_cast<std::streamsize>(seed.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
