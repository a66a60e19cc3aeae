// SPDX-License-Identifier: Apache-2.0
#include "call_buffers.h"

#include <fmt/core.h>

#include <charconv>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

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

// The attribute names asked for on every buffer object, interned once (with the GIL held) and
// kept for the life of the process.
struct Names {
  PyObject* device = PyUnicode_InternFromString("device");
  PyObject* type = PyUnicode_InternFromString("type");
  PyObject* index = PyUnicode_InternFromString("index");
  PyObject* id = PyUnicode_InternFromString("id");
  PyObject* is_cuda = PyUnicode_InternFromString("is_cuda");
  PyObject* is_npu = PyUnicode_InternFromString("is_npu");
  PyObject* cuda_array_interface = PyUnicode_InternFromString("__cuda_array_interface__");
  PyObject* dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
};
const Names& AttributeNames() {
  static const Names* names = new Names();
  return *names;
}

// object.name, or a null object when it has no such attribute. A miss makes no AttributeError
// (most buffers have none of the attributes asked for here, and making one per buffer would
// cost more than the rest of the call's Python work); an error other than a missing attribute
// propagates.
py::object OptionalAttr(py::handle object, PyObject* name) {
  PyObject* value = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  const int found = PyObject_GetOptionalAttr(object.ptr(), name, &value);
#else
  const int found = _PyObject_LookupAttr(object.ptr(), name, &value);
#endif
  if (found < 0) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

// An int attribute's value, or `fallback` when it is absent or not an int (torch's
// device.index is None for a device named without one).
int IntOr(py::handle object, PyObject* name, int fallback) {
  py::object value = OptionalAttr(object, name);
  if (!value || !PyLong_Check(value.ptr())) return fallback;
  const long v = PyLong_AsLong(value.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return fallback;
  }
  return v < 0 || v > INT32_MAX ? fallback : static_cast<int>(v);
}

bool IsTrue(py::handle object, PyObject* name) {
  py::object value = OptionalAttr(object, name);
  return value && value.ptr() == Py_True;
}

// A device named by its type and ordinal, as torch names them ("cuda", 0) -> "cuda:0".
Placement Named(std::string_view type, int index) {
  Placement p;
  if (type == "cpu") return p;
  p.device = true;
  p.index = index;
  p.name = index >= 0 ? fmt::format("{}:{}", type, index) : std::string(type);
  if (type == "cuda") {
    p.kind = RuntimeKind::kCuda;
    p.supported = true;
  } else if (type == "npu") {  // torch_npu (Ascend)
    p.kind = RuntimeKind::kAscend;
    p.supported = true;
  }
  return p;
}

// The object's `device` attribute: a torch.device (type, index) or an Array API string such as
// numpy 2's "cpu" or "cuda:1". nullopt when it has none that says (CuPy's Device has an id only:
// its __cuda_array_interface__ says where it is).
std::optional<Placement> FromDeviceAttribute(py::handle item) {
  const Names& names = AttributeNames();
  py::object device = OptionalAttr(item, names.device);
  if (!device) return std::nullopt;
  if (PyUnicode_Check(device.ptr())) {
    const std::string text = py::cast<std::string>(device);
    const size_t colon = text.find(':');
    int index = -1;
    if (colon != std::string::npos) {
      const char* first = text.data() + colon + 1;
      const char* last = text.data() + text.size();
      int parsed = 0;
      const auto [end, error] = std::from_chars(first, last, parsed);
      if (error == std::errc() && end == last && parsed >= 0) index = parsed;
    }
    return Named(std::string_view(text).substr(0, colon), index);
  }
  py::object type = OptionalAttr(device, names.type);
  if (!type || !PyUnicode_Check(type.ptr())) return std::nullopt;
  return Named(py::cast<std::string>(type), IntOr(device, names.index, -1));
}

// DLPack's DLDeviceType (dlpack.h); the host-readable ones are host memory here.
Placement FromDlpack(int type, int id) {
  switch (type) {
    case 1:   // kDLCPU
    case 3:   // kDLCUDAHost: pinned host memory
    case 11:  // kDLROCMHost
      return Placement{};
    case 2:  // kDLCUDA
      return Named("cuda", id);
    case 13: {  // kDLCUDAManaged: CUDA may migrate it to the device; staged like device memory
      Placement p = Named("cuda", id);
      p.name += " (managed)";
      return p;
    }
    default:
      break;
  }
  static constexpr std::string_view kNames[] = {
      "",    "CPU",  "CUDA",     "CUDAHost", "OpenCL",      "",       "",       "Vulkan",  "Metal",
      "VPI", "ROCM", "ROCMHost", "ExtDev",   "CUDAManaged", "OneAPI", "WebGPU", "Hexagon", "MAIA"};
  const std::string_view name =
      type >= 0 && type < static_cast<int>(std::size(kNames)) ? kNames[type] : std::string_view();
  Placement p;
  p.device = true;
  p.index = id;
  p.name = name.empty() ? fmt::format("DLPack device type {}", type)
                        : fmt::format("DLPack device type {} ({}), device {}", type, name, id);
  return p;
}

// The buffer-protocol types that are host memory by construction: no attribute to look up.
bool PlainHostObject(py::handle item) {
  return PyBytes_CheckExact(item.ptr()) || PyByteArray_CheckExact(item.ptr()) ||
         PyMemoryView_Check(item.ptr()) || PyTuple_Check(item.ptr());
}

std::string_view KindOption(RuntimeKind kind) {
  return kind == RuntimeKind::kAscend ? "ASCEND" : "CUDA";
}

// (pointer, size) of a __cuda_array_interface__ (version 2 and later): C-contiguous only.
std::pair<uint64_t, uint64_t> CudaArrayInterface(py::handle item, size_t index, Access access) {
  py::object cai = item.attr("__cuda_array_interface__");
  if (!PyDict_Check(cai.ptr())) Refuse(index, "__cuda_array_interface__ is not a dict");
  const py::dict interface = py::reinterpret_borrow<py::dict>(cai);
  if (!interface.contains("data") || !interface.contains("shape") ||
      !interface.contains("typestr")) {
    Refuse(index, "__cuda_array_interface__ lacks data, shape or typestr");
  }
  const py::tuple data = py::reinterpret_borrow<py::object>(interface["data"]);
  if (data.size() != 2)
    Refuse(index, "__cuda_array_interface__['data'] is not (pointer, readonly)");
  const uint64_t pointer = AsUnsigned(data[0], index, "the interface's data pointer");
  if (access == Access::kWrite && py::bool_(data[1])) {
    Refuse(index, "the device array is read-only and cannot be read into");
  }
  const std::string typestr = py::cast<std::string>(interface["typestr"]);
  uint64_t item_size = 0;
  if (typestr.size() < 3 ||
      std::from_chars(typestr.data() + 2, typestr.data() + typestr.size(), item_size).ec !=
          std::errc() ||
      item_size == 0) {
    Refuse(index, fmt::format("__cuda_array_interface__ typestr '{}' has no item size", typestr));
  }
  const py::tuple shape = py::reinterpret_borrow<py::object>(interface["shape"]);
  uint64_t count = 1;
  for (py::handle extent : shape)
    count *= AsUnsigned(extent, index, "a shape extent");
  // strides None (or absent) means C-contiguous; otherwise they must be the C-contiguous ones.
  if (interface.contains("strides") && !interface["strides"].is_none()) {
    const py::tuple strides = py::reinterpret_borrow<py::object>(interface["strides"]);
    uint64_t expected = item_size;
    for (size_t d = shape.size(); d-- > 0;) {
      const uint64_t extent = AsUnsigned(shape[d], index, "a shape extent");
      if (extent > 1 &&
          (d >= strides.size() || AsUnsigned(strides[d], index, "a stride") != expected)) {
        throw py::value_error(fmt::format(
            "buffer {}: the device array is not C-contiguous; pass a contiguous copy", index));
      }
      expected *= extent;
    }
  }
  return {pointer, count * item_size};
}

}  // namespace

