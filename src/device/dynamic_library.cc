// SPDX-License-Identifier: Apache-2.0
#include "device/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace kvport::device_internal {
namespace {

std::string LastDlError() {
  const char* err = dlerror();
  return err != nullptr ? err : "unknown dlopen error";
}

// The loader reports a soname it could not find as "<name>: cannot open shared object file:
// No such file or directory". Any other failure means a file was found but could not be loaded
// (wrong ELF class, a dependency missing), which is "present but unusable", not "absent".
bool IsNotFoundError(std::string_view name, std::string_view error) {
  std::string prefix(name);
  prefix += ": cannot open shared object file";
  return error.substr(0, prefix.size()) == prefix;
}

// The file behind `handle`, symlinks resolved. For a path we opened, that path is the truth;
// for a soname, the loader's link map says where it found it. (A link map keeps the name of the
// first load, which may be a symlink since removed, hence realpath on our own name first.)
std::string LoadedPath(void* handle, const std::string& name) {
  std::string path = name;
  if (name.find('/') == std::string::npos) {
    struct link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
        map->l_name[0] != '\0') {
      path = map->l_name;
    }
  }
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  return path;
}

}  // namespace

OpenedLibrary OpenFirstLibrary(std::string_view what, const std::vector<std::string>& candidates) {
  OpenedLibrary result;
  std::vector<std::string> tried;
  std::string unloadable;  // reason of the first candidate that existed but failed to load
  for (const std::string& candidate : candidates) {
    if (candidate.find('/') != std::string::npos) {
      struct stat st {};
      if (stat(candidate.c_str(), &st) != 0) {
        tried.push_back(candidate + " (" + std::strerror(errno) + ")");
        continue;
      }
    }
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      result.handle = handle;
      result.name = candidate;
      result.path = LoadedPath(handle, candidate);
      return result;
    }
    std::string error = LastDlError();
    if (candidate.find('/') == std::string::npos && IsNotFoundError(candidate, error)) {
      tried.push_back(candidate + " (not in the loader's search path)");
      continue;
    }
    tried.push_back(candidate + " (failed to load)");
    if (unloadable.empty()) unloadable = candidate + " is present but failed to load: " + error;
  }
  if (!unloadable.empty()) {
    result.failure = RuntimeState::kUnusable;
    result.reason = unloadable;
    if (tried.size() > 1) result.reason += "; tried " + JoinNames(tried);
  } else {
    result.failure = RuntimeState::kAbsent;
    result.reason = std::string(what) + " not found; tried " + JoinNames(tried);
  }
  return result;
}

std::string DescribeLibrary(const OpenedLibrary& library) {
  if (library.path.empty() || library.path == library.name) return library.name;
  return library.name + " (" + library.path + ")";
}

void* LookupSymbol(void* handle, const char* name) {
  dlerror();  // clear a stale error so a null result is judged by this lookup alone
  return dlsym(handle, name);
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace kvport::device_internal
