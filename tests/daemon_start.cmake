# The start both daemons share: listen policy, insecure mark, log format.
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(daemon_start_test ${CMAKE_CURRENT_LIST_DIR}/daemon_start_test.cc)
  target_link_libraries(daemon_start_test PRIVATE autoaccel_common_grpc GTest::gmock_main)
  gtest_discover_tests(daemon_start_test TEST_PREFIX "daemon_start.")
endif()
