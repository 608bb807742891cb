# Durations, the UTF-8 check and trial reasons (common/duration, common/utf8,
# common/trial_reason).
add_executable(common_text_test ${CMAKE_CURRENT_LIST_DIR}/common_text_test.cc)
target_link_libraries(common_text_test PRIVATE autoaccel_common GTest::gmock_main)
gtest_discover_tests(common_text_test TEST_PREFIX "common_text.")
