// SPDX-License-Identifier: Apache-2.0
// libkvport.so is the kvport libraries linked whole (cmake/package.cmake); this file only gives
// the target a source of its own. What the library exports is what include/kvport/ marks
// KVPORT_API (include/kvport/export.h).
namespace kvport::shared_library {}
