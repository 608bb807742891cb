# User TorchScript models (engine/scripted_model.h). The .pt files are made
# at test time by tests/scripted/make_models.py (torch in AUTOACCEL_PYTHON,
# a few seconds), a fixture every scripted_model test requires.
if(TARGET autoaccel_engine)
  set(AUTOACCEL_SCRIPTED_MODELS_DIR ${CMAKE_CURRENT_BINARY_DIR}/scripted_models)
  add_test(NAME scripted_model.make_models
           COMMAND ${AUTOACCEL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/scripted/make_models.py
                   ${AUTOACCEL_SCRIPTED_MODELS_DIR})
  set_tests_properties(scripted_model.make_models PROPERTIES
    FIXTURES_SETUP scripted_models TIMEOUT 120 LABELS engine ENVIRONMENT "OMP_NUM_THREADS=2")

  add_executable(scripted_model_test scripted_model_test.cc)
  target_link_libraries(scripted_model_test PRIVATE autoaccel_engine GTest::gmock_main)
  autoaccel_torch_pch(scripted_model_test)
  gtest_discover_tests(scripted_model_test TEST_PREFIX "scripted_model." DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300 LABELS engine FIXTURES_REQUIRED scripted_models
                                  ENVIRONMENT "AUTOACCEL_SCRIPTED_MODELS=${AUTOACCEL_SCRIPTED_MODELS_DIR}")
endif()
