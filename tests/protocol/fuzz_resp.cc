// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the RESP command parser (protocol/resp.h).
//
// Every input is parsed as a stream of commands, with the node's default limits and with tiny
// ones (so that every limit check is reached by short inputs). A parse may fail, but only with
// an error message; what it returns must hold: a complete command consumed at least one byte
// and no more than the input, its arguments lie inside what it consumed, an incomplete one
// names a size larger than the input, every shorter prefix of a complete array command is
// incomplete, and its arguments encoded again parse back to the same arguments. And a complete
// array command cut at the start of any argument's bytes says where (RespPartialBulk: the
// arguments before it, its position and length), and the arguments after that one parse apart
// (ParseRespBulks) to the same ones: how the node's RESP handler reads a large value into its
// reservation.
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

using kvport::protocol::ParseRespBulks;
using kvport::protocol::ParseRespCommand;
using kvport::protocol::RespLimits;
using kvport::protocol::RespParse;
using kvport::protocol::RespPartialBulk;

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

// `command`: one complete array command, whose arguments are `args`.
void CheckApart(std::string_view command, const std::vector<std::string_view>& args,
                const RespLimits& limits, const char* which) {
  std::vector<std::string_view> before;
  std::vector<std::string_view> after;
  std::string error;
  for (size_t k = 0; k < args.size() && k < 8; ++k) {
    const size_t data_pos = static_cast<size_t>(args[k].data() - command.data());
    RespPartialBulk partial;
    size_t consumed = 0, needed = 0;
    if (ParseRespCommand(command.substr(0, data_pos), limits, &before, &consumed, &needed, &error,
                         &partial) != RespParse::kIncomplete) {
      Die("a command cut at an argument's bytes is not incomplete", which);
    }
    if (partial.index != k || partial.data_pos != data_pos || partial.length != args[k].size() ||
        partial.arg_count != args.size()) {
      Die("the partial bulk is not where the argument is", which);
    }
    for (size_t i = 0; i < k; ++i) {
      if (before.size() != k || before[i] != args[i]) Die("the arguments before differ", which);
    }
    const size_t tail_pos = data_pos + args[k].size() + 2;
    after.clear();
    if (ParseRespBulks(command.substr(tail_pos), args.size() - k - 1, tail_pos, limits, &after,
                       &consumed, &needed, &error) != RespParse::kComplete ||
        consumed != command.size() - tail_pos) {
      Die("the arguments after do not parse apart", which);
    }
    for (size_t i = k + 1; i < args.size(); ++i) {
      if (after[i - k - 1] != args[i]) Die("the arguments after differ", which);
    }
  }
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
    if (input[0] == '*' && !args.empty())
      CheckApart(input.substr(0, consumed), args, limits, which);
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
