// SPDX-License-Identifier: Apache-2.0
// CallBuffers: the caller's Python buffers of one client call, as a kvport::IOBuffers.
//
// Accepted per item, all zero-copy (the client reads from / writes into the object's own memory):
//   - any buffer-protocol object: bytes (read-only: puts only), bytearray, memoryview, numpy
//     arrays, array.array ... It must be C-contiguous; for a read it must be writable;
//   - a tuple (pointer: int, size: int[, registered: bool]), the caller vouching for `size`
//     bytes at `pointer` (EIC's IOBuffers.append; `registered` is EIC's hint, see IOBuffer);
//   - an object with data_ptr() (torch tensors): `nbytes`, else numel() * element_size(), is the
//     size; a non-contiguous tensor is refused;
//   - an object with __cuda_array_interface__ (CuPy, Numba), which is device memory.
//
// Lifetime: every item, and the sequence itself, is referenced by the CallBuffers, and a
// buffer-protocol object stays exported (a bytearray cannot be resized), until the CallBuffers is
// destroyed. Another Python thread may therefore drop its own references (clear the list, `del`
// the tensor) while the call runs without the GIL: the memory stays valid for the call. The
// CallBuffers must be destroyed with the GIL held: build it, release the GIL for the call, take
// the GIL back, let it go out of scope.
//
// Device memory. An object that says it lives on an accelerator (torch's is_cuda / device,
// __cuda_array_interface__, DLPack's __dlpack_device__) is never handed to a transport as host
// memory (a socket would fail with EFAULT and close the connection for every call pipelined on
// it). Given the client's registrations (Client::RegisteredMemoryOf), a CUDA or Ascend buffer that
// lies in memory registered with its kind is passed on for the client to stage through pinned
// host memory; any other device buffer fails the call with a StatusError naming the device.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "kvport/client.h"
#include "kvport/device.h"
#include "kvport/io_buffers.h"
#include "kvport/status.h"

namespace kvport::python {

// A non-OK Status on its way to Python (module.cc translates it into kvport.Error).
struct StatusError {
  Status status;
};

enum class Access { kRead, kWrite };  // kRead: the client reads the buffer (a put)

// Where an object's memory lives, as the object itself declares it.
struct Placement {
  RuntimeKind kind = RuntimeKind::kHost;  // kHost also for a device kvport cannot stage
  bool device = false;                    // on an accelerator (of `kind` when supported)
  bool supported = false;                 // a CUDA or Ascend device: kvport can stage it
  int index = -1;                         // the device ordinal, -1 when the object does not say
  std::string name;                       // "cuda:0", "npu", "mps", "DLPack device 8 (Metal)"
};

// The placement an object declares: torch's is_cuda / is_npu and device (a torch.device or a
// "type[:index]" string), __cuda_array_interface__, DLPack's __dlpack_device__(). Host memory
// (bytes, bytearray, memoryview, an object that declares nothing, a CPU or pinned-host DLPack
// device) is {kHost, device = false}.
Placement PlacementOf(pybind11::handle item);

class CallBuffers {
 public:
  // `registrations`: the client whose registered memory decides whether a device buffer is
  // staged (it lies in memory registered with its kind) or refused; nullptr for RegisterMemory
  // and UnregisterMemory, which take device buffers as they are. Throws pybind11 errors (TypeError,
  // ValueError) naming the item that cannot be used, and StatusError for a device buffer that
  // cannot be staged.
  CallBuffers(pybind11::handle items, Access access, const Client* registrations);
  CallBuffers(const CallBuffers&) = delete;
  CallBuffers& operator=(const CallBuffers&) = delete;

  const IOBuffers& io() const { return io_; }
  // One per buffer: where its object said it lives.
  const std::vector<Placement>& placements() const { return placements_; }

 private:
  void Add(pybind11::handle item, size_t index, Access access, const Client* registrations);

  struct ReleaseView {
    void operator()(Py_buffer* view) const {
      PyBuffer_Release(view);
      delete view;
    }
  };
  using View = std::unique_ptr<Py_buffer, ReleaseView>;

  // Declared first, destroyed last: the objects outlive the views exported from them.
  pybind11::object sequence_;
  std::vector<pybind11::object> items_;
  IOBuffers io_;
  std::vector<Placement> placements_;
  std::vector<View> views_;  // released with the CallBuffers, also when its constructor throws
};

}  // namespace kvport::python
