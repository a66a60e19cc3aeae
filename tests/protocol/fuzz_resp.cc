// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the RESP command parser (protocol/resp.h).
//
// Every input is parsed as a stream of commands, with the node's default limits and with tiny
// ones (so that every limit check is reached by short inputs). A parse may fail, but only with
// an error message; what it returns must hold: a complete command consumed at least one byte
// and no more than the input, its arguments lie inside what it consumed, an incomplete one
// names a size larger than the input, every shorter prefix of a complete array command is
// incomplete, and its arguments encoded again parse back to the same arguments.
//
// Build (clang only): cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang
//   -DCMAKE_CXX_COMPILER=clang++ -DKVPORT_FUZZ=ON && ninja -C build-fuzz fuzz_resp; seeds:
//   tests/protocol/resp_seeds/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/resp.h"

namespace {

using kvport::protocol::ParseRespCommand;
using kvport::protocol::RespLimits;
using kvport::protocol::RespParse;

[[noreturn]] void Die(const char* what, const char* which) {
  std::fprintf(stderr, "[%s limits] %s\n", which, what);
  std::abort();
}

std::string Encode(const std::vector<std::string_view>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out.append(a);
    out += "\r\n";
  }
  return out;
}

void Check(std::string_view input, const RespLimits& limits, const char* which) {
  std::vector<std::string_view> args;
  std::vector<std::string_view> again;
  std::string error;
  for (int commands = 0; commands < 64 && !input.empty(); ++commands) {
    size_t consumed = 0;
    size_t needed = 0;
    const RespParse r = ParseRespCommand(input, limits, &args, &consumed, &needed, &error);
    if (r == RespParse::kError) {
      if (error.empty()) Die("an error without a message", which);
      return;
    }
    if (r == RespParse::kIncomplete) {
      if (needed <= input.size()) Die("incomplete, yet needs no more bytes", which);
      return;
    }
    if (consumed == 0 || consumed > input.size()) Die("consumed out of range", which);
    for (std::string_view a : args) {
      if (a.data() < input.data() || a.data() + a.size() > input.data() + consumed) {
        Die("an argument outside the command", which);
      }
    }
    if (input[0] == '*' && consumed <= 256) {
      for (size_t n = 1; n < consumed; ++n) {
        size_t c2 = 0, n2 = 0;
        if (ParseRespCommand(input.substr(0, n), limits, &again, &c2, &n2, &error) !=
            RespParse::kIncomplete) {
          Die("a prefix of a complete command is not incomplete", which);
        }
      }
    }
    if (!args.empty() && args.size() <= limits.max_args) {
      const std::string encoded = Encode(args);
      size_t c2 = 0, n2 = 0;
      const RespParse back = ParseRespCommand(encoded, limits, &again, &c2, &n2, &error);
      if (back == RespParse::kComplete) {
        if (again != args || c2 != encoded.size()) Die("re-encoded arguments differ", which);
      } else if (back != RespParse::kError) {
        Die("re-encoded arguments are incomplete", which);
      }
    }
    input.remove_prefix(consumed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  static const RespLimits kDefault;
  static const RespLimits kTiny{4, 16, 64, 32};
  Check(input, kDefault, "default");
  Check(input, kTiny, "tiny");
  return 0;
}
