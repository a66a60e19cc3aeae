// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the host, CUDA and Ascend runtimes. Internal to the device layer.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "kvport/device.h"
#include "kvport/status.h"

namespace kvport::device_internal {

// "CUDA runtime", "Ascend runtime (ACL)", "host runtime": how messages name a runtime.
std::string_view RuntimeDisplayName(RuntimeKind kind);

// DeviceError "<call> failed: error <code> (<text>)".
Status RuntimeCallError(std::string_view call, long code, std::string_view text);

// "cudaMemcpy(D2H, 4096 bytes)": the call as error messages name it.
std::string DescribeCopy(std::string_view function, MemcpyKind kind, size_t bytes);
std::string DescribeSized(std::string_view function, size_t bytes);

// InvalidArgument unless ptr is non-null (and bytes > 0 where `bytes_required`).
Status CheckBuffer(std::string_view call, const void* ptr, size_t bytes, bool bytes_required);
Status CheckCopyArguments(void* dst, const void* src, size_t bytes, MemcpyKind kind);

// The streams a runtime owns for CopyOnDevice: one per device, made at the first copy on it and
// never destroyed (the runtime library is never unloaded). Thread-safe.
class DeviceStreams {
 public:
  // The stream of `device`, which must be the calling thread's current device; the first time,
  // `create(&stream)` makes it (a Status).
  template <typename Create>
  Result<void*> Get(int device, Create&& create) {
    std::lock_guard lock(mu_);
    auto it = streams_.find(device);
    if (it != streams_.end()) return it->second;
    void* stream = nullptr;
    KVPORT_RETURN_IF_ERROR(create(&stream));
    streams_.emplace(device, stream);
    return stream;
  }

 private:
  std::mutex mu_;
  std::map<int, void*> streams_;
};

}  // namespace kvport::device_internal
