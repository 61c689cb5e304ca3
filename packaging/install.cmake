# Installation and packaging (issue 20): `cmake --install` and `cpack -G DEB`.
# Included by the root CMakeLists.txt after the batond and baton targets.
#
#   bin/batond, bin/baton
#   lib/libbaton.so.0 (+ .so), lib/libbaton.a   libbaton, the client side
#   include/baton/*.h                              its public headers, and
#   include/baton/{core,wire,auth}/*.h             the headers they include
#   lib/pkgconfig/baton.pc                         relocatable (${pcfiledir})
#   lib/cmake/baton/                               find_package(baton):
#                                                  baton::baton (shared),
#                                                  baton::baton_static
#   share/man/man1/baton.1.gz                      man/*.1, *.5, *.8, compressed
#   share/man/man5/batond.policy.5.gz              with gzip -9n as Debian
#   share/man/man8/batond.8.gz                     policy asks (12.3)
#   share/doc/baton/examples/batond.policy         policy/batond.policy
#   lib/systemd/system/batond{,@}.service          packaging/*.service (DynamicUser=)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# libbaton: the layers a client needs (core, wire, net, auth, client), built
# once as position-independent objects for both the shared and the static
# library (the layer libraries batond and baton link stay non-PIC).
file(GLOB baton_lib_srcs CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/src/core/*.c ${CMAKE_SOURCE_DIR}/src/wire/*.c
  ${CMAKE_SOURCE_DIR}/src/net/*.c ${CMAKE_SOURCE_DIR}/src/auth/*.c
  ${CMAKE_SOURCE_DIR}/src/client/*.c)
add_library(baton_lib_objects OBJECT ${baton_lib_srcs})
set_target_properties(baton_lib_objects PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(baton_lib_objects PRIVATE PkgConfig::SODIUM PkgConfig::LIBCRYPTO)

set(baton_lib_includes
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/baton>)

add_library(baton_shared SHARED $<TARGET_OBJECTS:baton_lib_objects>)
set_target_properties(baton_shared PROPERTIES OUTPUT_NAME baton EXPORT_NAME baton
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
# every symbol the library uses is resolved at link time
# every symbol resolved at link time; not under the sanitizers, whose
# runtime a shared library leaves to the program that loads it (clang)
if(NOT BATON_SANITIZE)
  target_link_options(baton_shared PRIVATE -Wl,--no-undefined)
endif()
target_link_libraries(baton_shared PRIVATE PkgConfig::SODIUM PkgConfig::LIBCRYPTO Threads::Threads m)
target_include_directories(baton_shared INTERFACE ${baton_lib_includes})

add_library(baton_static STATIC $<TARGET_OBJECTS:baton_lib_objects>)
set_target_properties(baton_static PROPERTIES OUTPUT_NAME baton EXPORT_NAME baton_static)
# baton::sodium and baton::crypto are made by batonConfig.cmake
# (find_library), so the exported target names no build-tree target
target_link_libraries(baton_static INTERFACE
  $<BUILD_INTERFACE:PkgConfig::SODIUM> $<INSTALL_INTERFACE:baton::sodium>
  $<BUILD_INTERFACE:PkgConfig::LIBCRYPTO> $<INSTALL_INTERFACE:baton::crypto>
  Threads::Threads m)
target_include_directories(baton_static INTERFACE ${baton_lib_includes})

install(TARGETS batond baton RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS baton_shared baton_static EXPORT batonTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

# baton/client.h includes "core/tensor.h" and "wire/wire.h", which include
# more of core/; auth/auth.h gives baton_key_open for keyed connections.
install(FILES ${CMAKE_SOURCE_DIR}/include/baton/client.h ${CMAKE_SOURCE_DIR}/include/baton/status.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/baton)
install(FILES ${CMAKE_SOURCE_DIR}/src/core/tensor.h ${CMAKE_SOURCE_DIR}/src/core/types.h
  ${CMAKE_SOURCE_DIR}/src/core/ops.h ${CMAKE_SOURCE_DIR}/src/core/limits.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/baton/core)
install(FILES ${CMAKE_SOURCE_DIR}/src/wire/wire.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/baton/wire)
install(FILES ${CMAKE_SOURCE_DIR}/src/auth/auth.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/baton/auth)

# pkg-config: prefix relative to the .pc file, so a staged or relocated
# install finds its own headers and libraries
file(RELATIVE_PATH baton_pc_to_prefix "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" baton_pc_to_prefix "${baton_pc_to_prefix}")
configure_file(${CMAKE_SOURCE_DIR}/packaging/baton.pc.in ${CMAKE_BINARY_DIR}/packaging/baton.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/baton.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(baton_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
install(EXPORT batonTargets NAMESPACE baton:: DESTINATION ${baton_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/packaging/batonConfig.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/batonConfig.cmake INSTALL_DESTINATION ${baton_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/batonConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/packaging/batonConfig.cmake
  ${CMAKE_BINARY_DIR}/packaging/batonConfigVersion.cmake DESTINATION ${baton_cmake_dir})

# Manual pages (man/*.SECTION, mdoc), compressed at build time with
# gzip -9n (no name or time stamp: the same bytes on every build), as
# Debian policy wants them in a package; man reads them so wherever they
# are installed.
find_program(GZIP_EXECUTABLE gzip REQUIRED)
file(GLOB baton_man_pages CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/man/*.[158])
set(baton_man_gz)
foreach(page ${baton_man_pages})
  get_filename_component(name ${page} NAME)
  string(REGEX REPLACE ".*\\.([158])$" "\\1" section ${name})
  set(gz ${CMAKE_BINARY_DIR}/man/${name}.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E copy ${page} ${CMAKE_BINARY_DIR}/man/${name}
    COMMAND ${GZIP_EXECUTABLE} -9nf ${CMAKE_BINARY_DIR}/man/${name}
    DEPENDS ${page} VERBATIM)
  list(APPEND baton_man_gz ${gz})
  install(FILES ${gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()
add_custom_target(baton_man ALL DEPENDS ${baton_man_gz})

# The example policy: documentation, and the policy batond.service reads.
# Its /etc path follows GNUInstallDirs' rule (prefix /usr: /etc, else
# PREFIX/etc), decided at install time because cpack installs with prefix
# /usr whatever the build was configured with.
install(FILES ${CMAKE_SOURCE_DIR}/policy/batond.policy
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(baton_etc \"/etc\")
  else()
    set(baton_etc \"\${CMAKE_INSTALL_PREFIX}/etc\")
  endif()
  file(INSTALL DESTINATION \"\${baton_etc}/baton\" TYPE FILE
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
    FILES \"${CMAKE_SOURCE_DIR}/policy/batond.policy\")
")

# systemd units (not LIBDIR: systemd looks in PREFIX/lib/systemd/system)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/batond.service ${CMAKE_SOURCE_DIR}/packaging/batond@.service
  DESTINATION lib/systemd/system)

# ---- cpack -G DEB: one package, baton_<version>_<arch>.deb ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME baton)
set(CPACK_PACKAGE_VENDOR "baton")
set(CPACK_PACKAGE_CONTACT "baton developers <baton@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "tensor RPC server (batond) and coordinator (baton) for split LLM inference")
set(CPACK_PACKAGE_DESCRIPTION
  "batond holds a contiguous range of a model's layers and their KV cache and\nserves authenticated, integrity-protected tensor RPC; baton run loads a GGUF\nmodel, places the layers on several batond and drives generation.\nIncludes libbaton, the client library, with its headers.")
# /etc/baton/batond.policy is installed at an absolute path: stage with DESTDIR
# (CPACK_INSTALL_PREFIX is the prefix then)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the binaries' and libbaton's needs (dpkg-shlibdeps): libc6,
# libsodium23, libssl3 (libcrypto: the frames' Poly1305 / ChaCha20),
# libseccomp2, libpcre2-8-0 (baton's BPE pre-tokenizers), libmicrohttpd12 and
# libjansson4 (baton serve's HTTP and JSON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
