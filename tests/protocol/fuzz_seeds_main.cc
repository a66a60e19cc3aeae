// SPDX-License-Identifier: Apache-2.0
// Writes the sample frames (one file per frame) into a directory: the seed corpus of
// fuzz_frame. Usage: protocol_fuzz_seeds DIR (DIR must exist).
#include <cstdio>
#include <fstream>
#include <string>

#include "frame_samples.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& sample : kvport::protocol::testing::SampleFrames()) {
    const std::string path = std::string(argv[1]) + "/" + sample.name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(sample.bytes.data(), static_cast<std::streamsize>(sample.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
