if(AUTOACCEL_BUILD_SERVICES)
  # The strategy database through the real gRPC service and the CLI's
  # commands: tune answered from it, `strategies`, `best`.
  autoaccel_service_test(strategy_database_test server LIBRARY autoaccel_server_lib
                         SOURCES strategy_database_test.cc subprocess.cc)
  target_link_libraries(strategy_database_test PRIVATE autoaccel_client_lib)
endif()
