# The coordinator's web dashboard: its routes on a real store and job manager
# (unit), and in a real headless browser (Debian's
# chromium driven by its chromedriver, both from scripts/setup): a real
# server with user tokens and two real workers, a running job's page gaining
# trials without a reload, its figures, the worker pool, the job list, the
# API's access rules and a console free of errors. About 15 s.
if(AUTOACCEL_BUILD_SERVICES)
  autoaccel_service_test(dashboard_routes_test dashboard LIBRARY autoaccel_http
                         SOURCES dashboard_routes_test.cc subprocess.cc)
endif()
if(AUTOACCEL_BUILD_SERVICES AND AUTOACCEL_BUILD_ENGINE)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  add_test(NAME dashboard.running_job_in_headless_chromium
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/dashboard/check_dashboard.py
                   $<TARGET_FILE:autoaccel-server> $<TARGET_FILE:autoaccel-worker>
                   $<TARGET_FILE:autoaccel> ${CMAKE_CURRENT_BINARY_DIR}/dashboard_browser)
  set_tests_properties(dashboard.running_job_in_headless_chromium PROPERTIES
                       TIMEOUT 180 LABELS "e2e;dashboard")
endif()
