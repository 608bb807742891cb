# The libFuzzer targets of the parsers of outside input (tests/fuzz/): built
# by clang++ in a second tree, build/fuzz, by the fixture test fuzz.build
# (tests/fuzz/build.cmake), then each run for a few seconds on its seed
# corpus as fuzz.<target> (label fuzz). bench/fuzz runs them for minutes.
option(AUTOACCEL_FUZZ "Build and run the libFuzzer targets (clang++, libfuzzer-14-dev)" ON)
if(AUTOACCEL_FUZZ)
  find_program(AUTOACCEL_FUZZ_CXX NAMES clang++-14 clang++)
  if(AUTOACCEL_FUZZ_CXX)
    execute_process(COMMAND ${AUTOACCEL_FUZZ_CXX} -print-resource-dir
                    OUTPUT_VARIABLE fuzz_resource_dir OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(NOT AUTOACCEL_FUZZ_CXX OR NOT EXISTS ${fuzz_resource_dir}/lib/linux/libclang_rt.fuzzer-x86_64.a)
    message(FATAL_ERROR "The fuzz tests need clang++ and libFuzzer: apt-get install clang "
                        "libfuzzer-14-dev (scripts/setup does), or configure with -DAUTOACCEL_FUZZ=OFF")
  endif()
  set(fuzz_dir ${CMAKE_BINARY_DIR}/fuzz)
  add_test(NAME fuzz.build
           COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}/fuzz -DBINARY_DIR=${fuzz_dir}
                   -DCXX=${AUTOACCEL_FUZZ_CXX} "-DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}" -DJOBS=1
                   -DOPT=-O0
                   -P ${CMAKE_CURRENT_LIST_DIR}/fuzz/build.cmake)
  # One compile at a time, started first (COST), so that the build (about
  # 2.5 CPU-minutes cold, at -O0) runs beside the other tests, not after them.
  set_tests_properties(fuzz.build PROPERTIES FIXTURES_SETUP fuzz_build LABELS fuzz TIMEOUT 1800
                                             COST 10000)
  file(GLOB fuzz_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz/*_fuzz.cc)
  foreach(source ${fuzz_sources})
    get_filename_component(target ${source} NAME_WE)
    string(REGEX REPLACE "_fuzz$" "" name ${target})
    add_test(NAME fuzz.${name}
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/fuzz/run_target.sh ${fuzz_dir}/${target}
                     ${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/${name} ${fuzz_dir}/work/${name}
                     -max_total_time=3)
    set_tests_properties(fuzz.${name} PROPERTIES FIXTURES_REQUIRED fuzz_build LABELS fuzz
                                                 TIMEOUT 60)
  endforeach()
endif()
