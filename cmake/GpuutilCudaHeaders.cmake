# Where the CUPTI, CUDA driver and NVTX3 headers come from (build time only:
# libcupti is dlopen'ed at run time, never linked).
#
# First the CUDA toolkit ($CUDA_HOME/include, /usr/local/cuda/include,
# /usr/local/cuda/extras/CUPTI/include, the compiler's default paths), then
# the include folders of the nvidia-* wheels installed for the configuring
# Python (nvidia/cu13/include for CUDA 13 wheels, nvidia/<name>/include for
# CUDA 12 ones): cupti.h from nvidia-cuda-cupti, cuda.h from
# nvidia-cuda-runtime, nvtx3/ from nvidia-nvtx. CUDA 13's cupti.h also needs
# crt/host_defines.h, which no wheel but nvidia-cuda-crt (or the toolkit)
# has; as a last resort it is taken from the CUDA headers Triton's wheel
# bundles (triton/backends/nvidia/include: CUDA 12.8, so never its cupti.h).
# GPUUTIL_CUDA_INCLUDE_SEARCH=OFF skips the toolkit (scripts/device_dry_run.sh
# uses it to act out a machine without one). Sets
#   GPUUTIL_CUPTI_INCLUDE_DIR   the folder holding cupti.h (and its *_cbid.h)
#   GPUUTIL_CUDA_INCLUDE_DIRS   every folder needed, cupti.h's first (when
#                               crt/ is not next to cuda.h, a copy of just
#                               crt/ in the build tree)
#   GPUUTIL_CUDA_HEADERS_SPLIT  ON when that is more than one folder
# Included once by the top-level CMakeLists.txt; docs/building.md.

set(_gpuutil_toolkit_include_dirs "")
if(GPUUTIL_CUDA_INCLUDE_SEARCH)
  if(DEFINED ENV{CUDA_HOME})
    list(APPEND _gpuutil_toolkit_include_dirs $ENV{CUDA_HOME}/include $ENV{CUDA_HOME}/extras/CUPTI/include)
  endif()
  list(APPEND _gpuutil_toolkit_include_dirs /usr/local/cuda/include /usr/local/cuda/extras/CUPTI/include)
endif()

# The include folders of the nvidia-* wheels and of Triton's bundled CUDA
# headers that the configuring Python sees (asked once, only when the
# toolkit lacks a header; nothing is imported).
function(gpuutil_wheel_include_dirs)
  if(DEFINED _GPUUTIL_WHEEL_INCLUDE_DIRS_ASKED)
    return()
  endif()
  set(py "")
  foreach(candidate Python_EXECUTABLE Python3_EXECUTABLE PYTHON_EXECUTABLE)
    if(NOT py AND ${candidate})
      set(py "${${candidate}}")
    endif()
  endforeach()
  if(NOT py)
    find_program(GPUUTIL_HEADER_PYTHON NAMES python3 python)
    set(py "${GPUUTIL_HEADER_PYTHON}")
  endif()
  set(found "")
  if(py)
    execute_process(
      COMMAND "${py}" -c [=[
import importlib.util, os
def roots(name):
    spec = importlib.util.find_spec(name)
    return list(spec.submodule_search_locations or []) if spec else []
wheels = []
for root in roots("nvidia"):
    for name in sorted(os.listdir(root)):
        inc = os.path.join(root, name, "include")
        if os.path.isdir(inc) and inc not in wheels:
            wheels.append(inc)
triton = [d for d in (os.path.join(r, "backends", "nvidia", "include") for r in roots("triton")) if os.path.isdir(d)]
print(";".join(wheels) + "|" + ";".join(triton), end="")
]=]
      OUTPUT_VARIABLE found RESULT_VARIABLE rc ERROR_QUIET)
    if(NOT rc EQUAL 0)
      set(found "")
    endif()
  endif()
  set(wheels "")
  set(triton "")
  if(found MATCHES "^([^|]*)\\|(.*)$")
    set(wheels "${CMAKE_MATCH_1}")
    set(triton "${CMAKE_MATCH_2}")
  endif()
  set(_GPUUTIL_WHEEL_PYTHON "${py}" PARENT_SCOPE)
  set(_GPUUTIL_WHEEL_INCLUDE_DIRS "${wheels}" PARENT_SCOPE)
  set(_GPUUTIL_TRITON_INCLUDE_DIRS "${triton}" PARENT_SCOPE)
  set(_GPUUTIL_WHEEL_INCLUDE_DIRS_ASKED TRUE PARENT_SCOPE)
endfunction()

