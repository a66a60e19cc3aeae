// SPDX-License-Identifier: Apache-2.0
#include "call_buffers.h"

#include <fmt/core.h>

#include <cstdint>
#include <string>

namespace py = pybind11;

namespace kvport::python {
namespace {

[[noreturn]] void Refuse(size_t index, const std::string& why) {
  throw py::type_error(fmt::format("buffer {}: {}", index, why));
}

uint64_t AsUnsigned(py::handle value, size_t index, const char* what) {
  if (!PyLong_Check(value.ptr())) Refuse(index, fmt::format("{} must be an int", what));
  const unsigned long long v = PyLong_AsUnsignedLongLong(value.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(
        fmt::format("buffer {}: {} must be a non-negative int below 2**64", index, what));
  }
  return v;
}

}  // namespace

CallBuffers::CallBuffers(py::handle items, Access access) {
  const py::sequence sequence = py::reinterpret_borrow<py::sequence>(items);
  const size_t n = py::len(sequence);
  io_.reserve(n);
  for (size_t i = 0; i < n; ++i)
    Add(sequence[i], i, access);
}

void CallBuffers::Add(py::handle item, size_t index, Access access) {
  // (pointer, size[, registered]): EIC's IOBuffers entries and raw pointers.
  if (PyTuple_Check(item.ptr())) {
    const auto tuple = py::reinterpret_borrow<py::tuple>(item);
    if (tuple.size() != 2 && tuple.size() != 3) {
      Refuse(index, "a tuple must be (pointer, size) or (pointer, size, registered)");
    }
    const uint64_t pointer = AsUnsigned(tuple[0], index, "the pointer");
    const uint64_t size = AsUnsigned(tuple[1], index, "the size");
    if (pointer == 0 && size != 0) {
      throw py::value_error(fmt::format("buffer {}: null pointer with size {}", index, size));
    }
    const bool registered = tuple.size() == 3 && py::bool_(tuple[2]);
    io_.Append(reinterpret_cast<void*>(static_cast<uintptr_t>(pointer)), size, registered);
    return;
  }
  // Tensors (torch, and anything shaped like one): data_ptr() and a byte size.
  if (py::hasattr(item, "data_ptr")) {
    if (py::hasattr(item, "is_contiguous") && !py::bool_(item.attr("is_contiguous")())) {
      throw py::value_error(
          fmt::format("buffer {}: the tensor is not contiguous; pass tensor.contiguous()", index));
    }
    const uint64_t pointer = AsUnsigned(item.attr("data_ptr")(), index, "data_ptr()");
    uint64_t size = 0;
    if (py::hasattr(item, "nbytes")) {
      size = AsUnsigned(item.attr("nbytes"), index, "nbytes");
    } else if (py::hasattr(item, "numel") && py::hasattr(item, "element_size")) {
      size = AsUnsigned(item.attr("numel")(), index, "numel()") *
             AsUnsigned(item.attr("element_size")(), index, "element_size()");
    } else {
      Refuse(index, "an object with data_ptr() needs nbytes or numel() and element_size()");
    }
    if (pointer == 0 && size != 0) {
      throw py::value_error(fmt::format("buffer {}: data_ptr() is 0 with {} bytes", index, size));
    }
    io_.Append(reinterpret_cast<void*>(static_cast<uintptr_t>(pointer)), size);
    return;
  }
  if (PyObject_CheckBuffer(item.ptr())) {
    auto view = std::make_unique<Py_buffer>();
    const int flags = PyBUF_C_CONTIGUOUS | (access == Access::kWrite ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(item.ptr(), view.get(), flags) != 0) {  // nothing to release
      PyErr_Clear();
      if (access == Access::kWrite) {
        Refuse(index, fmt::format("a {} cannot be read into: it is read-only or not C-contiguous; "
                                  "pass a bytearray, a writable memoryview or a tensor",
                                  Py_TYPE(item.ptr())->tp_name));
      }
      Refuse(index,
             fmt::format("the {} is not a C-contiguous buffer", Py_TYPE(item.ptr())->tp_name));
    }
    io_.Append(view->buf, static_cast<size_t>(view->len));
    views_.emplace_back(view.release());
    return;
  }
  Refuse(index, fmt::format("a {} is not a buffer; pass bytes, bytearray, memoryview, a tensor "
                            "or a (pointer, size) tuple",
                            Py_TYPE(item.ptr())->tp_name));
}

}  // namespace kvport::python
