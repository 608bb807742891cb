# docs/ARCHITECTURE.md's table of the coordinator's rooms names every header
# of server/ and its wings, and no file that is gone.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME docs.server_rooms
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/tools/check_server_rooms.py
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(docs.server_rooms PROPERTIES TIMEOUT 30 LABELS "docs")