# find_path(var header) in `first_dirs`, then the toolkit, then the wheels
# (and Triton's headers when `triton_too`); FATAL_ERROR naming every place
# and the wheel that has the header when none does.
macro(gpuutil_find_cuda_header var header wheel first_dirs triton_too)
  if(GPUUTIL_CUDA_INCLUDE_SEARCH)
    find_path(${var} ${header} HINTS ${first_dirs} ${_gpuutil_toolkit_include_dirs})
  else()
    find_path(${var} ${header} HINTS ${first_dirs} NO_DEFAULT_PATH)
  endif()
  if(NOT ${var})
    gpuutil_wheel_include_dirs()
    set(_gpuutil_wheel_dirs ${_GPUUTIL_WHEEL_INCLUDE_DIRS})
    if(${triton_too})
      list(APPEND _gpuutil_wheel_dirs ${_GPUUTIL_TRITON_INCLUDE_DIRS})
    endif()
    find_path(${var} ${header} HINTS ${_gpuutil_wheel_dirs} NO_DEFAULT_PATH)
  endif()
  if(NOT ${var})
    if(GPUUTIL_CUDA_INCLUDE_SEARCH)
      set(_gpuutil_where "the CUDA toolkit (${_gpuutil_toolkit_include_dirs}, and the system include paths)")
    else()
      set(_gpuutil_where "the CUDA toolkit (not searched: GPUUTIL_CUDA_INCLUDE_SEARCH=OFF)")
    endif()
    set(_gpuutil_seen "${_gpuutil_wheel_dirs}")
    if(NOT _gpuutil_seen)
      set(_gpuutil_seen "none installed")
    endif()
    message(FATAL_ERROR "${header} not found in ${_gpuutil_where} nor in the ${wheel} wheel of "
                        "${_GPUUTIL_WHEEL_PYTHON} (searched: ${_gpuutil_seen}). Install the CUDA "
                        "toolkit headers or set CUDA_HOME, or `pip install ${wheel}` for that Python "
                        "(headers only: libcupti is loaded at run time).")
  endif()
  message(STATUS "gpuutil: ${header} from ${${var}}")
endmacro()

gpuutil_find_cuda_header(GPUUTIL_CUPTI_INCLUDE_DIR cupti.h nvidia-cuda-cupti "" FALSE)
# cupti.h includes cuda.h (next to it in a toolkit and with CUDA 13 wheels),
# which includes crt/host_defines.h.
gpuutil_find_cuda_header(GPUUTIL_CUDA_H_INCLUDE_DIR cuda.h nvidia-cuda-runtime "${GPUUTIL_CUPTI_INCLUDE_DIR}" FALSE)
gpuutil_find_cuda_header(GPUUTIL_CUDA_CRT_INCLUDE_DIR crt/host_defines.h nvidia-cuda-crt "${GPUUTIL_CUDA_H_INCLUDE_DIR}" TRUE)
gpuutil_find_cuda_header(GPUUTIL_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h nvidia-nvtx "${GPUUTIL_CUPTI_INCLUDE_DIR}" FALSE)
set(_gpuutil_crt_dir ${GPUUTIL_CUDA_CRT_INCLUDE_DIR})
if(NOT GPUUTIL_CUDA_CRT_INCLUDE_DIR STREQUAL GPUUTIL_CUDA_H_INCLUDE_DIR)
  # Only crt/ from there: that folder may hold other CUDA headers of another
  # version (Triton's are 12.8), which must not shadow or fill in for these.
  set(_gpuutil_crt_dir ${CMAKE_BINARY_DIR}/gpuutil_cuda_crt)
  file(REMOVE_RECURSE ${_gpuutil_crt_dir})
  file(COPY ${GPUUTIL_CUDA_CRT_INCLUDE_DIR}/crt DESTINATION ${_gpuutil_crt_dir})
endif()
set(GPUUTIL_CUDA_INCLUDE_DIRS ${GPUUTIL_CUPTI_INCLUDE_DIR} ${GPUUTIL_CUDA_H_INCLUDE_DIR} ${GPUUTIL_NVTX_INCLUDE_DIR}
    ${_gpuutil_crt_dir})
list(REMOVE_DUPLICATES GPUUTIL_CUDA_INCLUDE_DIRS)
list(LENGTH GPUUTIL_CUDA_INCLUDE_DIRS _gpuutil_n)
if(_gpuutil_n GREATER 1)
  set(GPUUTIL_CUDA_HEADERS_SPLIT ON)
else()
  set(GPUUTIL_CUDA_HEADERS_SPLIT OFF)
endif()