Placement PlacementOf(py::handle item) {
  if (PlainHostObject(item)) return Placement{};
  const Names& names = AttributeNames();
  if (std::optional<Placement> declared = FromDeviceAttribute(item)) return *declared;
  if (IsTrue(item, names.is_cuda)) return Named("cuda", -1);
  if (IsTrue(item, names.is_npu)) return Named("npu", -1);
  if (OptionalAttr(item, names.cuda_array_interface)) {
    py::object device = OptionalAttr(item, names.device);  // CuPy's Device: an id
    return Named("cuda", device ? IntOr(device, names.id, -1) : -1);
  }
  if (py::object dlpack_device = OptionalAttr(item, names.dlpack_device)) {
    py::object device = dlpack_device();
    if (PyTuple_Check(device.ptr()) && py::len(device) == 2) {
      const py::tuple pair = py::reinterpret_borrow<py::tuple>(device);
      if (PyLong_Check(pair[0].ptr()) && PyLong_Check(pair[1].ptr())) {
        return FromDlpack(py::cast<int>(pair[0]), py::cast<int>(pair[1]));
      }
    }
  }
  return Placement{};
}

CallBuffers::CallBuffers(py::handle items, Access access, const Client* registrations)
    : sequence_(py::reinterpret_borrow<py::object>(items)) {
  const py::sequence sequence = py::reinterpret_borrow<py::sequence>(items);
  const size_t n = py::len(sequence);
  items_.reserve(n);
  io_.reserve(n);
  placements_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    items_.push_back(sequence[i]);  // a reference for the call: see the header
    Add(items_.back(), i, access, registrations);
  }
}

