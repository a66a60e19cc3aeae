// SPDX-License-Identifier: Apache-2.0
// Helpers for device tests: environment knobs for the fake runtimes, and the fakes' paths.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "kvport/device.h"

namespace kvport::testing {

// Sets an environment variable for the scope and restores it after. The fakes read their knobs
// at each call, so a ScopedEnv must outlive every call it is meant to affect. (Tests may
// setenv; kvport library code never does.)
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Paths of the fakes built in tests/fakes (compile definitions from tests/device/CMakeLists).
inline const char* FakeCudart() {
  return KVPORT_FAKE_CUDART;
}
inline const char* FakeCudartNoMemcpy() {
  return KVPORT_FAKE_CUDART_NO_MEMCPY;
}
inline const char* FakeAscendcl() {
  return KVPORT_FAKE_ASCENDCL;
}
inline const char* FakeAscendclNoHostRegister() {
  return KVPORT_FAKE_ASCENDCL_NO_HOST_REGISTER;
}

// A function of a fake runtime that a DeviceRuntime opened from `library` already loaded (the
// same copy, so the same state: a thread's current device, the copy counters), or null.
template <typename Function>
Function FakeFunction(const char* library, const char* name) {
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* symbol = ::dlsym(handle, name);
  ::dlclose(handle);  // the runtime keeps it loaded
  return reinterpret_cast<Function>(symbol);
}

}  // namespace kvport::testing
