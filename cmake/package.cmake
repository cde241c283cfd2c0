# SPDX-License-Identifier: BSD-3-Clause
# Debian packages with CPack (generator DEB), one per install component:
#   libremora0     runtime  libremora.so.0 (section libs)
#   libremora-dev  dev      headers, libremora.so, libremora.a, CMake package, pkg-config files;
#                           Depends: libremora0 (= this version), libfabric-dev, libexpected-dev,
#                           libsodium-dev (the static library and remora.pc need libsodium), pkg-config
#                           (the CMake package finds libfabric and libsodium with it)
#   remora         tools    the remora command and its man pages (it links libremora.a, so it
#                           needs no libremora0; a library package carries no program, by policy)
# Each package carries /usr/share/doc/PACKAGE/{copyright,changelog.Debian.gz}. Dependencies on
# shared libraries come from dpkg-shlibdeps; libremora0 gets a shlibs file and an ldconfig trigger.
# Built from a configured and built tree by scripts/package.sh, which also runs lintian.
#
# lintian: no errors. Warnings left, and why:
#   initial-upload-closes-no-bugs            the changelog's one entry closes no Debian bug: these
#                                            packages are not uploads to Debian
#   maintainer-script-empty (postinst/postrm) libremora0's no-op scripts, there only so that CPack
#                                            does not write ones calling ldconfig (the trigger does)
#   pkg-config-unavailable-for-cross-compilation  the .pc files are in /usr/lib/pkgconfig, not the
#                                            multiarch folder: a build tree configured for
#                                            /usr/local has libdir "lib" (configure with
#                                            -DCMAKE_INSTALL_PREFIX=/usr for multiarch paths)
# Info tags: no symbols file, no -z now / _FORTIFY_SOURCE in the default flags (hardening-*).
#
# Stripping: CPACK_STRIP_FILES strips the shared library and the tool, and the install rule in
# CMakeLists.txt strips the static library's debug sections (CMake does not strip archives), so
# a RelWithDebInfo tree packages without its debug information.
#
# Maintainer: REMORA_PACKAGE_CONTACT, "Name <address>", goes into the Maintainer field, the
# changelog trailer and debian/copyright's Upstream-Contact. Whoever builds packages for others
# sets it to themselves (-DREMORA_PACKAGE_CONTACT="Jane Doe <jane@example.net>", or the
# environment variable of that name for scripts/package.sh). The default names the project at a
# reserved, undeliverable domain (RFC 2606 .invalid): remora has no mailing address, and a
# package should not claim a real-looking one nobody reads. lintian accepts it.
set(REMORA_PACKAGE_CONTACT "The remora developers <remora-devel@remora.invalid>"
    CACHE STRING "Maintainer of the Debian packages: \"Name <address>\"")
if(NOT REMORA_PACKAGE_CONTACT MATCHES "^[^<>@]*[^<>@ ] <[^<>@ ]+@[^<>@ ]+\\.[^<>@ ]+>$")
  message(FATAL_ERROR "REMORA_PACKAGE_CONTACT is \"${REMORA_PACKAGE_CONTACT}\": it must be "
                      "\"Name <user@host.domain>\" (the Debian Maintainer field)")
endif()
set(REMORA_DEB_RELEASE 1)
set(REMORA_DEB_VERSION "${PROJECT_VERSION}-${REMORA_DEB_RELEASE}")

# copyright (machine-readable, from LICENSE) and changelog.Debian.gz, for each package's doc folder
file(READ ${PROJECT_SOURCE_DIR}/LICENSE remora_license)
string(REGEX REPLACE "\n+$" "" remora_license "${remora_license}")
string(REGEX REPLACE "\n\n" "\n.\n" remora_license "${remora_license}")
string(REGEX REPLACE "\n" "\n " remora_license "${remora_license}")
set(REMORA_LICENSE_TEXT " ${remora_license}")
set(remora_deb_dir ${PROJECT_BINARY_DIR}/debian)
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/copyright.in ${remora_deb_dir}/copyright @ONLY)
string(TIMESTAMP REMORA_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)  # honours SOURCE_DATE_EPOCH
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/changelog.in ${remora_deb_dir}/changelog @ONLY)
execute_process(COMMAND gzip -9nc ${remora_deb_dir}/changelog
                OUTPUT_FILE ${remora_deb_dir}/changelog.Debian.gz COMMAND_ERROR_IS_FATAL ANY)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME remora)
set(CPACK_PACKAGE_VENDOR "The remora authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${REMORA_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "remote memory access over fabrics (libfabric)")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${REMORA_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${REMORA_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libremora0)
# ldconfig through a trigger, as Debian wants (lintian: lacks-ldconfig-trigger); CPack would write
# postinst/postrm calling ldconfig (maintscript-calls-ldconfig) unless the package brings its own.
foreach(name triggers postinst postrm)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/libremora0.${name} ${remora_deb_dir}/libremora0/${name}
                 COPYONLY)
endforeach()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${remora_deb_dir}/libremora0/triggers
    ${remora_deb_dir}/libremora0/postinst ${remora_deb_dir}/libremora0/postrm)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "remote memory access over fabrics (libfabric) - shared library
remora is a library for remote memory access over libfabric's fabrics: verbs
(InfiniBand, RoCE), tcp and sockets for connected endpoints, shm and tcp
(ofi_rxm) for reliable datagrams. It offers registered memory, one-sided read,
write and atomics, send/receive with immediate data, flush to a peer's
persistent memory, completion queues with separate or shared channels, and
accounting of every queue resource.
.
This package contains the shared library (C API and C++ API).")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libremora-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libremora0 (= ${REMORA_DEB_VERSION}), libfabric-dev (>= 1.17), libexpected-dev, libsodium-dev, pkg-config")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "remote memory access over fabrics (libfabric) - development files
remora is a library for remote memory access over libfabric's fabrics, the
successor in spirit of librpma.
.
This package contains the C and C++ headers, the static library, the CMake
package (find_package(remora): remora::remora, remora::shared) and the
pkg-config files (remora for C++20, remora-c for C).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME remora)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "remote memory access over fabrics (libfabric) - command-line tool
remora is a library for remote memory access over libfabric's fabrics.
.
This package contains the remora command: info (providers usable here), serve
(expose a memory or file region), put and get (copy into and out of a served
region, with flush to durability), keygen (admission keys) and bench
(latency, bandwidth and CPU cost of each operation, with a plain libfabric
baseline).")

foreach(component runtime dev tools)
  string(TOUPPER ${component} upper)
  set(package ${CPACK_DEBIAN_${upper}_PACKAGE_NAME})
  install(FILES ${remora_deb_dir}/copyright ${remora_deb_dir}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
endforeach()

include(CPack)
