# The device catalog (search/device_catalog.h) and the cost model's topology.
add_executable(device_catalog_test ${CMAKE_CURRENT_LIST_DIR}/device_catalog_test.cc)
target_link_libraries(device_catalog_test PRIVATE autoaccel_search GTest::gmock_main)
gtest_discover_tests(device_catalog_test TEST_PREFIX "search.")
