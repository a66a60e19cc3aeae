// SPDX-License-Identifier: Apache-2.0
// KVPORT_API: marks what libkvport.so exports.
//
// Every kvport library is compiled with -fvisibility=hidden and -fvisibility-inlines-hidden
// (cmake/kvport.cmake), so the shared library exports exactly what carries this mark: the
// classes, structs and non-inline functions declared in include/kvport/. Anything declared
// elsewhere (src/) stays internal. The rule: every class and struct definition and every
// non-inline function declaration at namespace scope in a public header starts with KVPORT_API
// (templates and inline functions need nothing); the ctest library_exports checks both ways
// (docs/operations.md, "Installing").
#pragma once

#define KVPORT_API [[gnu::visibility("default")]]
