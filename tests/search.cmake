# The pure search library, a file per subject: strategies and their forms, the
# ATorch-compatible constraints (--include / --exclude, --load-strategy), model
# specs and config edits, the search space, the exhaustive searcher, trials,
# what failures teach the search, and the clock (common/).
set(AUTOACCEL_SEARCH_TESTS strategy strategy_fields partial_strategy load_strategy atorch_strategy
                           method_filter model_spec config_override space exhaustive_searcher trial
                           failure_memory clock)
list(TRANSFORM AUTOACCEL_SEARCH_TESTS PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
list(TRANSFORM AUTOACCEL_SEARCH_TESTS APPEND _test.cc)
add_executable(search_test ${AUTOACCEL_SEARCH_TESTS})
target_link_libraries(search_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(search_test TEST_PREFIX "search.")

# The search algorithms against a simulated device.
add_executable(searchers_test ${CMAKE_CURRENT_LIST_DIR}/searchers_test.cc)
target_link_libraries(searchers_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(searchers_test TEST_PREFIX "search.")

# The algorithms and the cost model replayed against the recorded tables.
add_executable(search_replay_test ${CMAKE_CURRENT_LIST_DIR}/search_replay_test.cc)
target_compile_definitions(search_replay_test
                           PRIVATE AUTOACCEL_TABLES_DIR="${PROJECT_SOURCE_DIR}/bench/tables")
target_link_libraries(search_replay_test PRIVATE autoaccel_replay GTest::gmock_main)
gtest_discover_tests(search_replay_test TEST_PREFIX "search.")

# The wire form of the search's value types (proto/convert.h): the field tables
# against the messages' descriptors; the searched dimensions' table against
# TuneRequest and the Python client.
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(proto_convert_test ${CMAKE_CURRENT_LIST_DIR}/proto_convert_test.cc
                                    ${CMAKE_CURRENT_LIST_DIR}/space_dimensions_test.cc)
  target_link_libraries(proto_convert_test PRIVATE autoaccel_api GTest::gmock_main)
  target_compile_definitions(proto_convert_test PRIVATE AUTOACCEL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(proto_convert_test TEST_PREFIX "search.")
endif()
