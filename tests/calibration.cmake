# The cuda step-time priors against published training runs (bench/calibration.h,
# bench/tables/gpu_published.csv).
add_executable(calibration_test ${CMAKE_CURRENT_LIST_DIR}/calibration_test.cc)
target_compile_definitions(calibration_test PRIVATE AUTOACCEL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(calibration_test PRIVATE autoaccel_calibration GTest::gmock_main)
gtest_discover_tests(calibration_test TEST_PREFIX "bench.")
