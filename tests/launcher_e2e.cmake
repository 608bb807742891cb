# End to end with the user's own scripts: a real server, a worker with the
# example launchers (deploy/examples/launchers.json: examples/hf_trainer
# and examples/torch_fsdp, run by the .venv Python with the autoaccel
# package that scripts/setup installs), the CLI tuning each through
# `tune --launcher` with world size 2 over gloo, and `export --job`.
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(launcher_e2e_test launcher_e2e_test.cc subprocess.cc)
  target_include_directories(launcher_e2e_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(launcher_e2e_test PRIVATE autoaccel_search SQLite::SQLite3
                                                  GTest::gmock_main)
  target_compile_definitions(launcher_e2e_test PRIVATE
    AUTOACCEL_SERVER_BIN="$<TARGET_FILE:autoaccel-server>"
    AUTOACCEL_WORKER_BIN="$<TARGET_FILE:autoaccel-worker>"
    AUTOACCEL_CLI_BIN="$<TARGET_FILE:autoaccel>"
    AUTOACCEL_PYTHON_BIN="${AUTOACCEL_PYTHON}"
    AUTOACCEL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(launcher_e2e_test autoaccel-server autoaccel-worker autoaccel)
  gtest_discover_tests(launcher_e2e_test TEST_PREFIX "e2e.launcher." DISCOVERY_TIMEOUT 30
                       PROPERTIES TIMEOUT 400 LABELS "e2e;launcher"
                                  ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1")
endif()
