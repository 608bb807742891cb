if(TARGET autoaccel_store)
  add_executable(store_test ${CMAKE_CURRENT_LIST_DIR}/store_test.cc)
  # SQLite directly too: tests forge files (newer schema, garbage) by hand.
  target_link_libraries(store_test PRIVATE autoaccel_store SQLite::SQLite3 GTest::gmock_main)
  gtest_discover_tests(store_test TEST_PREFIX "store.")
endif()
