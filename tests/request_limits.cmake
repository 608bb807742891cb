if(AUTOACCEL_BUILD_SERVICES)
  # The bounds on every request (server/request_limits.h).
  autoaccel_service_test(request_limits_test server LIBRARY autoaccel_server_lib
                         SOURCES request_limits_test.cc)
endif()
