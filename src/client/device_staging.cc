// SPDX-License-Identifier: Apache-2.0
#include "client/device_staging.h"

#include <utility>

namespace kvport::client {

namespace {

constexpr uint64_t kStagingAlign = 64;

uint64_t AlignUp(uint64_t n) {
  return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
}

size_t KindIndex(RuntimeKind kind) {
  return static_cast<size_t>(kind);
}

}  // namespace

void DeviceStaging::UseLibraries(std::string cuda_library, std::string ascend_library,
                                 uint64_t staging_cache_bytes) {
  std::lock_guard lock(mu_);
  cuda_library_ = std::move(cuda_library);
  ascend_library_ = std::move(ascend_library);
  staging_cache_bytes_ = staging_cache_bytes;
  own_cuda_.reset();
  own_ascend_.reset();
}

const DeviceRuntime* DeviceStaging::Runtime(RuntimeKind kind) {
  std::lock_guard lock(mu_);
  return LockedRuntime(kind);
}

Result<const DeviceRuntime*> DeviceStaging::RuntimeFor(RuntimeKind kind, std::string_view purpose) {
  const DeviceRuntime* runtime = Runtime(kind);
  KVPORT_RETURN_IF_ERROR(runtime->RequireUsable(purpose));
  return runtime;
}

const DeviceRuntime* DeviceStaging::LockedRuntime(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kHost:
      return &HostRuntime();
    case RuntimeKind::kCuda:
      if (cuda_library_.empty()) return &CudaRuntime();
      if (own_cuda_ == nullptr) own_cuda_ = OpenCudaRuntime(cuda_library_);
      return own_cuda_.get();
    case RuntimeKind::kAscend:
      if (ascend_library_.empty()) return &AscendRuntime();
      if (own_ascend_ == nullptr) own_ascend_ = OpenAscendRuntime(ascend_library_);
      return own_ascend_.get();
  }
  return &HostRuntime();
}

Result<StagingPool*> DeviceStaging::StagingFor(RuntimeKind kind) {
  KVPORT_ASSIGN_OR_RETURN(const DeviceRuntime* runtime, RuntimeFor(kind, "staging device buffers"));
  std::lock_guard lock(mu_);
  auto& slot = staging_[KindIndex(kind)];
  if (slot == nullptr) slot = std::make_unique<StagingPool>(runtime, staging_cache_bytes_);
  return slot.get();
}

void DeviceStaging::MapBuffers(const IOBuffers& buffers, const TransportCapabilities& transport,
                               KeyOutcomes& outcomes, WireBuffers* out) {
  WireBuffers& wire = *out;
  wire.address.assign(buffers.size(), nullptr);
  wire.memory.assign(buffers.size(), MemoryInfo{});
  wire.caller.assign(buffers.size(), MemoryInfo{});
  wire.leases.clear();
  std::array<uint64_t, 3> staged_bytes{};
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (outcomes.failed(i)) continue;
    const IOBuffer& buffer = buffers[i];
    if (buffer.data == nullptr && buffer.size > 0) {
      outcomes.Fail(
          i, KeyCode::kInvalidArgument,
          Status::InvalidArgument("null buffer of " + std::to_string(buffer.size) + " bytes"));
      continue;
    }
    Result<MemoryInfo> where = registry_.Lookup(buffer.data, buffer.size);
    if (!where.ok()) {
      outcomes.Fail(i, KeyCode::kInvalidArgument, where.status());
      continue;
    }
    if (buffer.size == 0) {  // nothing to move or stage: reads as host memory
      wire.address[i] = static_cast<char*>(buffer.data);
      continue;
    }
    wire.caller[i] = *where;
    if (transport.Moves(where->kind)) {
      wire.memory[i] = *where;
      wire.address[i] = static_cast<char*>(buffer.data);
    } else {
      staged_bytes[KindIndex(where->kind)] += AlignUp(buffer.size);
    }
  }
  for (RuntimeKind kind : {RuntimeKind::kCuda, RuntimeKind::kAscend}) {
    const uint64_t total = staged_bytes[KindIndex(kind)];
    if (total == 0) continue;
    Status failed;
    char* next = nullptr;
    Result<StagingPool*> stager = StagingFor(kind);
    if (!stager.ok()) {
      failed = stager.status();
    } else {
      Result<StagingPool::Lease> lease = (*stager)->Acquire(total);
      if (lease.ok()) {
        next = lease->data();
        wire.leases.push_back(std::move(lease).value());
      } else {
        failed = lease.status();
      }
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (outcomes.failed(i) || !wire.staged(i) || wire.caller[i].kind != kind) continue;
      if (next == nullptr) {
        outcomes.Fail(i, KeyCode::kDeviceError, failed);
        continue;
      }
      wire.address[i] = next;
      next += AlignUp(buffers[i].size);
    }
  }
}

Status DeviceStaging::CopyStaged(const IOBuffer& buffer, const MemoryInfo& memory, char* host,
                                 bool to_host) {
  KVPORT_ASSIGN_OR_RETURN(const DeviceRuntime* runtime,
                          RuntimeFor(memory.kind, "staging device buffers"));
  // On kvport's own stream: the caller's current device and streams are left as they were.
  return to_host ? runtime->CopyOnDevice(memory.device_id, host, buffer.data, buffer.size,
                                         MemcpyKind::kDeviceToHost)
                 : runtime->CopyOnDevice(memory.device_id, buffer.data, host, buffer.size,
                                         MemcpyKind::kHostToDevice);
}

}  // namespace kvport::client
