# SPDX-License-Identifier: Apache-2.0
# Install-time part of cmake/package.cmake: the systemd unit, its environment file and the
# default node config, under the prefix of this install (CMAKE_INSTALL_PREFIX as the install
# runs: cmake --install --prefix, or /usr in the Debian package). KVPORT_SOURCE_DIR,
# KVPORT_INSTALL_BINDIR, KVPORT_INSTALL_SYSCONFDIR and KVPORT_BINARY_DIR are set by the
# install(CODE) before it.
#
# The files in deploy/ name the package's paths (/usr/bin/kvport, /etc/kvport/node.yaml,
# /etc/default/kvport); under another prefix the unit is rewritten to name that prefix's.
set(prefix "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/+$" "" prefix "${prefix}")
# GNUInstallDirs' rule for SYSCONFDIR, applied to the prefix of this install: /etc for / and
# /usr, /etc/opt/NAME for /opt/NAME, PREFIX/etc otherwise.
if(IS_ABSOLUTE "${KVPORT_INSTALL_SYSCONFDIR}")
  set(etc "${KVPORT_INSTALL_SYSCONFDIR}")
elseif(prefix STREQUAL "/usr" OR prefix STREQUAL "")
  set(etc "/${KVPORT_INSTALL_SYSCONFDIR}")
elseif(prefix MATCHES "^/opt/")
  set(etc "/${KVPORT_INSTALL_SYSCONFDIR}${prefix}")
else()
  set(etc "${prefix}/${KVPORT_INSTALL_SYSCONFDIR}")
endif()
set(bindir "${prefix}/${KVPORT_INSTALL_BINDIR}")
set(unit_dir "${prefix}/lib/systemd/system")

file(READ "${KVPORT_SOURCE_DIR}/deploy/systemd/kvport.service" unit)
string(REPLACE "/usr/bin/kvport" "${bindir}/kvport" unit "${unit}")
string(REPLACE "/etc/kvport/" "${etc}/kvport/" unit "${unit}")
string(REPLACE "/etc/default/kvport" "${etc}/default/kvport" unit "${unit}")
set(staged "${KVPORT_BINARY_DIR}/package/kvport.service")
file(WRITE "${staged}" "${unit}")

file(INSTALL DESTINATION "${unit_dir}" TYPE FILE FILES "${staged}")
file(INSTALL DESTINATION "${etc}/kvport" TYPE FILE FILES "${KVPORT_SOURCE_DIR}/examples/node.yaml")
file(INSTALL DESTINATION "${etc}/default" TYPE FILE
     FILES "${KVPORT_SOURCE_DIR}/deploy/systemd/kvport.env" RENAME kvport)
