if(TARGET autoaccel_store)
  add_executable(store_test ${CMAKE_CURRENT_LIST_DIR}/store_test.cc)
  # SQLite directly too: tests forge files (newer schema, garbage) by hand.
  # The server library for the coordinator's answer precedence the store executes.
  target_link_libraries(store_test PRIVATE autoaccel_store autoaccel_server_lib SQLite::SQLite3
                        GTest::gmock_main)
  gtest_discover_tests(store_test TEST_PREFIX "store.")
endif()
if(TARGET autoaccel_store)
  # The database file: damaged, foreign, deleted under a running store, backed up.
  add_executable(store_files_test ${CMAKE_CURRENT_LIST_DIR}/store_files_test.cc)
  target_include_directories(store_files_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(store_files_test PRIVATE autoaccel_store SQLite::SQLite3 GTest::gmock_main)
  if(TARGET autoaccel-server)
    target_sources(store_files_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/subprocess.cc)
    target_compile_definitions(store_files_test PRIVATE
      AUTOACCEL_SERVER_BIN="$<TARGET_FILE:autoaccel-server>")
    add_dependencies(store_files_test autoaccel-server)
  endif()
  gtest_discover_tests(store_files_test TEST_PREFIX "store." PROPERTIES TIMEOUT 120)
endif()
