# `autoaccel watch` across a coordinator SIGKILLed and started again (real
# server and CLI processes; no worker, so no trial runner is needed).
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(watch_reconnect_e2e_test ${CMAKE_CURRENT_LIST_DIR}/watch_reconnect_e2e_test.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/subprocess.cc)
  target_include_directories(watch_reconnect_e2e_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(watch_reconnect_e2e_test PRIVATE absl::time absl::strings SQLite::SQLite3
                                                         GTest::gmock_main)
  target_compile_definitions(watch_reconnect_e2e_test PRIVATE
    AUTOACCEL_SERVER_BIN="$<TARGET_FILE:autoaccel-server>"
    AUTOACCEL_WORKER_BIN="$<TARGET_FILE:autoaccel-worker>"
    AUTOACCEL_CLI_BIN="$<TARGET_FILE:autoaccel>")
  add_dependencies(watch_reconnect_e2e_test autoaccel-server autoaccel-worker autoaccel)
  gtest_discover_tests(watch_reconnect_e2e_test TEST_PREFIX "e2e.watch_reconnect."
                       DISCOVERY_TIMEOUT 30 PROPERTIES TIMEOUT 180 LABELS "e2e")
endif()
