# Helpers shared by every layer's CMakeLists.txt.

# Warnings are errors in our own code (not in third-party headers, which are SYSTEM includes).
set(KVPORT_WARNINGS -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough)

# kvport_library(NAME SOURCES a.cc ... DEPS x y ...): one static library per layer.
function(kvport_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${KVPORT_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# kvport_test(NAME SOURCES a_test.cc ... DEPS x y ... [LABELS l ...] [TIMEOUT s]):
# one GoogleTest binary, registered as one ctest test. The target name is the ctest
# COMMAND so CMAKE_CROSSCOMPILING_EMULATOR (qemu-user) applies when cross-building.
function(kvport_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${KVPORT_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
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
