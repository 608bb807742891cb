if(AUTOACCEL_BUILD_SERVICES)
  # The job manager with a fake executor and clock.
  autoaccel_service_test(job_manager_test server LIBRARY autoaccel_server_lib
                         SOURCES job_manager_test.cc job_manager_restart_test.cc job_manager_pool_test.cc
                                 job_manager_answers_test.cc job_manager_store_test.cc subprocess.cc)
  # The coordinator's pure rules: request bounds, rank outcomes, rendezvous
  # ports, the worker pool, how sure an answer is, which stored answer wins, how a
  # watched job is cut into events, what warm start reads of earlier jobs.
  autoaccel_service_test(server_rules_test server LIBRARY autoaccel_server_lib
                         SOURCES tune_request_test.cc rank_outcome_test.cc worker_pool_test.cc
                                 launcher_job_test.cc settle_test.cc answer_so_far_test.cc
                                 job_view_test.cc answer_precedence_test.cc warm_start_test.cc)
  # Who may call the coordinator: tokens, job owners, the join token, worker
  # sessions, through the real gRPC services.
  autoaccel_service_test(service_auth_test server LIBRARY autoaccel_server_lib
                         SOURCES service_auth_test.cc subprocess.cc)
  # Requests the services cannot parse: INVALID_ARGUMENT naming the field.
  autoaccel_service_test(service_parse_test server LIBRARY autoaccel_server_lib
                         SOURCES service_parse_test.cc subprocess.cc)
endif()
