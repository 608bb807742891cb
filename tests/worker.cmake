if(AUTOACCEL_BUILD_SERVICES)
  autoaccel_service_test(worker_test worker LIBRARY autoaccel_worker_lib
                         SOURCES worker_test.cc subprocess.cc)
endif()
