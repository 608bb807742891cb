# The HTML job report: its figures and page from canned jobs, and the page
# opened in a real headless browser (Debian's chromium, from scripts/setup).
if(AUTOACCEL_BUILD_SERVICES)
  add_executable(report_test ${CMAKE_CURRENT_LIST_DIR}/report_test.cc)
  target_include_directories(report_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(report_test PRIVATE autoaccel_client_lib GTest::gmock_main)
  gtest_discover_tests(report_test TEST_PREFIX "report.")

  add_executable(write_fixture_report ${CMAKE_CURRENT_LIST_DIR}/report/write_fixture_report.cc)
  target_include_directories(write_fixture_report PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(write_fixture_report PRIVATE autoaccel_client_lib)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  add_test(NAME report.renders_in_headless_chromium
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/report/check_in_browser.py
                   $<TARGET_FILE:write_fixture_report> ${CMAKE_CURRENT_BINARY_DIR}/report_browser)
  set_tests_properties(report.renders_in_headless_chromium PROPERTIES TIMEOUT 300)
endif()
