# The seccomp allow-list of batond (src/server/sandbox.h), generated at build
# time: policy/seccomp.list -> <build>/generated/seccomp_list.inc, a C array
# of {name, optional} that src/server/sandbox.c includes. Included by the
# root CMakeLists.txt after the baton_server target exists.
#
# Run as a script (cmake -DIN=... -DOUT=... -P seccomp.cmake) it does the
# conversion itself; a malformed line stops the build with its line number.
# Whether each name is a real system call is checked by libseccomp when
# batond starts (baton_sandbox_check) and by test_server_policy_sandbox.

if(CMAKE_SCRIPT_MODE_FILE)
  file(STRINGS "${IN}" lines)
  set(body "")
  set(lineno 0)
  set(count 0)
  foreach(line IN LISTS lines)
    math(EXPR lineno "${lineno} + 1")
    string(REGEX REPLACE "#.*$" "" line "${line}")
    string(STRIP "${line}" line)
    if(line STREQUAL "")
      continue()
    endif()
    if(NOT line MATCHES "^([a-z_][a-z0-9_]*)(\\?)?$")
      message(FATAL_ERROR "${IN}:${lineno}: expected one system call name (optionally ending in '?'), got '${line}'")
    endif()
    set(name "${CMAKE_MATCH_1}")
    set(optional 0)
    if(CMAKE_MATCH_2)
      set(optional 1)
    endif()
    if(name STREQUAL "clone3")
      message(FATAL_ERROR "${IN}:${lineno}: clone3 is answered with ENOSYS by the sandbox itself; do not list it")
    endif()
    if(name STREQUAL "socket" OR name STREQUAL "fcntl")
      message(FATAL_ERROR "${IN}:${lineno}: ${name} is allowed by the sandbox itself with checked arguments; do not list it")
    endif()
    if(";${seen};" MATCHES ";${name};")
      message(FATAL_ERROR "${IN}:${lineno}: '${name}' listed twice")
    endif()
    list(APPEND seen "${name}")
    string(APPEND body "    {\"${name}\", ${optional}},\n")
    math(EXPR count "${count} + 1")
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "${IN}: no system call listed")
  endif()
  set(text "/* Generated from policy/seccomp.list by policy/seccomp.cmake. Do not edit. */\nstatic const struct baton_sandbox_entry sandbox_entries[] = {\n${body}};\n")
  file(WRITE "${OUT}" "${text}")
  return()
endif()

pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
set(BATON_SECCOMP_INC ${CMAKE_BINARY_DIR}/generated/seccomp_list.inc)
add_custom_command(OUTPUT ${BATON_SECCOMP_INC}
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/policy/seccomp.list
          -DOUT=${BATON_SECCOMP_INC} -P ${CMAKE_SOURCE_DIR}/policy/seccomp.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/policy/seccomp.list ${CMAKE_SOURCE_DIR}/policy/seccomp.cmake
  COMMENT "Generating the seccomp allow-list from policy/seccomp.list"
  VERBATIM)
target_sources(baton_server PRIVATE ${BATON_SECCOMP_INC})
target_include_directories(baton_server PRIVATE ${CMAKE_BINARY_DIR}/generated)
target_link_libraries(baton_server PUBLIC PkgConfig::SECCOMP)
