if(AUTOACCEL_BUILD_SERVICES)
  # The CLI following a job across a lost coordinator (client/watch_retry.h):
  # the backoff schedule, the retried codes, and `watch` against an
  # in-process server whose stream breaks.
  add_executable(watch_retry_test ${CMAKE_CURRENT_LIST_DIR}/watch_retry_test.cc)
  target_include_directories(watch_retry_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(watch_retry_test PRIVATE autoaccel_client_lib GTest::gmock_main)
  gtest_discover_tests(watch_retry_test TEST_PREFIX "client.watch_retry.")
endif()
