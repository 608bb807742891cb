# The cost model (pure C++, part of the search library).
add_executable(cost_model_test ${CMAKE_CURRENT_LIST_DIR}/cost_model_test.cc)
target_link_libraries(cost_model_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(cost_model_test TEST_PREFIX "search.")
