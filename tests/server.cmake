if(AUTOACCEL_BUILD_SERVICES)
  add_executable(job_manager_test job_manager_test.cc subprocess.cc)
  target_include_directories(job_manager_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(job_manager_test PRIVATE autoaccel_server_lib GTest::gmock_main)
  gtest_discover_tests(job_manager_test TEST_PREFIX "server." PROPERTIES TIMEOUT 60)
endif()

# The coordinator's pure rules: request bounds, rank outcomes, rendezvous ports.
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(server_rules_test tune_request_test.cc rank_outcome_test.cc worker_pool_test.cc)
  target_include_directories(server_rules_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(server_rules_test PRIVATE autoaccel_server_lib GTest::gmock_main)
  gtest_discover_tests(server_rules_test TEST_PREFIX "server." PROPERTIES TIMEOUT 60)
endif()
