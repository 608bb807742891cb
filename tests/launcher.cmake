# Launcher trials (worker/launchers, launcher_trial, metrics_file): the
# launchers file, placeholders, the metrics protocol and metrics (pure), and
# real standard-library Python scripts run as trial ranks directly and
# through the worker's gRPC service.
if(AUTOACCEL_BUILD_SERVICES)
  autoaccel_service_test(launcher_test launcher LIBRARY autoaccel_worker_lib
                         SOURCES launcher_test.cc subprocess.cc)
  autoaccel_service_test(launcher_process_test launcher LIBRARY autoaccel_worker_lib
                         SOURCES launcher_process_test.cc subprocess.cc)
  # One test parses the rank's argv with transformers in AUTOACCEL_PYTHON
  # (skipped where it is not installed).
  target_compile_definitions(launcher_process_test PRIVATE
    AUTOACCEL_PYTHON_BIN="${AUTOACCEL_PYTHON}")
endif()

# The worker binary's --launchers flag: refused at start, printed, advertised.
if(AUTOACCEL_BUILD_SERVICES)
  autoaccel_service_test(launcher_worker_binary_test launcher LIBRARY autoaccel_worker_lib
                         SOURCES launcher_worker_binary_test.cc subprocess.cc)
  target_compile_definitions(launcher_worker_binary_test PRIVATE
    AUTOACCEL_WORKER_BIN="$<TARGET_FILE:autoaccel-worker>")
  add_dependencies(launcher_worker_binary_test autoaccel-worker)
endif()
