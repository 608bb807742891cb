# The Python reporting package (python/autoaccel) and the launcher examples
# (examples/), run with AUTOACCEL_PYTHON (.venv: torch, transformers,
# accelerate from scripts/setup) and the package from this tree (PYTHONPATH).
# tests/python/worker_sim.py launches the examples through
# deploy/examples/launchers.json as autoaccel-worker does, exporting with the
# CLI; world size 1 and 2 over gloo, 1 warm-up + 2 measured steps. Measured
# alone on 2 shared cores: trial_package ~4 s, hf_trainer ~30 s, torch_fsdp
# ~14 s, docs_minimal ~5 s.
if(AUTOACCEL_PYTHON)
  set(_aa_py_env "PYTHONPATH=${PROJECT_SOURCE_DIR}/python"
                 "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=1;CUDA_VISIBLE_DEVICES=")
  add_test(NAME python.trial_package
           COMMAND ${AUTOACCEL_PYTHON} -m unittest -v test_trial
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR}/python)
  set_tests_properties(python.trial_package PROPERTIES
    TIMEOUT 120 LABELS "python" ENVIRONMENT "${_aa_py_env}")
  if(TARGET autoaccel)
    # The examples, and the minimal json-only script of docs/LAUNCHERS.md.
    foreach(example hf_trainer torch_fsdp docs_minimal)
      add_test(NAME python.${example}_example
               COMMAND ${AUTOACCEL_PYTHON} -m unittest -v -k ${example} test_examples
               WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR}/python)
      set_tests_properties(python.${example}_example PROPERTIES
        TIMEOUT 300 LABELS "python"
        ENVIRONMENT "${_aa_py_env};AUTOACCEL_CLI=$<TARGET_FILE:autoaccel>")
    endforeach()
  endif()
endif()