void CallBuffers::Add(py::handle item, size_t index, Access access, const Client* registrations) {
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
    placements_.emplace_back();
    return;
  }
  const Placement placement = PlacementOf(item);
  const char* type = Py_TYPE(item.ptr())->tp_name;
  if (placement.device && !placement.supported) {
    throw StatusError{Status::NotSupported(fmt::format(
        "buffer {}: the {} is in {} memory, which kvport cannot reach: it moves host memory and "
        "stages CUDA and Ascend memory only; copy it to the host first (tensor.cpu())",
        index, type, placement.name))};
  }
  uint64_t pointer = 0;
  uint64_t size = 0;
  if (py::hasattr(item, "data_ptr")) {
    // Tensors (torch, and anything shaped like one): data_ptr() and a byte size.
    if (py::hasattr(item, "is_contiguous") && !py::bool_(item.attr("is_contiguous")())) {
      throw py::value_error(
          fmt::format("buffer {}: the tensor is not contiguous; pass tensor.contiguous()", index));
    }
    pointer = AsUnsigned(item.attr("data_ptr")(), index, "data_ptr()");
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
  } else if (placement.device && py::hasattr(item, "__cuda_array_interface__")) {
    std::tie(pointer, size) = CudaArrayInterface(item, index, access);
  } else if (placement.device) {
    throw StatusError{Status::InvalidArgument(
        fmt::format("buffer {}: the {} is in {} memory and has no data_ptr() or "
                    "__cuda_array_interface__ that gives its address",
                    index, type, placement.name))};
  } else if (PyObject_CheckBuffer(item.ptr())) {
    auto view = std::make_unique<Py_buffer>();
    const int flags = PyBUF_C_CONTIGUOUS | (access == Access::kWrite ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(item.ptr(), view.get(), flags) != 0) {  // nothing to release
      PyErr_Clear();
      if (access == Access::kWrite) {
        Refuse(index, fmt::format("a {} cannot be read into: it is read-only or not C-contiguous; "
                                  "pass a bytearray, a writable memoryview or a tensor",
                                  type));
      }
      Refuse(index, fmt::format("the {} is not a C-contiguous buffer", type));
    }
    io_.Append(view->buf, static_cast<size_t>(view->len));
    views_.emplace_back(view.release());
    placements_.push_back(placement);
    return;
  } else {
    Refuse(index, fmt::format("a {} is not a buffer; pass bytes, bytearray, memoryview, a tensor "
                              "or a (pointer, size) tuple",
                              type));
  }

  void* data = reinterpret_cast<void*>(static_cast<uintptr_t>(pointer));
  if (placement.device && registrations != nullptr) {
    // Staged only where it lies in memory registered with its kind; never sent as host memory.
    Result<MemoryInfo> where = registrations->RegisteredMemoryOf(data, size);
    if (!where.ok()) {
      throw StatusError{
          Status::InvalidArgument(fmt::format("buffer {}: the {} in {} memory: {}", index, type,
                                              placement.name, where.status().message()))};
    }
    if (where->kind == RuntimeKind::kHost) {
      throw StatusError{Status::InvalidArgument(fmt::format(
          "buffer {}: the {} is in {} memory that was not registered with this client, and a "
          "transport moves host memory only. Register it (or the pool it lies in) once with "
          "client.register_memory([...], kind=MemoryKind.{}, device_id={}) and kvport stages it "
          "through pinned host memory; or pass host memory",
          index, type, placement.name, KindOption(placement.kind),
          placement.index >= 0 ? placement.index : 0))};
    }
    if (where->kind != placement.kind ||
        (placement.index >= 0 && where->device_id != placement.index)) {
      throw StatusError{Status::InvalidArgument(fmt::format(
          "buffer {}: the {} is in {} memory but lies in memory registered as {} device {}", index,
          type, placement.name, RuntimeKindName(where->kind), where->device_id))};
    }
  }
  io_.Append(data, size, placement.device);
  placements_.push_back(placement);
}

}  // namespace kvport::python
