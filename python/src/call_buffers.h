// SPDX-License-Identifier: Apache-2.0
// CallBuffers: the caller's Python buffers of one client call, as a kvport::IOBuffers.
//
// Accepted per item, all zero-copy (the client reads from / writes into the object's own memory):
//   - any buffer-protocol object: bytes (read-only: puts only), bytearray, memoryview, numpy
//     arrays, array.array ... It must be C-contiguous; for a read it must be writable;
//   - a tuple (pointer: int, size: int[, registered: bool]), the caller vouching for `size`
//     bytes at `pointer` (EIC's IOBuffers.append; `registered` is EIC's hint, see IOBuffer);
//   - an object with data_ptr() (torch tensors): `nbytes`, else numel() * element_size(), is the
//     size; a non-contiguous tensor is refused.
// A buffer-protocol object stays exported (a bytearray cannot be resized) until the CallBuffers
// is destroyed, which must happen with the GIL held: build it, release the GIL for the call,
// take the GIL back, let it go out of scope.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "kvport/io_buffers.h"

namespace kvport::python {

enum class Access { kRead, kWrite };  // kRead: the client reads the buffer (a put)

class CallBuffers {
 public:
  // Throws pybind11 errors (TypeError, ValueError) naming the item that cannot be used.
  CallBuffers(pybind11::handle items, Access access);
  CallBuffers(const CallBuffers&) = delete;
  CallBuffers& operator=(const CallBuffers&) = delete;

  const IOBuffers& io() const { return io_; }

 private:
  void Add(pybind11::handle item, size_t index, Access access);

  struct ReleaseView {
    void operator()(Py_buffer* view) const {
      PyBuffer_Release(view);
      delete view;
    }
  };
  using View = std::unique_ptr<Py_buffer, ReleaseView>;

  IOBuffers io_;
  std::vector<View> views_;  // released with the CallBuffers, also when its constructor throws
};

}  // namespace kvport::python
