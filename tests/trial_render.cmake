if(AUTOACCEL_BUILD_SERVICES)
  # The CLI's trial table and trial JSON (client/render.h), and the model flags its
  # commands share (client/model_flags.h).
  add_executable(trial_render_test ${CMAKE_CURRENT_LIST_DIR}/trial_render_test.cc
                                   ${CMAKE_CURRENT_LIST_DIR}/model_flags_test.cc)
  target_include_directories(trial_render_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(trial_render_test PRIVATE autoaccel_client_lib GTest::gmock_main)
  gtest_discover_tests(trial_render_test TEST_PREFIX "client.")
endif()
