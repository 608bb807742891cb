# Configures and builds the fuzz targets' tree (tests/fuzz/CMakeLists.txt)
# with clang++: the fixture test fuzz.build of tests/fuzz.cmake runs it, and
# bench/fuzz too. Variables: SOURCE_DIR (tests/fuzz), BINARY_DIR, CXX (the
# clang++), LAUNCHER (a compiler launcher such as ccache, or empty), JOBS.
foreach(var SOURCE_DIR BINARY_DIR CXX JOBS OPT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "tests/fuzz/build.cmake: -D${var}=... is required")
  endif()
endforeach()
set(launcher_arg "")
if(LAUNCHER)
  set(launcher_arg "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G Ninja
                        -DCMAKE_CXX_COMPILER=${CXX} -DAUTOACCEL_FUZZ_OPT=${OPT} ${launcher_arg}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} -j ${JOBS}
                COMMAND_ERROR_IS_FATAL ANY)
