# Tables generated from the CUPTI headers the build uses, so that what
# gpuutil knows about CUPTI's callbacks is derived from the source of truth
# and changes when the headers do (docs/live-collection.md, "What is traced").
#
# gpuutil_cbid_table(header prefix out)
#   Every "<prefix><name> = <id>" of a callback-id header (cupti_runtime_cbid.h,
#   cupti_driver_cbid.h) as "{id, \"name\"}," lines (INVALID, SIZE and
#   FORCE_INT left out). The fake CUPTI answers cuptiGetCallbackName with
#   them; tests/cpp/test_call_coverage.cpp classifies every one.
#
# gpuutil_call_params_table(out)
#   Every parameter struct of generated_cuda_runtime_api_meta.h and
#   generated_cuda_meta.h (what CUPTI passes a callback as functionParams)
#   that carries a stream, a launch config, an event or a byte count, as
#   GPUUTIL_CALL_PARAMS(callback name, stream, config, config_stream, count,
#   event) lines: each field GPUUTIL_OFF(struct, member) (offsetof, so a
#   struct that changes, appears or goes away changes the build), or -1
#   when the struct has no such member. The first stream-typed member is
#   the stream the call enqueues on; a launch config's stream is at
#   config_stream inside the config. collectors/cupti/call_catalog.cpp
#   compiles the table.
# Included once by the top-level CMakeLists.txt (after GpuutilCudaHeaders).

function(gpuutil_cbid_table header prefix out)
  file(STRINGS ${header} lines REGEX "${prefix}[A-Za-z0-9_]+ *= *[0-9]+")
  set(body "")
  foreach(line ${lines})
    string(REGEX REPLACE ".*${prefix}([A-Za-z0-9_]+) *= *([0-9]+).*" "\\2;\\1" pair "${line}")
    list(GET pair 0 id)
    list(GET pair 1 name)
    if(NOT name MATCHES "^(INVALID|SIZE|FORCE_INT)$")
      string(APPEND body "    {${id}, \"${name}\"},\n")
    endif()
  endforeach()
  file(WRITE ${out}.tmp "${body}")
  configure_file(${out}.tmp ${out} COPYONLY)
endfunction()

# The folder of GPUUTIL_CUDA_INCLUDE_DIRS holding `file`, or FATAL_ERROR.
function(gpuutil_find_in_cuda_includes file out)
  foreach(dir ${GPUUTIL_CUDA_INCLUDE_DIRS})
    if(EXISTS ${dir}/${file})
      set(${out} ${dir}/${file} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "${file} (CUPTI's generated parameter structs, included by cupti.h) is in none of "
                      "${GPUUTIL_CUDA_INCLUDE_DIRS}")
endfunction()

function(gpuutil_call_params_table out)
  set(body "")
  set(structs 0)
  foreach(header generated_cuda_runtime_api_meta.h generated_cuda_meta.h)
    gpuutil_find_in_cuda_includes(${header} path)
    file(READ ${path} text)
    # List separators and brackets would split or merge CMake list items.
    string(REPLACE ";" "@SC@" text "${text}")
    string(REPLACE "[" "@LB@" text "${text}")
    string(REPLACE "]" "@RB@" text "${text}")
    string(REGEX MATCHALL "typedef struct [A-Za-z0-9_]+_params_st {[^}]*}" blocks "${text}")
    foreach(block ${blocks})
      string(REGEX REPLACE "^typedef struct ([A-Za-z0-9_]+)_params_st.*" "\\1" name "${block}")
      math(EXPR structs "${structs} + 1")
      set(t ${name}_params)
      set(stream -1)
      set(config -1)
      set(config_stream -1)
      set(count -1)
      set(event -1)
      if(block MATCHES "(\n|@SC@|{) *(cudaStream_t|CUstream) ([A-Za-z0-9_]+)@SC@")
        set(stream "GPUUTIL_OFF(${t}, ${CMAKE_MATCH_3})")
      endif()
      if(block MATCHES "const cudaLaunchConfig_t \\*([A-Za-z0-9_]+)@SC@")
        set(config "GPUUTIL_OFF(${t}, ${CMAKE_MATCH_1})")
        set(config_stream "GPUUTIL_OFF(cudaLaunchConfig_t, stream)")
      elseif(block MATCHES "const CUlaunchConfig \\*([A-Za-z0-9_]+)@SC@")
        set(config "GPUUTIL_OFF(${t}, ${CMAKE_MATCH_1})")
        set(config_stream "GPUUTIL_OFF(CUlaunchConfig, hStream)")
      endif()
      if(block MATCHES "(\n|@SC@|{) *size_t (count|ByteCount|N)@SC@")
        set(count "GPUUTIL_OFF(${t}, ${CMAKE_MATCH_2})")
      endif()
      if(block MATCHES "(\n|@SC@|{) *(cudaEvent_t|CUevent) ([A-Za-z0-9_]+)@SC@")
        set(event "GPUUTIL_OFF(${t}, ${CMAKE_MATCH_3})")
      endif()
      if(NOT "${stream}${config}${count}${event}" STREQUAL "-1-1-1-1")
        string(APPEND body "GPUUTIL_CALL_PARAMS(${name}, ${stream}, ${config}, ${config_stream}, ${count}, ${event})\n")
      endif()
    endforeach()
  endforeach()
  if(structs LESS 100)
    message(FATAL_ERROR "only ${structs} parameter structs found in CUPTI's generated headers: their format changed")
  endif()
  message(STATUS "gpuutil: call parameter table from ${structs} CUPTI parameter structs")
  file(WRITE ${out}.tmp "${body}")
  configure_file(${out}.tmp ${out} COPYONLY)
endfunction()
