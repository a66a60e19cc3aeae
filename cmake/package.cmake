# SPDX-License-Identifier: Apache-2.0
# What `make install` (cmake --install) and the Debian package (cpack -G DEB) install, from the
# tree `make build` built: the kvport binary, libkvport.so for C++ engines, the public headers,
# a CMake package (find_package(kvport): kvport::kvport) and kvport.pc, the systemd unit, its
# environment file and the default node config (docs/operations.md, "Installing").
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# libkvport.so: every library an engine may call through include/kvport/, linked whole. They are
# compiled with hidden visibility (cmake/kvport.cmake), so only what the public headers mark
# KVPORT_API is exported; fmt, spdlog, yaml-cpp, xxhash and abseil stay shared dependencies.
set(KVPORT_SHARED_PARTS kvport_engine kvport_connector kvport_client kvport_server kvport_config
    kvport_cluster kvport_device kvport_formats kvport_protocol kvport_store kvport_net
    kvport_common)
add_library(kvport_shared SHARED ${PROJECT_SOURCE_DIR}/cmake/libkvport.cc)
target_link_libraries(kvport_shared PRIVATE ${KVPORT_SHARED_PARTS})
foreach(part IN LISTS KVPORT_SHARED_PARTS)
  set_property(TARGET kvport_shared PROPERTY LINK_LIBRARY_OVERRIDE_${part} WHOLE_ARCHIVE)
endforeach()
# The public headers need C++20 and fmt (kvport/log.h formats with it).
target_link_libraries(kvport_shared INTERFACE fmt::fmt)
target_compile_features(kvport_shared INTERFACE cxx_std_20)
target_include_directories(kvport_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# A 0.x release may change the ABI with every minor version, so the soname carries both:
# libkvport.so.0.1 (from 1.0 on, the major version alone).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(KVPORT_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(KVPORT_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()
set_target_properties(kvport_shared PROPERTIES
  OUTPUT_NAME kvport EXPORT_NAME kvport VERSION ${PROJECT_VERSION} SOVERSION ${KVPORT_SOVERSION}
  C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
# Every symbol resolved at link time: a missing dependency fails here, not in an engine. Not in
# sanitizer builds: clang links its sanitizer runtimes into executables only.
if(NOT KVPORT_SANITIZE AND NOT KVPORT_TSAN AND NOT KVPORT_FUZZ)
  target_link_options(kvport_shared PRIVATE -Wl,-z,defs)
endif()

install(TARGETS kvport RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kvport_shared EXPORT kvportTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kvport DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

# CMake package: find_package(kvport) gives kvport::kvport.
set(KVPORT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvport)
install(EXPORT kvportTargets NAMESPACE kvport:: DESTINATION ${KVPORT_CMAKE_DIR}
  FILE kvportTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvportConfig.cmake.in
  ${CMAKE_BINARY_DIR}/package/kvportConfig.cmake INSTALL_DESTINATION ${KVPORT_CMAKE_DIR})
# 0.x: only the same minor version is compatible (the soname rule above).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(KVPORT_COMPATIBILITY SameMinorVersion)
else()
  set(KVPORT_COMPATIBILITY SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/kvportConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${KVPORT_COMPATIBILITY})
install(FILES ${CMAKE_BINARY_DIR}/package/kvportConfig.cmake
              ${CMAKE_BINARY_DIR}/package/kvportConfigVersion.cmake
        DESTINATION ${KVPORT_CMAKE_DIR})

# pkg-config: paths relative to the .pc file, so the one file serves any --prefix.
file(RELATIVE_PATH KVPORT_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" KVPORT_PC_TO_PREFIX "${KVPORT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kvport.pc.in ${CMAKE_BINARY_DIR}/package/kvport.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/kvport.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The systemd unit, its environment file and the default node config (examples/node.yaml). The
# configuration directory follows the prefix when the install runs, by GNUInstallDirs' rule
# (SYSCONFDIR etc: /etc for the prefix /usr, else PREFIX/etc), and the unit is rewritten to name
# the installed paths (cmake/install_deploy.cmake).
install(CODE "set(KVPORT_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
set(KVPORT_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
set(KVPORT_INSTALL_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")
set(KVPORT_BINARY_DIR \"${CMAKE_BINARY_DIR}\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/install_deploy.cmake)

# The Debian package: the same install rules under /usr, binaries stripped (cpack --config
# build/CPackConfig.cmake, or make package).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvport)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kvport developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "remote KV-cache node and client library for LLM inference")
set(CPACK_PACKAGE_DESCRIPTION "kvport serve: a cache node for the attention KV cache of LLM \
serving engines (host memory, namespaces, TTL, eviction, batched operations); libkvport.so, its \
headers, a CMake package and a pkg-config file for C++ engines; a systemd unit.")
# Staged with DESTDIR and CMAKE_INSTALL_PREFIX /usr, so that cmake/install_deploy.cmake sees
# the package's prefix (and puts the configuration under /etc).
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# Depends: from the shared libraries the binaries link (dpkg-shlibdeps, Debian's dpkg-dev).
find_program(KVPORT_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(KVPORT_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  message(STATUS "package: no dpkg-shlibdeps (dpkg-dev): the .deb would have no Depends")
endif()
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# dpkg keeps an administrator's edits of these on upgrade and removes them on purge only.
# (CPack adds the only maintainer scripts: ldconfig after installing and removing the library.)
file(WRITE ${CMAKE_BINARY_DIR}/package/conffiles "/etc/default/kvport\n/etc/kvport/node.yaml\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/package/conffiles)
include(CPack)
