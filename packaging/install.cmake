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
#   share/man/man{1,5,8}                           man/ (mdoc)
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
target_link_libraries(baton_lib_objects PRIVATE PkgConfig::SODIUM)

set(baton_lib_includes
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/baton>)

add_library(baton_shared SHARED $<TARGET_OBJECTS:baton_lib_objects>)
set_target_properties(baton_shared PROPERTIES OUTPUT_NAME baton EXPORT_NAME baton
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
# every symbol the library uses is resolved at link time
target_link_options(baton_shared PRIVATE -Wl,--no-undefined)
target_link_libraries(baton_shared PRIVATE PkgConfig::SODIUM Threads::Threads m)
target_include_directories(baton_shared INTERFACE ${baton_lib_includes})

add_library(baton_static STATIC $<TARGET_OBJECTS:baton_lib_objects>)
set_target_properties(baton_static PROPERTIES OUTPUT_NAME baton EXPORT_NAME baton_static)
# baton::sodium is made by batonConfig.cmake (find_library), so the exported
# target names no build-tree target
target_link_libraries(baton_static INTERFACE
  $<BUILD_INTERFACE:PkgConfig::SODIUM> $<INSTALL_INTERFACE:baton::sodium>
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
