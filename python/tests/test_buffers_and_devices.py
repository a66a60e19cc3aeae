# SPDX-License-Identifier: Apache-2.0
"""What the bindings do with the objects a call is given: every buffer (and the list of them)
stays referenced until the call returns, even when another thread drops its own references while
the call waits; and memory that declares itself device memory (torch's is_cuda / device,
__cuda_array_interface__, DLPack's __dlpack_device__) never reaches a socket as host memory: it is
staged through pinned host memory when it lies in memory registered with its kind, and the call
fails with kvport.Error naming the device otherwise.

The device objects here are fakes carrying those attributes. Unregistered, they point at host
memory, which a binding that ignored the attributes would send without complaint. Registered,
they point at "device" memory of the fake CUDA runtime (tests/fakes/fake_cudart.cc, the file in
KVPORT_FAKE_CUDART, opened by the client through its cuda_runtime_library option), which checks
that the client copies it with device-to-host and host-to-device copies."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import threading
import types
import weakref

import pytest

import eic
import kvport
from conftest import FakeTensor, HoldingProxy, pointer_of, unique
from kvport import _core

FAKE_CUDART = os.environ.get("KVPORT_FAKE_CUDART", "")


# --- fakes ------------------------------------------------------------------------------------

class TorchDevice:
    def __init__(self, type_: str, index):
        self.type = type_
        self.index = index


class DeviceTensor:
    """Shaped like a torch tensor on an accelerator: data_ptr(), nbytes, is_contiguous(),
    device (type, index) and is_cuda, over memory the test provides."""

    def __init__(self, pointer: int, size: int, device: str = "cuda", index=0):
        self._pointer = pointer
        self.nbytes = size
        self.device = TorchDevice(device, index)
        self.is_cuda = device == "cuda"

    def data_ptr(self) -> int:
        return self._pointer

    def is_contiguous(self) -> bool:
        return True


class CudaArray:
    """Shaped like a CuPy array: __cuda_array_interface__ (no data_ptr()), device.id."""

    def __init__(self, pointer: int, size: int, readonly: bool = False, device_id: int = 0):
        self.__cuda_array_interface__ = {"data": (pointer, readonly), "shape": (size,),
                                         "typestr": "|u1", "strides": None, "version": 3}
        self.device = types.SimpleNamespace(id=device_id)


class DlpackTensor:
    """Says where it lives only through DLPack's __dlpack_device__ (device type, id)."""

    def __init__(self, pointer: int, size: int, device_type: int, device_id: int = 0):
        self._pointer = pointer
        self.nbytes = size
        self._device = (device_type, device_id)

    def data_ptr(self) -> int:
        return self._pointer

    def __dlpack_device__(self):
        return self._device


class ArrayApiTensor:
    """numpy 2 / Array API style: device is a string."""

    def __init__(self, pointer: int, size: int, device: str):
        self._pointer = pointer
        self.nbytes = size
        self.device = device

    def data_ptr(self) -> int:
        return self._pointer


def host_memory(size: int) -> tuple:
    """(pointer, keeper) of host memory that the fakes above claim to be device memory."""
    keeper = bytearray(b"h" * size)
    return pointer_of(keeper), keeper


# --- 1. buffers stay referenced for the call --------------------------------------------------

@contextlib.contextmanager
def _answer_released_only_if_kept(proxy, caller):
    """Runs the checks made while the answer is held; releases it once they passed. When one
    failed, the proxy is closed instead (the call fails Unavailable), so that the answer is
    never written into memory the call let go."""
    failures = []

    def check(ok: bool, why: str) -> None:
        if not ok:
            failures.append(why)

    try:
        yield check
    except BaseException:
        proxy.close()
        caller.join(60)
        raise
    if failures:
        proxy.close()
        caller.join(60)
        pytest.fail("; ".join(failures))
    proxy.release()
    caller.join(60)


