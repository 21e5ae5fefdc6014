# Consumes xsampler the two documented ways and runs the result:
#   MODE=find_package: cmake --install the build into a prefix, then
#                      find_package(xsampler) from it;
#   MODE=add_subdirectory: add_subdirectory of the source tree.
#   cmake -DMODE=... -DSOURCE_DIR=... -DBUILD_DIR=... -DWORKDIR=... -P run.cmake
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nfailed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(consumer "${SOURCE_DIR}/tests/package/${MODE}")
if(MODE STREQUAL "find_package")
  run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORKDIR}/prefix")
  if(NOT EXISTS "${WORKDIR}/prefix/include/xsampler/xsampler.hpp")
    message(FATAL_ERROR "the headers were not installed")
  endif()
  run("${CMAKE_COMMAND}" -S "${consumer}" -B "${WORKDIR}/build" "-DCMAKE_PREFIX_PATH=${WORKDIR}/prefix")
else()
  run("${CMAKE_COMMAND}" -S "${consumer}" -B "${WORKDIR}/build" "-DXSAMPLER_SOURCE_DIR=${SOURCE_DIR}")
endif()
run("${CMAKE_COMMAND}" --build "${WORKDIR}/build")
run("${WORKDIR}/build/consumer")
if(NOT last_output MATCHES "^xsampler [0-9]+\\.[0-9]+\\.[0-9]+ greedy 1 sampled [12]\n$")
  message(FATAL_ERROR "unexpected output: ${last_output}")
endif()
message(STATUS "${MODE}: ${last_output}")
