# bench/chaos, short: one job with a 40 s limit while a random worker is
# SIGKILLed (and started again) every 5 s and the coordinator once in the
# middle; fails unless no trial is lost or duplicated, no process is left
# behind and the job ends SUCCEEDED within its limit + 5 s. Real trials: needs
# the trial runner.
if(AUTOACCEL_BUILD_SERVICES AND AUTOACCEL_BUILD_ENGINE)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  add_test(NAME chaos.short
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/bench/chaos
                   --bin ${CMAKE_RUNTIME_OUTPUT_DIRECTORY} --duration 40 --kill-every 5 --seed 1)
  # Four workers each running trials: alone, so the limit measures the job,
  # not the machine's other tests.
  set_tests_properties(chaos.short PROPERTIES TIMEOUT 240 LABELS "chaos;e2e" RUN_SERIAL TRUE)
endif()