class RecordingTensor(FakeTensor):
    """A FakeTensor that records its bytes when it is destroyed (its memory goes with it)."""

    def __init__(self, size: int, record: list):
        super().__init__(size)
        self._record = record

    def __del__(self):
        self._record.append(self.tobytes())


def test_buffers_stay_alive_while_another_thread_clears_the_list(node):
    """A call's list of buffers is cleared by another thread while the call waits for the node's
    answer (held by a proxy, so the wait is the test's to end): the only other reference to the
    tensor is gone, yet the call keeps it alive, its bytes land in it, and it is destroyed once
    the call returned."""
    payload = bytes(range(256)) * 256  # 64 KiB
    key = unique("alive")
    assert kvport.Client(node.address).mset([key], [payload]).ok
    with HoldingProxy(node.address) as proxy:
        client = kvport.Client(proxy.address, transport_type=kvport.TransportType.TCP,
                               connections=1, timeout=120)
        destroyed = []
        sink = RecordingTensor(len(payload), destroyed)
        alive = weakref.ref(sink)
        buffers = [sink, bytearray(len(payload))]
        del sink
        results = []
        caller = threading.Thread(target=lambda: results.append(client.mget([key, key],
                                                                            buffers)))
        proxy.hold()
        caller.start()
        with _answer_released_only_if_kept(proxy, caller) as check:
            assert proxy.wait_held(2 * len(payload)), "the node's answer never came"
            # The call is inside the bindings now, waiting for the answer without the GIL.
            buffers.clear()
            gc.collect()
            check(alive() is not None and not destroyed,
                  "the call let its buffer be freed while it waited")
        assert not caller.is_alive()
        assert results and results[0].ok, results
    gc.collect()
    assert alive() is None, "the call kept its buffer after it returned"
    assert destroyed == [payload], "the value did not land in the buffer the call kept"


def test_buffers_stay_alive_for_a_put_whose_list_is_cleared(node):
    """The same for mset: a value whose last reference another thread drops mid-call."""
    key = unique("alive-put")
    with HoldingProxy(node.address) as proxy:
        client = kvport.Client(proxy.address, transport_type=kvport.TransportType.TCP,
                               connections=1, timeout=120)
        value = FakeTensor(4096, fill=0x5A)
        alive = weakref.ref(value)
        values = [value]
        del value
        results = []
        caller = threading.Thread(target=lambda: results.append(client.mset([key], values)))
        proxy.hold()
        caller.start()
        with _answer_released_only_if_kept(proxy, caller) as check:
            assert proxy.wait_held(1), "the node never answered the put"
            values.clear()
            gc.collect()
            check(alive() is not None, "the call let its value be freed while it waited")
        assert results and results[0].ok, results
    results.clear()
    gc.collect()
    assert alive() is None
    out = bytearray(4096)
    assert kvport.Client(node.address).mget([key], [out]).ok and out == b"\x5a" * 4096


# --- 2. device memory -------------------------------------------------------------------------

def test_where_objects_say_they_live():
    pointer, keeper = host_memory(64)
    assert _core.device_of(bytearray(8)) is None
    assert _core.device_of(FakeTensor(8)) is None
    assert _core.device_of(DeviceTensor(pointer, 64)) == (1, 0, "cuda:0", True)
    assert _core.device_of(DeviceTensor(pointer, 64, "cuda", 3)) == (1, 3, "cuda:3", True)
    assert _core.device_of(DeviceTensor(pointer, 64, "npu", 1)) == (2, 1, "npu:1", True)
    assert _core.device_of(DeviceTensor(pointer, 64, "cpu", None)) is None
    assert _core.device_of(DeviceTensor(pointer, 64, "mps", None))[2:] == ("mps", False)
    assert _core.device_of(CudaArray(pointer, 64, device_id=2)) == (1, 2, "cuda:2", True)
    assert _core.device_of(DlpackTensor(pointer, 64, 2, 1)) == (1, 1, "cuda:1", True)
    assert _core.device_of(DlpackTensor(pointer, 64, 1)) is None        # kDLCPU
    assert _core.device_of(DlpackTensor(pointer, 64, 3)) is None        # kDLCUDAHost: pinned
    assert "Metal" in _core.device_of(DlpackTensor(pointer, 64, 8))[2]
    assert _core.device_of(ArrayApiTensor(pointer, 64, "cpu")) is None
    assert _core.device_of(ArrayApiTensor(pointer, 64, "cuda:1")) == (1, 1, "cuda:1", True)
    del keeper


