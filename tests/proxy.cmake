# Proxy trials and their extrapolation (pure C++, part of the search library).
add_executable(proxy_test ${CMAKE_CURRENT_LIST_DIR}/proxy_test.cc)
target_link_libraries(proxy_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(proxy_test TEST_PREFIX "search.")
