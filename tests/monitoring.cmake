# The coordinator's HTTP port: the Prometheus exposition (unit), and
# /metrics, /healthz and /readyz of a real server running a real job
# (end to end). Both check the exposition with Prometheus's own promtool
# (Debian's prometheus package, installed by scripts/setup).
if(AUTOACCEL_BUILD_SERVICES)
  find_program(AUTOACCEL_PROMTOOL promtool REQUIRED)
  autoaccel_service_test(prometheus_text_test monitoring LIBRARY autoaccel_server_lib
                         SOURCES prometheus_text_test.cc subprocess.cc)
  target_compile_definitions(prometheus_text_test PRIVATE PROMTOOL_BIN="${AUTOACCEL_PROMTOOL}")
  # The HTTP port itself over real sockets: bodies refused unread, slow
  # clients, ranges, oversized headers, the Host check, TLS.
  autoaccel_service_test(http_endpoint_test http LIBRARY autoaccel_http
                         SOURCES http_endpoint_test.cc)
endif()
if(AUTOACCEL_BUILD_SERVICES AND AUTOACCEL_BUILD_ENGINE)
  # cpp-httplib (Debian's libcpp-httplib-dev): the test's HTTP client.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  add_executable(monitoring_e2e_test monitoring_e2e_test.cc subprocess.cc)
  target_include_directories(monitoring_e2e_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(monitoring_e2e_test PRIVATE SQLite::SQLite3 GTest::gmock_main
                                                    absl::strings absl::time PkgConfig::CPP_HTTPLIB)
  target_compile_definitions(monitoring_e2e_test PRIVATE
    AUTOACCEL_SERVER_BIN="$<TARGET_FILE:autoaccel-server>"
    AUTOACCEL_WORKER_BIN="$<TARGET_FILE:autoaccel-worker>"
    AUTOACCEL_CLI_BIN="$<TARGET_FILE:autoaccel>"
    PROMTOOL_BIN="${AUTOACCEL_PROMTOOL}")
  add_dependencies(monitoring_e2e_test autoaccel-server autoaccel-worker autoaccel autoaccel-trial)
  gtest_discover_tests(monitoring_e2e_test TEST_PREFIX "e2e.monitoring." DISCOVERY_TIMEOUT 30
                       PROPERTIES TIMEOUT 300 LABELS "e2e;monitoring")
endif()
