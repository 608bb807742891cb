# The GPU peak table (pure: the search library only).
add_executable(device_peak_test ${CMAKE_CURRENT_LIST_DIR}/device_peak_test.cc)
target_link_libraries(device_peak_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(device_peak_test TEST_PREFIX "device_peak.")
