// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the server's connection state machine: each input is a control byte and
// the bytes one client sends, fed to a real session of an in-process node in the input's chunks
// (byte by byte, small chunks, or at once), with a valid HELLO first unless the control byte
// says otherwise (session_inputs.h). After each input the node must have closed the connection,
// serve a fresh client, show nothing half-written and hold no reservation, pin or lease
// (session_driver.h). Sanitizers catch any crash, overflow or UB in the node.
//
// Build (clang only): the test-fuzz lane (make test-fuzz) builds and runs fuzz_session_smoke:
// seeds from fuzz_session_seeds, then KVPORT_FUZZ_SECONDS of fuzzing.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "session_driver.h"

namespace {

kvport::fuzz::SessionDriver* driver = nullptr;

void StopDriver() {
  delete driver;
  driver = nullptr;
}

}  // namespace

// The fuzzed node offers UCX where it is usable (session_driver.cc). UCX keeps some of its state
// in memory it maps itself, which LeakSanitizer does not scan: what it allocates while an input
// runs (its worker's first progress, an endpoint's setup) looks leaked to libFuzzer's per-input
// check. Those are UCX's own allocations, not the node's.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libucs.so\nleak:libucp.so\nleak:libuct.so\n";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (driver == nullptr) {
    auto started = kvport::fuzz::SessionDriver::Start();
    if (!started.ok()) {
      std::fprintf(stderr, "fuzz_session: cannot start the node: %s\n",
                   started.status().ToString().c_str());
      std::abort();
    }
    driver = std::move(started).value().release();
    std::atexit(StopDriver);  // stops the node's thread before static destructors run
  }
  kvport::Status s = driver->Run(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_session: %s\n", s.ToString().c_str());
    std::abort();
  }
  return 0;
}
