# gpuutil's third-party libraries: where each comes from.
#
# nlohmann/json and simdjson: the system package when there is a usable one
# (Debian's, the fast path here and in CI), else the pinned copy in
# third_party/ (see third_party/README.md); GPUUTIL_VENDORED_DEPS=ON always
# takes the copies. Either way the targets are nlohmann_json::nlohmann_json
# and simdjson::simdjson. zlib is optional: without it gpuutil cannot read
# gzip traces (GPUUTIL_HAVE_ZLIB unset), and libdeflate, its optional fast
# path, is used only together with it. Included once by the top-level
# CMakeLists.txt, after Threads.

set(GPUUTIL_VENDORED_nlohmann_json_VERSION 3.11.2)
set(GPUUTIL_VENDORED_simdjson_VERSION 3.0.1)
set(_gpuutil_third_party ${CMAKE_CURRENT_LIST_DIR}/../third_party)

# The system package `name` (at least `version`) unless GPUUTIL_VENDORED_DEPS;
# sets <name>_FOUND and says which copy the build takes (third_party/<name>
# when not found).
macro(gpuutil_find_system_package name version)
  if(NOT GPUUTIL_VENDORED_DEPS)
    find_package(${name} ${version} QUIET)
  endif()
  if(${name}_FOUND)
    message(STATUS "gpuutil: ${name} ${${name}_VERSION} (system)")
  else()
    message(STATUS "gpuutil: ${name} ${GPUUTIL_VENDORED_${name}_VERSION} (vendored, third_party/${name})")
  endif()
endmacro()

gpuutil_find_system_package(nlohmann_json 3.10)
if(NOT nlohmann_json_FOUND)
  add_library(gpuutil_vendored_nlohmann_json INTERFACE)
  target_include_directories(gpuutil_vendored_nlohmann_json SYSTEM INTERFACE ${_gpuutil_third_party}/nlohmann_json/include)
  add_library(nlohmann_json::nlohmann_json ALIAS gpuutil_vendored_nlohmann_json)
endif()

gpuutil_find_system_package(simdjson 3)
if(NOT simdjson_FOUND)
  # The amalgamation as a small static library, compiled with the project's
  # flags (build type, PIC) and configured like Debian's libsimdjson.
  add_library(gpuutil_vendored_simdjson STATIC ${_gpuutil_third_party}/simdjson/simdjson.cpp)
  target_include_directories(gpuutil_vendored_simdjson SYSTEM PUBLIC ${_gpuutil_third_party}/simdjson)
  target_compile_features(gpuutil_vendored_simdjson PUBLIC cxx_std_17)
  target_compile_definitions(gpuutil_vendored_simdjson PUBLIC SIMDJSON_THREADS_ENABLED=1)
  target_link_libraries(gpuutil_vendored_simdjson PUBLIC Threads::Threads)
  add_library(simdjson::simdjson ALIAS gpuutil_vendored_simdjson)
endif()

find_package(ZLIB QUIET)
if(NOT ZLIB_FOUND)
  message(STATUS "gpuutil: zlib not found: this build cannot read gzip traces (install zlib1g-dev to enable)")
  if(GPUUTIL_BUILD_TESTS)
    message(FATAL_ERROR "the C++ tests need zlib (Debian: zlib1g-dev), or configure with -DGPUUTIL_BUILD_TESTS=OFF")
  endif()
endif()
# libdeflate: optional fast gzip path for trace import (zlib stays the
# fallback and the error wording). Debian: libdeflate-dev.
# GPUUTIL_LIBDEFLATE=OFF (pyproject.toml, for wheels) keeps the wheel free
# of a system libdeflate.so: zlib alone then inflates.
option(GPUUTIL_LIBDEFLATE "Use libdeflate for gzip traces when it is installed" ON)
if(GPUUTIL_LIBDEFLATE)
  find_path(LIBDEFLATE_INCLUDE_DIR libdeflate.h)
  find_library(LIBDEFLATE_LIBRARY deflate)
endif()

# Links the chosen gzip support into `target` (privately).
function(gpuutil_link_gzip target)
  if(NOT ZLIB_FOUND)
    return()
  endif()
  target_compile_definitions(${target} PRIVATE GPUUTIL_HAVE_ZLIB)
  target_link_libraries(${target} PRIVATE ZLIB::ZLIB)
  if(LIBDEFLATE_INCLUDE_DIR AND LIBDEFLATE_LIBRARY)
    target_compile_definitions(${target} PRIVATE GPUUTIL_HAVE_LIBDEFLATE)
    target_include_directories(${target} PRIVATE ${LIBDEFLATE_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${LIBDEFLATE_LIBRARY})
    message(STATUS "gpuutil: libdeflate fast gzip path enabled")
  endif()
endfunction()
