# The coordinator's SQLite store (jobs, trials, strategies).
add_library(autoaccel_store
  ${CMAKE_CURRENT_LIST_DIR}/store.cc ${CMAKE_CURRENT_LIST_DIR}/store_columns.cc
  ${CMAKE_CURRENT_LIST_DIR}/store_schema.cc ${CMAKE_CURRENT_LIST_DIR}/store_sqlite.cc
  ${CMAKE_CURRENT_LIST_DIR}/store_integrity.cc ${CMAKE_CURRENT_LIST_DIR}/store_backup.cc)
target_link_libraries(autoaccel_store
  PUBLIC autoaccel_search autoaccel_common absl::status absl::statusor absl::strings
         absl::synchronization absl::time
  PRIVATE SQLite::SQLite3 nlohmann_json::nlohmann_json)
