# Pure search library: strategies, model configs, the space and the searchers.
add_executable(search_test ${CMAKE_CURRENT_LIST_DIR}/search_test.cc)
target_link_libraries(search_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(search_test TEST_PREFIX "search.")

# The search algorithms against a simulated device.
add_executable(searchers_test ${CMAKE_CURRENT_LIST_DIR}/searchers_test.cc)
target_link_libraries(searchers_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(searchers_test TEST_PREFIX "search.")