def unregistered_device_objects(pointer: int, size: int) -> dict:
    return {
        "torch cuda": DeviceTensor(pointer, size),
        "torch npu": DeviceTensor(pointer, size, "npu", 0),
        "cuda array interface": CudaArray(pointer, size),
        "dlpack cuda": DlpackTensor(pointer, size, 2, 0),
        "array api cuda": ArrayApiTensor(pointer, size, "cuda:0"),
    }


def test_unregistered_device_memory_fails_the_call_and_is_never_sent(client):
    pointer, keeper = host_memory(4096)
    for name, tensor in unregistered_device_objects(pointer, 4096).items():
        key = unique("device")
        with pytest.raises(kvport.Error) as put:
            client.mset([key, unique("host")], [tensor, b"host bytes"])
        assert put.value.code == "InvalidArgument", name
        assert "register_memory" in put.value.message, put.value.message
        assert ("cuda" in put.value.message or "npu" in put.value.message), put.value.message
        assert client.mexist([key]).codes == [kvport.KeyCode.KEY_NOT_EXIST], name
        assert client.mset([key], [b"v"]).ok
        with pytest.raises(kvport.Error) as get:
            client.mget([key], [tensor])
        assert get.value.code == "InvalidArgument", name
        assert bytes(keeper) == b"h" * 4096, f"{name}: device memory written as host memory"
    # The connection is fine: every call pipelined on it goes on.
    out = bytearray(1)
    assert client.mget([key], [out]).ok and out == b"v"


def test_devices_kvport_cannot_stage_are_not_supported(client):
    pointer, keeper = host_memory(64)
    for tensor, named in ((DeviceTensor(pointer, 64, "mps", None), "mps"),
                          (DeviceTensor(pointer, 64, "xpu", 0), "xpu:0"),
                          (DlpackTensor(pointer, 64, 8), "Metal"),
                          (DlpackTensor(pointer, 64, 10), "ROCM")):
        with pytest.raises(kvport.Error) as e:
            client.mset([unique("elsewhere")], [tensor])
        assert e.value.code == "NotSupported" and named in e.value.message, e.value.message
        with pytest.raises(kvport.Error):
            client.register_memory([tensor], kvport.MemoryKind.CUDA)
    del keeper


def test_host_declared_objects_are_host_memory(client):
    payload = b"declared host memory"
    for make in (lambda p, n: DeviceTensor(p, n, "cpu", None),
                 lambda p, n: DlpackTensor(p, n, 1),
                 lambda p, n: DlpackTensor(p, n, 3),   # pinned host memory
                 lambda p, n: ArrayApiTensor(p, n, "cpu")):
        source = bytearray(payload)
        key = unique("declared-host")
        assert client.mset([key], [make(pointer_of(source), len(source))]).ok
        sink = bytearray(len(payload))
        assert client.mget([key], [make(pointer_of(sink), len(sink))]).ok
        assert sink == payload


