if(AUTOACCEL_BUILD_SERVICES AND AUTOACCEL_BUILD_ENGINE)
  add_executable(e2e_test e2e_test.cc subprocess.cc)
  target_include_directories(e2e_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(e2e_test PRIVATE autoaccel_search SQLite::SQLite3 GTest::gmock_main)
  target_compile_definitions(e2e_test PRIVATE
    AUTOACCEL_SERVER_BIN="$<TARGET_FILE:autoaccel-server>"
    AUTOACCEL_WORKER_BIN="$<TARGET_FILE:autoaccel-worker>"
    AUTOACCEL_CLI_BIN="$<TARGET_FILE:autoaccel>")
  add_dependencies(e2e_test autoaccel-server autoaccel-worker autoaccel autoaccel-trial)
  # The torchscript test trains a module made by the scripted_models fixture
  # (tests/scripted_model.cmake).
  gtest_discover_tests(e2e_test TEST_PREFIX "e2e." DISCOVERY_TIMEOUT 30
                       PROPERTIES TIMEOUT 300 FIXTURES_REQUIRED scripted_models
                                  ENVIRONMENT
                                  "AUTOACCEL_SCRIPTED_MODELS=${CMAKE_CURRENT_BINARY_DIR}/scripted_models")
endif()

# TLS, tokens and the worker's session end to end, with the certificates and
# tokens of deploy/tls/.
if(AUTOACCEL_BUILD_SERVICES AND AUTOACCEL_BUILD_ENGINE)
  add_executable(security_e2e_test security_e2e_test.cc subprocess.cc)
  target_include_directories(security_e2e_test PRIVATE ${PROJECT_SOURCE_DIR})
  # cpp-httplib (built with OpenSSL): the HTTPS client of the HTTP port's checks.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  target_link_libraries(security_e2e_test PRIVATE autoaccel_api SQLite::SQLite3 GTest::gmock_main
                                                  PkgConfig::CPP_HTTPLIB)
  target_compile_definitions(security_e2e_test PRIVATE
    AUTOACCEL_SERVER_BIN="$<TARGET_FILE:autoaccel-server>"
    AUTOACCEL_WORKER_BIN="$<TARGET_FILE:autoaccel-worker>"
    AUTOACCEL_CLI_BIN="$<TARGET_FILE:autoaccel>"
    AUTOACCEL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(security_e2e_test autoaccel-server autoaccel-worker autoaccel autoaccel-trial)
  gtest_discover_tests(security_e2e_test TEST_PREFIX "e2e.security." DISCOVERY_TIMEOUT 30
                       PROPERTIES TIMEOUT 300 LABELS "e2e;security")
endif()
