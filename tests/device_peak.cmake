# The GPU datasheet-peak table (worker/device_peak.h; pure, but part of the
# worker's library).
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(device_peak_test ${CMAKE_CURRENT_LIST_DIR}/device_peak_test.cc)
  target_link_libraries(device_peak_test PRIVATE autoaccel_worker_lib GTest::gmock_main)
  gtest_discover_tests(device_peak_test TEST_PREFIX "device_peak.")
endif()
