# LibTorch engine tests: only when the engine is built.
if(TARGET autoaccel_engine)
  add_executable(engine_test engine_test.cc)
  target_link_libraries(engine_test PRIVATE autoaccel_engine GTest::gtest_main)
  autoaccel_torch_pch(engine_test)
  target_compile_definitions(engine_test PRIVATE
    AUTOACCEL_TRIAL_BINARY="$<TARGET_FILE:autoaccel-trial>")
  add_dependencies(engine_test autoaccel-trial)
  # PRE_TEST: listing the tests loads LibTorch (a few seconds); do it when
  # ctest runs rather than on every build.
  gtest_discover_tests(engine_test TEST_PREFIX "engine." DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300 LABELS engine)

  # The other model families, their strategies and weight files.
  add_executable(engine_models_test engine_models_test.cc)
  target_link_libraries(engine_models_test PRIVATE autoaccel_engine GTest::gmock_main)
  autoaccel_torch_pch(engine_models_test)
  gtest_discover_tests(engine_models_test TEST_PREFIX "engine." DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 LABELS engine)

  # fp8 linear layers: scaling, casting, Fp8Linear's forward and gradients.
  add_executable(fp8_linear_test fp8_linear_test.cc)
  target_link_libraries(fp8_linear_test PRIVATE autoaccel_engine GTest::gtest_main)
  autoaccel_torch_pch(fp8_linear_test)
  gtest_discover_tests(fp8_linear_test TEST_PREFIX "engine." DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS engine)

  # The single-device strategies: checkpointing variants, precisions,
  # optimizers, offload, MFU.
  add_executable(engine_strategies_test engine_strategies_test.cc)
  target_link_libraries(engine_strategies_test PRIVATE autoaccel_engine GTest::gtest_main)
  autoaccel_torch_pch(engine_strategies_test)
  gtest_discover_tests(engine_strategies_test TEST_PREFIX "engine." DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 LABELS engine)
endif()
