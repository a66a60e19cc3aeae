# Helpers shared by every layer's CMakeLists.txt.

# Warnings are errors in our own code (not in third-party headers, which are SYSTEM includes).
set(KVPORT_WARNINGS -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough)
# clang also checks the thread-safety annotations (GUARDED_BY, REQUIRES...: see
# src/common/thread_annotations.h); GCC has no such analysis and the macros expand to nothing.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND KVPORT_WARNINGS -Wthread-safety -Werror=thread-safety)
  # A violation must fail to compile while the same access under the lock compiles, or the
  # annotations silently check nothing (say, if the header's macros stopped expanding on clang).
  foreach(variant locked unlocked)
    if(variant STREQUAL "locked")
      set(take_lock "kvport::MutexLock lock(mu);")
    else()
      set(take_lock "")
    endif()
    try_compile(KVPORT_THREAD_SAFETY_${variant}_COMPILES
      SOURCE_FROM_CONTENT thread_safety_${variant}.cc "
#include \"common/thread_annotations.h\"
struct Counter {
  kvport::Mutex mu;
  int value GUARDED_BY(mu) = 0;
  void Increment() { ${take_lock} ++value; }
};
int main() { Counter c; c.Increment(); }
"
      COMPILE_DEFINITIONS -Wthread-safety -Werror=thread-safety -I${PROJECT_SOURCE_DIR}/src
      CXX_STANDARD 20
      NO_CACHE)
  endforeach()
  if(NOT KVPORT_THREAD_SAFETY_locked_COMPILES OR KVPORT_THREAD_SAFETY_unlocked_COMPILES)
    message(FATAL_ERROR "clang's -Wthread-safety does not check src/common/thread_annotations.h "
                        "(a correctly locked access compiles: ${KVPORT_THREAD_SAFETY_locked_COMPILES}"
                        ", an unlocked one compiles: ${KVPORT_THREAD_SAFETY_unlocked_COMPILES})")
  endif()
endif()

# ThreadSanitizer builds: every test binary also links tests/tsan/pthread_clocklock.cc, which
# routes the pthread *clock*lock calls that libtsan does not intercept (std::timed_mutex with a
# deadline) through the timed calls that it does (see that file).
if(KVPORT_TSAN)
  add_library(kvport_tsan_clocklock OBJECT ${PROJECT_SOURCE_DIR}/tests/tsan/pthread_clocklock.cc)
  target_compile_options(kvport_tsan_clocklock PRIVATE ${KVPORT_WARNINGS})
endif()

# ASan builds: every test binary also links tests/asan/default_options.cc, which turns off
# libasan's guess at dynamic TLS ranges (intercept_tls_get_addr=0): GCC 12's guess misreads a
# block of UCX's TLS that starts at page offset 16, and LeakSanitizer's tracer then faults at
# exit (see that file).
if(KVPORT_SANITIZE)
  add_library(kvport_asan_default_options OBJECT
              ${PROJECT_SOURCE_DIR}/tests/asan/default_options.cc)
  target_compile_options(kvport_asan_default_options PRIVATE ${KVPORT_WARNINGS})
endif()

# kvport_library(NAME SOURCES a.cc ... DEPS x y ...): one static library per layer.
function(kvport_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${KVPORT_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  # libkvport.so (src/CMakeLists.txt) is made of these libraries and exports only what
  # include/kvport/ marks KVPORT_API (include/kvport/export.h); executables are unaffected.
  set_target_properties(${name} PROPERTIES C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
                                           VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# kvport_test(NAME SOURCES a_test.cc ... DEPS x y ... [LABELS l ...] [TIMEOUT s]):
# one GoogleTest binary, registered as one ctest test. The target name is the ctest
# COMMAND so CMAKE_CROSSCOMPILING_EMULATOR (qemu-user) applies when cross-building.
function(kvport_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${KVPORT_WARNINGS})
  # tests/support/: helpers shared by tests of several layers ("support/serve_process.h").
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  if(KVPORT_TSAN)
    target_link_libraries(${name} PRIVATE kvport_tsan_clocklock)
  endif()
  if(KVPORT_SANITIZE)
    target_link_libraries(${name} PRIVATE kvport_asan_default_options)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()

# kvport_microbench(NAME SOURCES a_bench.cc ... DEPS x y ...): a Google Benchmark binary.
# Micro-benchmarks are built with the project but never run by `make test`.
function(kvport_microbench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${KVPORT_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark benchmark::benchmark_main)
endfunction()
