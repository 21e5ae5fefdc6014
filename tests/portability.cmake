# Builds golden_draws.cpp with each compiler, standard library and
# optimisation level given, and checks every build prints EXPECTED exactly.
#   cmake -DSOURCE=... -DEXPECTED=... -DWORKDIR=... -DINCLUDES="a;b"
#         -DCONFIGS="g++|-O0;clang++|-stdlib=libc++ -O3" -P portability.cmake
file(MAKE_DIRECTORY "${WORKDIR}")
set(include_flags)
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags "-I${dir}")
endforeach()
file(READ "${EXPECTED}" expected)
set(index 0)
foreach(config IN LISTS CONFIGS)
  string(REPLACE "|" ";" parts "${config}")
  list(GET parts 0 compiler)
  list(GET parts 1 flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  math(EXPR index "${index} + 1")
  set(program "${WORKDIR}/golden_${index}")
  execute_process(
    COMMAND "${compiler}" -std=c++17 -ffp-contract=off ${flags} ${include_flags} "${SOURCE}" -o "${program}"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${compiler} ${flags}: build failed\n${err}")
  endif()
  execute_process(COMMAND "${program}" OUTPUT_VARIABLE actual RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT actual STREQUAL expected)
    message(FATAL_ERROR "${compiler} ${flags}: printed\n${actual}\nexpected\n${expected}")
  endif()
  message(STATUS "${compiler} ${flags}: same draws")
endforeach()
