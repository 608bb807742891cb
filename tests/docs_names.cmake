# The names the docs put in backticks (`JobManager`, `CheckLayout()`) exist in
# the tree: a renamed or removed function fails the docs that still name it.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME docs.names_exist
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/tools/check_doc_names.py
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(docs.names_exist PROPERTIES TIMEOUT 60 LABELS "docs")
