// SPDX-License-Identifier: Apache-2.0
// kvport._core.LMCacheL2Connector: kvport as an L2 backend of LMCache's multiprocess mode, the
// connector its `native_plugin` L2 adapter loads (docs/python.md, "LMCache multiprocess mode").
#pragma once

#include <pybind11/pybind11.h>

namespace kvport::python {

// Adds the LMCacheL2Connector class to the module.
void RegisterLmcacheL2Connector(pybind11::module_& m);

}  // namespace kvport::python
