# Cross-compiles kvport for aarch64 Linux (Kunpeng, Graviton, Grace) with Debian's cross
# toolchain and the :arm64 multiarch -dev packages, and runs the tests under qemu-user.
# scripts/aarch64-setup installs all of it; `make test-aarch64` is the one entry point.
# See docs/aarch64.md.
#
#   cmake -S . -B build-aarch64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
#     -Dyaml-cpp_DIR=build-aarch64/deps/yaml-cpp/usr/lib/aarch64-linux-gnu/cmake/yaml-cpp

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KVPORT_CROSS_TRIPLET aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${KVPORT_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${KVPORT_CROSS_TRIPLET}-g++)

# Debian multiarch: the target's libraries live in /usr/lib/aarch64-linux-gnu, its
# arch-specific headers in /usr/include/aarch64-linux-gnu, and arch-independent headers
# and CMake/pkg-config files (CLI11, gtest sources) are shared under /usr. "/" must be a
# root so that those and absolute hint paths such as yaml-cpp_DIR are found as given;
# CMAKE_LIBRARY_ARCHITECTURE keeps find_* away from the host's x86_64-linux-gnu folders.
set(CMAKE_LIBRARY_ARCHITECTURE ${KVPORT_CROSS_TRIPLET})
set(CMAKE_FIND_ROOT_PATH / /usr/${KVPORT_CROSS_TRIPLET})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The triplet wrapper (package pkgconf:arm64) searches only the arm64 .pc files.
set(PKG_CONFIG_EXECUTABLE ${KVPORT_CROSS_TRIPLET}-pkg-config CACHE FILEPATH "pkg-config for aarch64")

# qemu-user runs the tests, deliberately WITHOUT -L: aarch64 binaries find
# /lib/ld-linux-aarch64.so.1 and the :arm64 libraries through the host's multiarch folders.
# With -L <sysroot> qemu pairs a different ld.so with libc and threaded tests hang.
# The emulated CPU is an Armv8.2 Neoverse N1, the closest model qemu has to a Kunpeng 920
# (Armv8.2, no SVE, no pointer authentication), so glibc picks the same string/memory
# routines as on that machine; qemu's default "max" CPU has every optional feature.
set(KVPORT_QEMU_CPU neoverse-n1 CACHE STRING "CPU model qemu-aarch64 emulates for the tests")
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR /usr/bin/qemu-${CMAKE_SYSTEM_PROCESSOR} -cpu ${KVPORT_QEMU_CPU})
endif()
