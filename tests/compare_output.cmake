# Runs PROGRAM and fails unless its standard output equals the file EXPECTED.
#   cmake -DPROGRAM=... -DEXPECTED=... -P compare_output.cmake
execute_process(COMMAND "${PROGRAM}" OUTPUT_VARIABLE actual RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}")
endif()
file(READ "${EXPECTED}" expected)
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "${PROGRAM} printed\n${actual}\nexpected (${EXPECTED})\n${expected}")
endif()