def test_eic_fails_a_call_with_a_device_tensor_and_goes_on(node):
    ec = eic.Client()
    assert ec.init(None, node.address, eic.InitOption()) == 0
    pointer, keeper = host_memory(64)
    tensor = DeviceTensor(pointer, 64)
    key = unique("eic-device")
    status, outcome = ec.mset([key, key + "_meta"], [tensor, DeviceTensor(pointer, 16)],
                              eic.SetOption())
    assert status == eic.StatusCode.FAILED
    assert outcome.status_codes == [eic.StatusCode.INVALID_ARGUMENT] * 2
    assert "cuda:0" in outcome.error
    status, outcome = ec.mexist([key], eic.ExistOption())
    assert outcome.status_codes == [eic.StatusCode.KEY_NOT_EXIST]
    assert ec.mset([key, key + "_meta"], [b"v" * 64, b"m" * 16], eic.SetOption())[0] == 0
    status, _, outcome = ec.mget([key, key + "_meta"], eic.GetOption(),
                                 [tensor, DeviceTensor(pointer, 16)])
    assert status == eic.StatusCode.FAILED and "cuda:0" in outcome.error
    assert bytes(keeper) == b"h" * 64
    status, values, _ = ec.mget([key], eic.GetOption(), None)
    assert status == eic.StatusCode.SUCCESS and values == [b"v" * 64]


@pytest.fixture
def fake_cuda():
    """cudaMalloc of the fake CUDA runtime, in this process (the client opens the same file,
    so it sees the same "device" memory)."""
    assert FAKE_CUDART, "KVPORT_FAKE_CUDART is not set (ctest sets it: python/CMakeLists.txt)"
    assert os.path.isfile(FAKE_CUDART), f"{FAKE_CUDART} is not built (target fake_cudart)"
    lib = ctypes.CDLL(FAKE_CUDART)
    lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    lib.cudaFree.argtypes = [ctypes.c_void_p]
    allocated = []

    def malloc(size: int, fill: bytes = b"") -> int:
        pointer = ctypes.c_void_p()
        assert lib.cudaMalloc(ctypes.byref(pointer), size) == 0
        allocated.append(pointer.value)
        ctypes.memset(pointer.value, 0, size)
        ctypes.memmove(pointer.value, fill, len(fill))
        return pointer.value

    yield malloc
    for pointer in allocated:
        assert lib.cudaFree(pointer) == 0


def test_registered_device_memory_is_staged_through_the_cuda_runtime(node, fake_cuda):
    payload = bytes(range(256)) * 64  # 16 KiB
    client = kvport.Client(node.address, cuda_runtime_library=FAKE_CUDART)
    source = DeviceTensor(fake_cuda(len(payload), payload), len(payload))
    pool = fake_cuda(1 << 20)  # a registered pool, and tensors that lie inside it
    sink = DeviceTensor(pool + 4096, len(payload))
    array_sink = CudaArray(pool + 65536, len(payload))
    with pytest.raises(kvport.Error) as e:
        client.register_memory([source], kvport.MemoryKind.HOST)
    assert e.value.code == "InvalidArgument" and "kind=MemoryKind.CUDA" in e.value.message
    with pytest.raises(kvport.Error) as e:
        client.register_memory([DeviceTensor(source.data_ptr(), len(payload), "cuda", 1)],
                               kvport.MemoryKind.CUDA, 0)
    assert e.value.code == "InvalidArgument" and "device_id=1" in e.value.message
    client.register_memory([source, (pool, 1 << 20)], kvport.MemoryKind.CUDA, 0)

    key = unique("staged")
    assert client.mset([key], [source]).ok
    host_copy = bytearray(len(payload))
    assert client.mget([key], [host_copy]).ok and host_copy == payload  # went D2H, then out
    result = client.mget([key, key], [sink, array_sink])
    assert result.ok, result
    assert ctypes.string_at(sink.data_ptr(), len(payload)) == payload     # came in, then H2D
    assert ctypes.string_at(pool + 65536, len(payload)) == payload

    # A tensor that runs past the registered pool is refused, as is one after unregistering.
    with pytest.raises(kvport.Error, match="runs past"):
        client.mget([key], [DeviceTensor(pool + (1 << 20) - 16, 64)])
    client.unregister_memory([source])
    with pytest.raises(kvport.Error, match="not registered"):
        client.mset([key], [source])
