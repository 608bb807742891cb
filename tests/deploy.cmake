# The deployment files of deploy/: the Dockerfiles checked without a build
# (COPY sources, CMake targets, entrypoint flags against the binaries' --help,
# ports against the manifests), the Kubernetes manifests rendered with kubectl's
# kustomize and checked against the API schema (Debian's python3-kubernetes
# models; no cluster) and for their wiring. System python: python3-kubernetes
# and python3-yaml are Debian packages (scripts/setup). A few seconds each.
if(AUTOACCEL_BUILD_SERVICES AND TARGET autoaccel-trial)
  find_program(AUTOACCEL_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  find_program(AUTOACCEL_KUBECTL kubectl)
  if(NOT AUTOACCEL_KUBECTL)
    set(AUTOACCEL_KUBECTL kubectl)  # the checks then say what to install
  endif()
  set(_aa_deploy_binaries
      --binary autoaccel-server=$<TARGET_FILE:autoaccel-server>
      --binary autoaccel=$<TARGET_FILE:autoaccel>
      --binary autoaccel-worker=$<TARGET_FILE:autoaccel-worker>
      --binary autoaccel-trial=$<TARGET_FILE:autoaccel-trial>)
  foreach(check containers kubernetes)
    add_test(NAME deploy.${check}
             COMMAND ${AUTOACCEL_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/deploy/check_${check}.py
                     --kubectl ${AUTOACCEL_KUBECTL} ${_aa_deploy_binaries})
    set_tests_properties(deploy.${check} PROPERTIES TIMEOUT 120 LABELS deploy)
  endforeach()
endif()

# deploy/slurm/autoaccel.sbatch run by a one-node Slurm cluster the test starts
# (munge, slurmctld, slurmd from scripts/setup; as root): coordinator, worker,
# a 2-trial tune of gpt2-tiny on one cpu slot, export, shutdown. Skipped (77)
# without Slurm or root.
if(AUTOACCEL_BUILD_SERVICES AND TARGET autoaccel-trial)
  add_test(NAME deploy.slurm_single_node
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deploy/slurm_single_node.sh
                   $<TARGET_FILE_DIR:autoaccel-server>)
  set_tests_properties(deploy.slurm_single_node PROPERTIES
    TIMEOUT 240 LABELS "deploy;slurm" SKIP_RETURN_CODE 77)
endif()

# The coordinator image built with podman and run (TLS, tokens, the CLI inside,
# an orderly stop, the database on its volume). Opt-in: compiling the server in
# the image takes ~11 minutes on 2 cores the first time (~10 s once cached).
option(AUTOACCEL_CONTAINER_TESTS "Build and run the coordinator image with podman in a test" OFF)
if(AUTOACCEL_CONTAINER_TESTS)
  add_test(NAME deploy.coordinator_image
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deploy/coordinator_image.sh)
  set_tests_properties(deploy.coordinator_image PROPERTIES
    TIMEOUT 1800 LABELS "deploy;container" SKIP_RETURN_CODE 77)
endif()
