# Which local address faces a peer (common/local_address): what a multi-rank
# trial's gloo process groups listen on.
add_executable(local_address_test ${CMAKE_CURRENT_LIST_DIR}/local_address_test.cc)
target_link_libraries(local_address_test PRIVATE autoaccel_common GTest::gmock_main)
gtest_discover_tests(local_address_test TEST_PREFIX "local_address.")
