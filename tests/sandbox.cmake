# The trial sandbox (worker/sandbox): the bwrap command it builds, and real
# ranks in it (shell-script runners, Python launcher scripts, the worker
# binary's start-up refusal). Needs bubblewrap (scripts/setup installs it).
if(AUTOACCEL_BUILD_SERVICES)
  autoaccel_service_test(sandbox_test sandbox LIBRARY autoaccel_worker_lib
                         SOURCES sandbox_test.cc subprocess.cc)
  target_compile_definitions(sandbox_test PRIVATE
    AUTOACCEL_WORKER_BIN="$<TARGET_FILE:autoaccel-worker>")
  add_dependencies(sandbox_test autoaccel-worker)
  # What killed workers leave behind, swept at the next start.
  autoaccel_service_test(stale_dirs_test sandbox LIBRARY autoaccel_worker_lib
                         SOURCES stale_dirs_test.cc subprocess.cc)
  # What of the worker's environment a rank inherits.
  autoaccel_service_test(rank_environment_test sandbox LIBRARY autoaccel_worker_lib
                         SOURCES rank_environment_test.cc)
endif()

# The probe's TorchScript models (tests/scripted/make_models.py: one reads a
# file outside the trial directory with torch.from_file, one writes one)
# run by the real trial runner as worker ranks, with and without the sandbox.
if(AUTOACCEL_BUILD_SERVICES AND TARGET autoaccel-trial)
  add_executable(sandbox_model_test sandbox_model_test.cc subprocess.cc)
  target_include_directories(sandbox_model_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(sandbox_model_test PRIVATE autoaccel_worker_lib GTest::gmock_main)
  target_compile_definitions(sandbox_model_test PRIVATE
    AUTOACCEL_TRIAL_BIN="$<TARGET_FILE:autoaccel-trial>")
  add_dependencies(sandbox_model_test autoaccel-trial)
  gtest_discover_tests(sandbox_model_test TEST_PREFIX "sandbox." DISCOVERY_MODE PRE_TEST
                       PROPERTIES TIMEOUT 120 LABELS engine FIXTURES_REQUIRED scripted_models
                                  ENVIRONMENT "AUTOACCEL_SCRIPTED_MODELS=${CMAKE_CURRENT_BINARY_DIR}/scripted_models")
endif()
