# Each folder includes only the folders below it (tests/tools/check_layers.py
# holds the table; docs/ARCHITECTURE.md says why): the trial runner, the
# exports, the report and the worker include nothing from search/.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME lint.layers
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/tools/check_layers.py
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(lint.layers PROPERTIES TIMEOUT 30 LABELS "docs")
