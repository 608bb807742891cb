if(AUTOACCEL_BUILD_SERVICES)
  autoaccel_service_test(worker_test worker LIBRARY autoaccel_worker_lib
                         SOURCES worker_test.cc subprocess.cc)
  # The work dir's janitor: which finished ranks' directories stay.
  autoaccel_service_test(trial_dir_janitor_test worker LIBRARY autoaccel_worker_lib
                         SOURCES trial_dir_janitor_test.cc subprocess.cc)
  # The worker's cache of torchscript model files.
  autoaccel_service_test(model_file_cache_test worker LIBRARY autoaccel_worker_lib
                         SOURCES model_file_cache_test.cc subprocess.cc)
  # What `autoaccel logs` reads of a rank's directory.
  autoaccel_service_test(rank_logs_test worker LIBRARY autoaccel_worker_lib
                         SOURCES rank_logs_test.cc subprocess.cc)
endif()
