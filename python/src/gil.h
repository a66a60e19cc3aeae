// SPDX-License-Identifier: Apache-2.0
// What every binding of kvport._core uses around a call into the C++ client: WithoutGil, which
// releases the GIL for a call that may block, and Keys, which turns a Python sequence of keys
// into the client's strings. Shared by module.cc and lmcache_l2_connector.cc.
#pragma once

#include <pybind11/pybind11.h>

#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace kvport::python {

// Set by an atexit hook (kvport/__init__.py) before the interpreter finalizes, on the thread that
// finalizes it (defined in module.cc).
extern std::atomic<bool> interpreter_exiting;
extern std::atomic<std::thread::id> finalizing_thread;
extern std::atomic<int> parked_threads;  // how many threads parked below (for tests)

// Runs `call` with the GIL released and takes it back in normal control flow, never through
// pybind11's gil_scoped_release (whose destructor takes the GIL back): once the interpreter
// finalizes, a daemon thread that asks for the GIL is ended with pthread_exit, whose unwinding
// through a noexcept destructor aborts the process. A thread whose call returns after the atexit
// hook ran parks instead, until the process exits. The destructors that release the GIL (a
// client's, a node's, a lease's: each closes connections or joins threads) use it too: a daemon
// thread that drops the last reference to one of them at exit parks there as well.
template <typename Call>
auto WithoutGil(Call&& call) {
  PyThreadState* state = PyEval_SaveThread();
  auto reacquire = [state] {
    if (interpreter_exiting.load() && std::this_thread::get_id() != finalizing_thread.load()) {
      parked_threads.fetch_add(1);
      for (;;)
        pause();
    }
    PyEval_RestoreThread(state);
  };
  try {
    if constexpr (std::is_void_v<decltype(call())>) {
      call();
      reacquire();
    } else {
      auto result = call();
      reacquire();
      return result;
    }
  } catch (...) {
    reacquire();
    throw;
  }
}

// Keys are str (UTF-8; lone surrogates from surrogateescape round-trip) or bytes.
inline std::vector<std::string> Keys(pybind11::handle items) {
  const auto sequence = pybind11::reinterpret_borrow<pybind11::sequence>(items);
  std::vector<std::string> keys;
  keys.reserve(pybind11::len(sequence));
  for (pybind11::handle item : sequence) {
    if (PyUnicode_Check(item.ptr())) {
      auto encoded = pybind11::reinterpret_steal<pybind11::object>(
          PyUnicode_AsEncodedString(item.ptr(), "utf-8", "surrogateescape"));
      if (!encoded) throw pybind11::error_already_set();
      keys.emplace_back(PyBytes_AS_STRING(encoded.ptr()),
                        static_cast<size_t>(PyBytes_GET_SIZE(encoded.ptr())));
    } else if (PyBytes_Check(item.ptr())) {
      keys.emplace_back(PyBytes_AS_STRING(item.ptr()),
                        static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
    } else {
      throw pybind11::type_error(std::string("keys must be str or bytes, not ") +
                                 Py_TYPE(item.ptr())->tp_name);
    }
  }
  return keys;
}

}  // namespace kvport::python
