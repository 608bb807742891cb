# The trial contract (trial_contract/): TrialSpec and TrialResult as JSON.
add_executable(trial_contract_test ${CMAKE_CURRENT_LIST_DIR}/trial_contract_test.cc)
target_link_libraries(trial_contract_test PRIVATE autoaccel_trial_contract GTest::gmock_main)
gtest_discover_tests(trial_contract_test TEST_PREFIX "trial_contract.")
