// SPDX-License-Identifier: Apache-2.0
// Finding and opening a runtime library with dlopen, without touching process-global state.
//
// Internal to the device layer. Libraries are opened RTLD_NOW | RTLD_LOCAL (every symbol bound
// up front, none exported to later dlopen calls) and never closed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvport/device.h"

namespace kvport::device_internal {

struct OpenedLibrary {
  void* handle = nullptr;                        // null when nothing loaded
  std::string name;                              // what was passed to dlopen
  std::string path;                              // the file the loader mapped (from its link map)
  RuntimeState failure = RuntimeState::kAbsent;  // when handle is null: absent or unusable
  std::string reason;  // when handle is null: every candidate tried and why it failed
};

// Tries `candidates` in order and returns the first that loads. `what` names the library in
// reasons ("libcudart"). A candidate containing '/' is a file: if it does not exist it is
// absent; a file or found soname that fails to load (wrong architecture, missing dependency)
// makes the result unusable.
OpenedLibrary OpenFirstLibrary(std::string_view what, const std::vector<std::string>& candidates);

// "libcudart.so.13 (/usr/local/cuda/lib64/libcudart.so.13)", or just the name when the path is
// the same text.
std::string DescribeLibrary(const OpenedLibrary& library);

// Resolves `name` in `handle`. On failure returns false and appends "name" to *missing.
template <typename Fn>
bool ResolveSymbol(void* handle, const char* name, Fn*& out, std::vector<std::string>* missing);

void* LookupSymbol(void* handle, const char* name);

template <typename Fn>
bool ResolveSymbol(void* handle, const char* name, Fn*& out, std::vector<std::string>* missing) {
  out = reinterpret_cast<Fn*>(LookupSymbol(handle, name));
  if (out == nullptr && missing != nullptr) missing->emplace_back(name);
  return out != nullptr;
}

// Joins with ", ".
std::string JoinNames(const std::vector<std::string>& names);

}  // namespace kvport::device_internal
