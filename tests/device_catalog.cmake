# The device catalog (search/device_catalog.h) and the cost model's topology.
add_executable(device_catalog_test ${CMAKE_CURRENT_LIST_DIR}/device_catalog_test.cc)
target_link_libraries(device_catalog_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(device_catalog_test TEST_PREFIX "search.")

# Estimate without running (search/estimate.h).
add_executable(estimate_test ${CMAKE_CURRENT_LIST_DIR}/estimate_test.cc)
target_link_libraries(estimate_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(estimate_test TEST_PREFIX "search.")

# `autoaccel estimate` through the CLI binary (offline: no server).
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(estimate_cli_test ${CMAKE_CURRENT_LIST_DIR}/estimate_cli_test.cc
                                   ${CMAKE_CURRENT_LIST_DIR}/subprocess.cc)
  target_include_directories(estimate_cli_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(estimate_cli_test PRIVATE AUTOACCEL_CLI_BIN="$<TARGET_FILE:autoaccel>")
  target_link_libraries(estimate_cli_test PRIVATE autoaccel_search
                                                  GTest::gmock_main)
  add_dependencies(estimate_cli_test autoaccel)
  gtest_discover_tests(estimate_cli_test TEST_PREFIX "estimate_cli.")
endif()

# Time and cost to train (common/training_cost.h).
add_executable(training_cost_test ${CMAKE_CURRENT_LIST_DIR}/training_cost_test.cc)
target_link_libraries(training_cost_test PRIVATE autoaccel_common GTest::gmock_main)
gtest_discover_tests(training_cost_test TEST_PREFIX "estimate_cost.")
