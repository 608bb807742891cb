# The thread-safety annotations of the services, proven by clang (GCC, which
# builds the project, ignores them). Needs the build's compile_commands.json.
if(AUTOACCEL_BUILD_SERVICES)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  add_test(NAME lint.thread_safety
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/tools/check_thread_safety.py
                   ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} server worker common)
  set_tests_properties(lint.thread_safety PROPERTIES TIMEOUT 600)
endif()
