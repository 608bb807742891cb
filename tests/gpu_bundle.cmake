# The GPU check kept ready between GPU loans (docs/GPU.md): scripts/gpu-bundle
# packs the built binaries with the libraries they load into .gpu-bundle/ and
# fails when the bundle is over 60 MiB or a binary would load a library from
# outside it (glibc and, for the trial runner, LibTorch excepted); then
# scripts/gpu-e2e --cpu runs every step of the GPU check from the bundle on
# this machine's CPU with tiny models (server, worker, CLI, collectives, two
# tune jobs, estimate, a launcher trial, the engine-vs-PyTorch bench). ~2 min.
if(AUTOACCEL_BUILD_SERVICES AND TARGET autoaccel-trial AND TARGET autoaccel-server)
  add_test(NAME gpu.bundle_and_e2e_on_cpu
           COMMAND bash -c "scripts/gpu-bundle && scripts/gpu-e2e --cpu --python '${AUTOACCEL_PYTHON}' '${CMAKE_CURRENT_BINARY_DIR}/gpu-e2e-cpu'"
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(gpu.bundle_and_e2e_on_cpu PROPERTIES TIMEOUT 600 LABELS "gpu;e2e")
endif()
