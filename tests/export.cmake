# The export formats (export/): each format's content, one fidelity row per
# strategy dimension, rejected combinations written nowhere, the ATorch round
# trip.
add_executable(export_test ${CMAKE_CURRENT_LIST_DIR}/export_test.cc)
# (The ATorch format is checked against search/atorch_strategy.h, which reads it back.)
target_link_libraries(export_test PRIVATE autoaccel_export autoaccel_search GTest::gmock_main)
gtest_discover_tests(export_test TEST_PREFIX "export.")

# The real frameworks read what the CLI exports (tests/export/check_*.py run
# `autoaccel export --strategy ... --out DIR --json` for a set of strategies):
# transformers' HfArgumentParser(TrainingArguments), accelerate's config
# loader, DeepSpeed's DeepSpeedConfig. scripts/setup installs transformers,
# accelerate and deepspeed into .venv (AUTOACCEL_PYTHON). Each takes a few
# seconds to import.
if(TARGET autoaccel)
  foreach(framework hf_trainer accelerate deepspeed)
    add_test(NAME export.${framework}_reads_the_export
             COMMAND ${AUTOACCEL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/export/check_${framework}.py
                     --autoaccel $<TARGET_FILE:autoaccel>)
    set_tests_properties(export.${framework}_reads_the_export PROPERTIES
      TIMEOUT 180 LABELS "export;framework"
      ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=2;DS_ACCELERATOR=cpu")
  endforeach()
endif()

# The real frameworks train with what the CLI exports (tests/export/run_export.py):
# the export's own launch command runs an ordinary training script of the
# framework (tests/export/train/) on one and two CPU ranks over gloo, and each
# rank reports what it applied — the user's hyperparameters, the parameter
# count, batch, accumulation, precision, ZeRO stage / FSDP, checkpointing and
# optimizer — which the test compares with the fidelity report. About 20 s a
# strategy on an idle 2-core machine (each rank imports torch, transformers
# and the framework).
# torchrun runs its launch.sh around a plain script that applies the strategy
# itself; torchrun:deepspeed and torchrun:lightning start those formats'
# entry points with torchrun instead of their own launchers (the other
# formats' own commands are torchrun already).
if(TARGET autoaccel)
  foreach(format hf-trainer accelerate deepspeed lightning torch torchrun torchrun:deepspeed
                 torchrun:lightning)
    string(REPLACE ":" "_" _aa_name ${format})
    add_test(NAME export.${_aa_name}_trains_with_the_export
             COMMAND ${AUTOACCEL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/export/run_export.py
                     --autoaccel $<TARGET_FILE:autoaccel> --format ${format})
    set_tests_properties(export.${_aa_name}_trains_with_the_export PROPERTIES
      TIMEOUT 900 LABELS "export;framework"
      ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=1;DS_ACCELERATOR=cpu;TOKENIZERS_PARALLELISM=false")
  endforeach()
endif()

# ColossalAI, FlagAI and torchtitan train with their exports the same way,
# each in its layered venv (scripts/setup: .venv-colossalai, .venv-flagai,
# .venv-torchtitan over .venv, since colossalai pins transformers 4.51.3 and
# flagai and torchtitan pull packages .venv must not get), whose python runs
# the driver and the launchers. Only what runs on CPU ranks (run_export.py's
# CASES say which do not, and why): colossalai 1 and 2 ranks, flagai 1 rank,
# torchtitan 1 and 2 (through train/torchtitan_cpu.py, torchtitan's entry
# point with CPU stand-ins for the GPU), a Qwen3-MoE among them with its
# experts over 2 ranks (ep=2). Measured on a 2-core machine with its load at
# 3.5-4.5: colossalai 37-52 s, flagai 16-21 s; torchtitan 65 s at load 1.5
# (45 s before the two Qwen3-MoE cases).
set(AUTOACCEL_COLOSSALAI_PYTHON "${PROJECT_SOURCE_DIR}/.venv-colossalai/bin/python"
    CACHE FILEPATH "python of the layered venv with colossalai (scripts/setup)")
set(AUTOACCEL_FLAGAI_PYTHON "${PROJECT_SOURCE_DIR}/.venv-flagai/bin/python"
    CACHE FILEPATH "python of the layered venv with flagai (scripts/setup)")
set(AUTOACCEL_TORCHTITAN_PYTHON "${PROJECT_SOURCE_DIR}/.venv-torchtitan/bin/python"
    CACHE FILEPATH "python of the layered venv with torchtitan (scripts/setup)")
if(TARGET autoaccel)
  foreach(format colossalai flagai torchtitan)
    string(TOUPPER ${format} _aa_upper)
    add_test(NAME export.${format}_trains_with_the_export
             COMMAND ${AUTOACCEL_${_aa_upper}_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/export/run_export.py
                     --autoaccel $<TARGET_FILE:autoaccel> --format ${format})
    set_tests_properties(export.${format}_trains_with_the_export PROPERTIES
      TIMEOUT 600 LABELS "export;framework"
      ENVIRONMENT "HF_HUB_OFFLINE=1;HF_DATASETS_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=1;TOKENIZERS_PARALLELISM=false")
    # And the wider set of exports.py read by the framework itself
    # (check_colossalai.py: the plugin classes' and Booster's signatures and
    # ColossalAI's own value lists; check_flagai.py: Trainer's signature and
    # DeepSpeed's config class; check_torchtitan.py: its ConfigManager, and
    # every family's flavor built by its model classes). colossalai ~17 s,
    # flagai ~4 s, torchtitan ~7 s.
    add_test(NAME export.${format}_reads_the_export
             COMMAND ${AUTOACCEL_${_aa_upper}_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/export/check_${format}.py
                     --autoaccel $<TARGET_FILE:autoaccel>)
    set_tests_properties(export.${format}_reads_the_export PROPERTIES
      TIMEOUT 180 LABELS "export;framework"
      ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=2;DS_ACCELERATOR=cpu")
  endforeach()
endif()

# megatron.core (the megatron-core wheel scripts/setup installs; Megatron-LM's
# own argument parser is in no package) takes the megatron export: the test
# maps megatron_args.txt onto TransformerConfig and GPTModel's arguments as
# Megatron-LM core_v0.16.1 does, and for a tiny config of every model family
# the config and the GPTModel it builds on the CPU have the architecture the
# export's section claims (tests/export/check_megatron.py). ~10 s.
if(TARGET autoaccel)
  add_test(NAME export.megatron_core_builds_the_export
           COMMAND ${AUTOACCEL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/export/check_megatron.py
                   --autoaccel $<TARGET_FILE:autoaccel>)
  set_tests_properties(export.megatron_core_builds_the_export PROPERTIES
    TIMEOUT 300 LABELS "export;framework"
    ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=2;CUDA_VISIBLE_DEVICES=")
endif()

# docs/CLI.md's fidelity tables are the exporter's own rows
# (tests/export/fidelity_tables.py --write regenerates them). ~5 s.
if(TARGET autoaccel)
  add_test(NAME docs.export_fidelity_tables
           COMMAND ${AUTOACCEL_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/export/fidelity_tables.py
                   --autoaccel $<TARGET_FILE:autoaccel>
                   --check ${CMAKE_CURRENT_LIST_DIR}/../docs/CLI.md)
  set_tests_properties(docs.export_fidelity_tables PROPERTIES TIMEOUT 120 LABELS "export;docs")
endif()

# ATorch itself applies the atorch export (tests/export/check_atorch.py):
# auto_accelerate(load_strategy=...) with the exported list trains a tiny
# Llama / Qwen2 on one and two CPU ranks (gloo), under the export's torchrun
# command, and what it returns is compared with the fidelity table; what
# ATorch cannot do on CPUs (bf16, half, zero2, fsdp, tp/pp layouts) is parsed
# by ATorch and its own error or rank groups checked. ATorch 0.2.5 needs
# transformers < 5: it runs in .venv-atorch, which scripts/setup layers on
# .venv. 20 s on an idle 2-core machine, 40 s at load average 5 (two
# launches that import ATorch).
set(AUTOACCEL_ATORCH_PYTHON "${PROJECT_SOURCE_DIR}/.venv-atorch/bin/python"
    CACHE FILEPATH "Python of the ATorch venv (scripts/setup creates it)")
if(TARGET autoaccel)
  add_test(NAME export.atorch_trains_with_the_export
           COMMAND ${AUTOACCEL_ATORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/export/check_atorch.py
                   --autoaccel $<TARGET_FILE:autoaccel>)
  set_tests_properties(export.atorch_trains_with_the_export PROPERTIES
    TIMEOUT 300 LABELS "export;framework" REQUIRED_FILES "${AUTOACCEL_ATORCH_PYTHON}"
    ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=1;CUDA_VISIBLE_DEVICES=")
endif()

# The CLI command: --job through an in-process server, --strategy without one.
if(TARGET autoaccel_client_lib)
  add_executable(export_command_test ${CMAKE_CURRENT_LIST_DIR}/export_command_test.cc)
  target_link_libraries(export_command_test PRIVATE autoaccel_client_lib GTest::gmock_main)
  gtest_discover_tests(export_command_test TEST_PREFIX "export.")
endif()
