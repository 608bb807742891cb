# A job's states and their names (common/job_state).
add_executable(job_state_test ${CMAKE_CURRENT_LIST_DIR}/job_state_test.cc)
target_link_libraries(job_state_test PRIVATE autoaccel_common GTest::gmock_main)
gtest_discover_tests(job_state_test TEST_PREFIX "job_state.")
