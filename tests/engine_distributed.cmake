# Multi-rank trials: the test drives autoaccel-trial processes (one per rank)
# and links no LibTorch itself.
if(TARGET autoaccel-trial)
  add_executable(engine_distributed_test engine_distributed_test.cc subprocess.cc)
  target_include_directories(engine_distributed_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(engine_distributed_test PRIVATE autoaccel_trial_contract GTest::gmock_main)
  target_compile_definitions(engine_distributed_test PRIVATE
    AUTOACCEL_TRIAL_BINARY="$<TARGET_FILE:autoaccel-trial>")
  add_dependencies(engine_distributed_test autoaccel-trial)
  gtest_discover_tests(engine_distributed_test TEST_PREFIX "engine.distributed." DISCOVERY_TIMEOUT 30
                       PROPERTIES TIMEOUT 600 LABELS engine)
endif()
