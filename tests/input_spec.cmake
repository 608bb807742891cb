# The --input-spec text of TorchScript models (pure: the search library only).
add_executable(input_spec_test ${CMAKE_CURRENT_LIST_DIR}/input_spec_test.cc)
target_link_libraries(input_spec_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(input_spec_test TEST_PREFIX "input_spec.")
