# ATorch-compatible strategy constraints: --include / --exclude methods and --load-strategy.
add_executable(methods_test ${CMAKE_CURRENT_LIST_DIR}/methods_test.cc)
target_link_libraries(methods_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(methods_test TEST_PREFIX "search.")
