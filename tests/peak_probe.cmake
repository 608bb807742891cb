# The CPU GEMM probe (LibTorch): only when the engine is built.
if(TARGET autoaccel_engine)
  add_executable(peak_probe_test ${CMAKE_CURRENT_LIST_DIR}/peak_probe_test.cc)
  target_link_libraries(peak_probe_test PRIVATE autoaccel_engine GTest::gtest_main)
  autoaccel_torch_pch(peak_probe_test)
  target_compile_definitions(peak_probe_test PRIVATE
    AUTOACCEL_TRIAL_BINARY="$<TARGET_FILE:autoaccel-trial>")
  add_dependencies(peak_probe_test autoaccel-trial)
  gtest_discover_tests(peak_probe_test TEST_PREFIX "engine." DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS engine)
endif()
